// SPDX-License-Identifier: Apache-2.0
// binding_node (bindings/node/CMakeLists.txt): the Node.js module against `chash lookup`, the
// oracle, for every scheme of the registry (`chash algorithms --json`) and 10,000 keys (ASCII,
// long, non-ASCII, binary), owner and replica order; a nutcracker YAML pool routed the same;
// errors, key forms, the finalizer, the npm tarball and the Debian package.
// Environment: CHASH_NODE_MODULE (the staged module directory), CHASH_CLI (chash of the same
// build), CHASH_NODE_TGZ, CHASH_NODE_DEB_DIR, CHASH_SOURCE; LD_LIBRARY_PATH finds libchash.
'use strict';

const test = require('node:test');
const assert = require('node:assert/strict');
const { spawnSync } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');

function env(name) {
  const v = process.env[name];
  if (!v) throw new Error(`binding_node: ${name} is not set (run through ctest)`);
  return v;
}
const chash = require(env('CHASH_NODE_MODULE'));
const CLI = env('CHASH_CLI');
const SOURCE = env('CHASH_SOURCE');

// ---- the oracle: one `chash lookup` run per scheme, all keys on stdin -----------------------
function cli(args, input) {
  const r = spawnSync(CLI, args, { input, maxBuffer: 1 << 30 });
  // EPIPE: the CLI refused its arguments and exited before reading the keys (status, stderr).
  if (r.error && r.error.code !== 'EPIPE') throw r.error;
  return { status: r.status, stdout: r.stdout.toString('utf8'), stderr: r.stderr.toString('utf8') };
}

// Records of `chash lookup --json -`, one per key in input order; each record's key is checked
// against ours (key_hex when the key is not UTF-8), so a line the CLI reads differently shows.
function oracle(args, keys) {
  const input = Buffer.concat(keys.flatMap((k) => [Buffer.from(k), Buffer.from('\n')]));
  const r = cli(['lookup', ...args, '--json', '-'], input);
  if (r.status !== 0) return { error: r.stderr.trim() };
  const recs = r.stdout.split('\n').filter((l) => l.length).map((l) => JSON.parse(l));
  assert.equal(recs.length, keys.length, `chash lookup ${args.join(' ')}: one record per key`);
  recs.forEach((rec, i) => {
    const got = rec.key_hex !== undefined ? Buffer.from(rec.key_hex, 'hex') : Buffer.from(rec.key, 'utf8');
    assert.ok(got.equals(Buffer.from(keys[i])), `key ${i}: the CLI read ${JSON.stringify(rec.key)}`);
  });
  return { recs };
}

// ---- 10,000 keys, deterministic --------------------------------------------------------------
function rng(seed) {
  let x = seed >>> 0 || 1;
  return () => {
    x ^= x << 13; x >>>= 0; x ^= x >>> 17; x ^= x << 5; x >>>= 0;
    return x;
  };
}
const NON_ASCII = ['é', 'ß', 'ü', 'ñ', 'Ω', 'ж', '中', '文', 'キ', '한', '€', '😀', '🎉', '𝄞', 'ﬁ'];
function makeKeys() {
  const r = rng(29);
  const keys = [''];
  const ascii = (n) => {
    let s = '';
    for (let i = 0; i < n; i++) {
      const c = r() % 97;
      s += c === 95 ? '\t' : c === 96 ? '\r' : String.fromCharCode(32 + c);
    }
    return s;
  };
  for (let i = 0; i < 2000; i++) keys.push(`user:${i}`);
  for (let i = 0; i < 2000; i++) keys.push(ascii(1 + (r() % 40)));
  // Long keys, across the addon's 512-byte stack buffer (multi-byte characters at its edge).
  for (let i = 0; i < 1500; i++) {
    const n = i < 500 ? 500 + (i % 20) : 513 + (r() % 3000);
    let s = ascii(n);
    if (i % 3 === 0) s = s.slice(0, n - 6) + NON_ASCII[r() % NON_ASCII.length] + s.slice(n - 5);
    keys.push(s);
  }
  for (let i = 0; i < 2499; i++) {
    let s = '';
    const n = 1 + (r() % 16);
    for (let j = 0; j < n; j++) s += r() % 3 ? NON_ASCII[r() % NON_ASCII.length] : ascii(1);
    keys.push(s);
  }
  // Bytes: any byte but \n (the oracle reads lines), so NULs, \r and invalid UTF-8 too.
  for (let i = 0; i < 2000; i++) {
    const b = Buffer.alloc(1 + (r() % 64));
    for (let j = 0; j < b.length; j++) {
      let v = r() & 0xff;
      if (v === 0x0a) v = 0x0b;
      b[j] = v;
    }
    keys.push(b);
  }
  assert.equal(keys.length, 10000);
  return keys;
}
const KEYS = makeKeys();

// The registry, from the CLI (never a hand-typed list), and the module's own view of it.
const REGISTRY = JSON.parse(cli(['algorithms', '--json']).stdout).algorithms;

test('the module lists the same schemes and hashes as chash', () => {
  assert.deepEqual(chash.algorithms(), REGISTRY.map((a) => a.name));
  const hashes = JSON.parse(cli(['hashes', '--json']).stdout).hashes.map((h) => h.name);
  assert.deepEqual(chash.hashes(), hashes);
  for (const a of REGISTRY) {
    const m = chash.ALGORITHMS.find((x) => x.name === a.name);
    assert.equal(m.weighted, a.weighted, a.name);
    assert.equal(m.keyed, a.keyed, a.name);
    assert.equal(m.fixedHash, a.fixed_hash, a.name);
    assert.equal(m.wholeWeights, a.whole_weights, a.name);
    assert.equal(m.consistent, a.consistent, a.name);
    assert.equal(m.limits, a.limits, a.name);
  }
  assert.match(chash.version, /^\d+\.\d+\.\d+$/);
});

// Every scheme: 8 nodes named as servers ("10.0.0.i:11211"), weighted where the scheme takes
// weights; 3 replicas where it has a walk (a scheme without one is refused by both, CH_EUNSUPPORTED).
for (const a of REGISTRY) {
  test(`${a.name}: 10,000 keys, owner and replica order as chash lookup`, () => {
    // twemproxy's random draws a server per request, and chash lookup shows one draw; the
    // library's lookup is its documented deterministic h % N over the key's hash (chash.h),
    // which is modulo's placement and walk for every key but the empty one (hash 0: node 0).
    // random ignores weights; modulo refuses unequal ones.
    const as = a.name === 'random' ? 'modulo' : a.name;
    const weighted = a.weighted && as === a.name;
    const nodes = [];
    for (let i = 1; i <= 8; i++) nodes.push({ id: `10.0.0.${i}:11211`, weight: weighted ? 1 + (i % 3) : 1 });
    const spec = nodes.map((n) => `${n.id}:${n.weight}`).join(',');
    const table = new chash.Table(nodes, { algorithm: a.name });
    assert.equal(table.algorithm, a.name);
    let r = 3;
    let o = oracle(['--nodes', spec, '--algo', as, '--replicas', '3'], KEYS);
    if (o.error) {
      assert.throws(() => table.replicas('k', 3), { code: 'CH_EUNSUPPORTED' }, o.error);
      r = 1;
      o = oracle(['--nodes', spec, '--algo', as], KEYS);
      assert.ok(!o.error, o.error);
    }
    if (as !== a.name) {
      assert.equal(KEYS[0], '');
      assert.equal(table.keyHash(''), 0n);
      o.recs[0] = { owner: nodes[0].id, nodes: [0, 1, 2].map((j) => ({ node: nodes[j].id })) };
    }
    const many = table.lookupMany(KEYS);
    for (let i = 0; i < KEYS.length; i++) {
      const rec = o.recs[i];
      const k = KEYS[i];
      assert.equal(table.lookup(k), rec.owner, `key ${i} ${JSON.stringify(k)}: owner`);
      assert.equal(many[i], rec.owner, `key ${i}: lookupMany`);
      if (a.keyed) continue; // no walk: only the owner
      if (r > 1) {
        assert.deepEqual(table.replicas(k, r), rec.nodes.map((x) => x.node), `key ${i}: replicas`);
      }
    }
  });
}

// A nutcracker pool, as chash-proxy routes it: every pool of the README's file and the
// example's fleet (named servers, weights, hash_tag).
const POOLS = [
  [path.join(SOURCE, 'tests/config/fixtures/valid_readme.yml'), null],
  [path.join(SOURCE, 'bindings/node/examples/fleet.yml'), 'cache'],
];
for (const [file, only] of POOLS) {
  test(`pools of ${path.basename(file)}: routed as chash lookup --config`, () => {
    const names = only ? [only] : fs.readFileSync(file, 'utf8').match(/^[A-Za-z0-9_]+(?=:)/gm);
    assert.ok(names.length >= 1);
    for (const pool of names) {
      const table = chash.fromConfig(file, pool);
      const o = oracle(['--config', file, '--pool', pool, '--replicas', '2'], KEYS);
      assert.ok(!o.error, o.error);
      const show = cli(['lookup', '--config', file, '--pool', pool, '--show-version', 'x']).stdout;
      assert.equal(`# version ${table.version}`, show.split('\n')[0], `${pool}: version`);
      for (let i = 0; i < KEYS.length; i++) {
        const rec = o.recs[i];
        assert.equal(table.lookupAddress(KEYS[i]), rec.owner, `${pool} key ${i}: owner`);
        const reps = table.replicaIndexes(KEYS[i], 2);
        assert.deepEqual(reps.map((j) => table.addrs[j]), rec.nodes.map((x) => x.node), `${pool} key ${i}`);
        assert.deepEqual(reps.map((j) => table.names[j]), rec.nodes.map((x) => x.name), `${pool} key ${i}`);
      }
    }
  });
}

test('options.hashTag places as the pool with that hash_tag', () => {
  const f = chash.fromConfig(path.join(SOURCE, 'bindings/node/examples/fleet.yml'), 'cache');
  const w = f.info().weights;
  const nodes = f.nodes.map((id, i) => ({ id, weight: w[i] }));
  const tagged = new chash.Table(nodes, { algorithm: f.algorithm, hash: f.hash, hashTag: '{}' });
  const plain = new chash.Table(nodes, { algorithm: f.algorithm, hash: f.hash });
  const keys = KEYS.concat(Array.from({ length: 1000 }, (_, i) => `{user:${i % 10}}:${i}`));
  assert.deepEqual(tagged.lookupMany(keys), f.lookupMany(keys));
  assert.notDeepEqual(plain.lookupMany(keys), f.lookupMany(keys));
  assert.equal(tagged.keyHash('{abc}xyz'), tagged.keyHash('abc'));
});

test('a membership document places as the same pool in a file', () => {
  const doc = JSON.stringify({ servers: ['10.1.0.1:6379:1 a', '10.1.0.2:6379:2 b', '10.1.0.3:6379:1 c'],
    hash: 'murmur', distribution: 'ketama', version: 'v7', epoch: 3 });
  const t = chash.fromMembershipDocument(doc, 'etcd://x/k');
  assert.equal(t.version, 'v7');
  assert.equal(t.epoch, 3);
  assert.equal(t.algorithm, 'ketama');
  assert.equal(t.hash, 'murmur');
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'chash-node-'));
  try {
    const file = path.join(dir, 'p.yml');
    fs.writeFileSync(file, 'p:\n  hash: murmur\n  distribution: ketama\n  servers:\n' +
      '    - 10.1.0.1:6379:1 a\n    - 10.1.0.2:6379:2 b\n    - 10.1.0.3:6379:1 c\n');
    const f = chash.fromConfig(file);
    assert.deepEqual(t.lookupMany(KEYS), f.lookupMany(KEYS));
  } finally {
    fs.rmSync(dir, { recursive: true });
  }
  assert.throws(() => chash.fromMembershipDocument('servers: [', 'doc'), (e) => e.code === 'CH_EINVAL' && /^doc:\d+:\d+: /.test(e.message));
});

test('errors carry libchash messages and status names', () => {
  assert.throws(() => new chash.Table(['a', 'a']), { code: 'CH_EDUPID', message: 'nodes 0 and 1 have the same id "a"' });
  assert.throws(() => new chash.Table([]), { code: 'CH_EEMPTY', message: 'no nodes (n is 0)' });
  assert.throws(() => new chash.Table(['']), { code: 'CH_EBADID' });
  assert.throws(() => new chash.Table([{ id: 'a', weight: -1 }]), { code: 'CH_EWEIGHT' });
  assert.throws(() => new chash.Table(['a'], { algorithm: 'nope' }), { code: 'CH_EUNKNOWN', message: /^unknown name: algorithm 'nope'/ });
  assert.throws(() => new chash.Table(['a'], { hash: 'sha1' }), { code: 'CH_EUNKNOWN' });
  assert.throws(() => new chash.Table(['a', { id: 'b', weight: 2 }], { algorithm: 'jump' }), { code: 'CH_EUNSUPPORTED' });
  assert.throws(() => new chash.Table(['a'], { algorithm: 'maglev', tableSize: 4 }), { code: 'CH_EINVAL' });
  assert.throws(() => new chash.Table(['a\u0000b']), { code: 'CH_EINVAL' });
  assert.throws(() => new chash.Table(['a'], { hashTag: '{' }), { code: 'CH_EINVAL' });
  assert.throws(() => new chash.Table(['a']).lookup(42), TypeError);
  assert.throws(() => new chash.Table(['a']).lookupMany([1]), TypeError);
  assert.throws(() => chash.fromConfig(path.join(SOURCE, 'tests/config/fixtures/err_hash.yml')),
    (e) => e.code === 'CH_EINVAL' && /err_hash\.yml:2:9: unknown hash "sha1"/.test(e.message));
  assert.throws(() => chash.fromConfig('/nonexistent/x.yml'), { code: 'CH_EINVAL' });
  assert.throws(() => chash.fromConfig(path.join(SOURCE, 'tests/config/fixtures/valid_readme.yml')), /has 5 pools/);
});

test('a NUL in a string that goes to C is refused, naming the argument', () => {
  const cfg = path.join(SOURCE, 'tests/config/fixtures/valid_quirks.yml');
  const doc = JSON.stringify({ servers: ['127.0.0.1:6379:1 a'] });
  for (const [what, fn] of [
    ['algorithm', () => new chash.Table(['a', 'b'], { algorithm: 'ring\u0000x' })],
    ['hash', () => new chash.Table(['a', 'b'], { hash: 'md5\u0000x' })],
    ['a node id', () => new chash.Table(['a\u0000b', 'c'])],
    ['hashTag', () => new chash.Table(['a', 'b'], { hashTag: '{\u0000' })],
    ['path', () => chash.fromConfig(cfg + '\u0000x')],
    ['pool', () => chash.fromConfig(cfg, 'alpha\u0000beta')],
    ['name', () => chash.fromMembershipDocument(doc, 'etcd://x\u0000y')],
  ]) {
    assert.throws(fn, (e) => e.code === 'CH_EINVAL' && e.message.includes(what) && e.message.includes('NUL'), what);
  }
});

test("a build's refusal says which argument and which limit", () => {
  const ids = Array.from({ length: 100000 }, (_, i) => String(i));
  assert.throws(() => new chash.Table(ids, { algorithm: 'maglev' }), { code: 'CH_EINVAL',
    message: 'maglev: table_size 65537 must be a prime greater than the node count, 100000 (e.g. 100003)' });
  assert.throws(() => new chash.Table(['a', 'b', 'c'], { algorithm: 'maglev', tableSize: 4 }),
    { code: 'CH_EINVAL', message: /table_size 4 must be a prime greater than the node count, 3 \(e\.g\. 5\)/ });
  assert.throws(() => new chash.Table(['a', 'b', 'c'], { algorithm: 'ketama', vnodes: 2 }),
    { code: 'CH_EINVAL', message: 'ketama: vnodes 2 gives no node a point: raise vnodes' });
  assert.throws(() => new chash.Table(['a', { id: 'b', weight: 2 }], { algorithm: 'jump' }),
    { code: 'CH_EUNSUPPORTED', message: /^jump has no weights: every node must weigh the same, but node 1 \("b"\) weighs 2/ });
  assert.throws(() => new chash.Table([{ id: 'a', weight: 500000 }, 'b']),
    { code: 'CH_ETOOBIG', message: /^ring: more than 67108864 points \(CH_MAX_POINTS\) from 2 nodes at vnodes 160/ });
  assert.throws(() => new chash.Table(['1', { id: '2', weight: 300 }], { algorithm: 'haproxy@2' }),
    { code: 'CH_EWEIGHT', message: /HAProxy's weights are 1 to 256/ });
  const doc = JSON.stringify({ distribution: 'maglev',
    servers: Array.from({ length: 66000 }, (_, i) => `10.0.${Math.floor(i / 250)}.${i % 250 + 1}:6379:1`) });
  assert.throws(() => chash.fromMembershipDocument(doc, 'm'),
    { code: 'CH_EINVAL', message: /table_size 65537 must be a prime greater than the node count, 66000 \(e\.g\. 66029\)/ });
});

// Runs script in a child node with the module as `chash`, bounded: a parse that has not returned
// after 10 s kills the child and fails the test (a deadline on the call returning, not a timing
// assertion: a synchronous native call cannot be interrupted in this process).
function bounded(script) {
  const r = spawnSync(process.execPath, ['-e',
    `const chash = require(${JSON.stringify(env('CHASH_NODE_MODULE'))});\n${script}`],
  { timeout: 10000, encoding: 'utf8', maxBuffer: 1 << 20 });
  assert.ok(!r.error && r.signal === null, `the child did not return within 10 s (${r.error || r.signal})`);
  assert.equal(r.status, 0, r.stderr);
  return r.stdout;
}

test('1 MiB and 16 MiB of nesting are refused at once, naming the limit', () => {
  const out = bounded(`
    const limit = 'nesting deeper than 64 levels, the limit (CH_CONFIG_MAX_DEPTH)';
    for (const size of [1 << 20, 16 << 20]) {
      for (const [text, pos] of [['['.repeat(size), '1:65'],
        ['{"servers": ' + '['.repeat(size - 12), '1:76'], [Buffer.alloc(size, '['), '1:65']]) {
        let e = null;
        try { chash.fromMembershipDocument(text, 'p'); } catch (x) { e = x; }
        if (!e || e.code !== 'CH_EINVAL' || e.message !== 'p:' + pos + ': ' + limit)
          throw new Error('size ' + size + ': ' + (e && e.message));
      }
      const fs = require('node:fs'), os = require('node:os'), path = require('node:path');
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'chash-node-'));
      const file = path.join(dir, 'n.yml');
      const head = 'alpha:\\n  servers:\\n    ';
      fs.writeFileSync(file, head + '- '.repeat((size - head.length) >> 1));
      let e = null;
      try { chash.fromConfig(file); } catch (x) { e = x; }
      fs.rmSync(dir, { recursive: true });
      if (!e || e.message !== file + ':3:129: ' + limit) throw new Error('file: ' + (e && e.message));
    }
    console.log('refused');`);
  assert.equal(out.trim(), 'refused');
});

test('options.cache: the same owners, for tables from nodes and from a config', () => {
  const plain = new chash.Table(['a', 'b', 'c', 'd'], { algorithm: 'ketama', hash: 'md5' });
  const cached = new chash.Table(['a', 'b', 'c', 'd'], { algorithm: 'ketama', hash: 'md5', cache: 100 });
  const want = KEYS.map((k) => plain.lookup(k));
  for (let pass = 0; pass < 2; pass++) {
    // The first 150 keys twice over (hits and evictions), then all keys.
    for (let i = 0; i < 150; i++) assert.equal(cached.lookup(KEYS[i]), want[i], `pass ${pass} key ${i}`);
    KEYS.forEach((k, i) => assert.equal(cached.lookup(k), want[i], `key ${i}`));
  }
  const file = path.join(SOURCE, 'bindings/node/examples/fleet.yml');
  const f = chash.fromConfig(file, 'cache', { cache: 10 });
  const g = chash.fromConfig(file, 'cache');
  KEYS.forEach((k) => assert.equal(f.lookup(k), g.lookup(k)));
  assert.throws(() => new chash.Table(['a'], { cache: -1 }), RangeError);
});

test('keys: a string is its UTF-8 bytes; Buffer, Uint8Array and lone surrogates', () => {
  const t = new chash.Table(['a', 'b', 'c', 'd', 'e'], { algorithm: 'rendezvous' });
  for (const k of KEYS) {
    if (typeof k !== 'string') continue;
    const b = Buffer.from(k);
    assert.equal(t.keyHash(k), t.keyHash(b));
    assert.equal(t.keyHash(k), t.keyHash(new Uint8Array(b)));
  }
  // V8 writes a lone surrogate as U+FFFD, as Buffer.from does.
  assert.equal(t.keyHash('x\ud800y'), t.keyHash(Buffer.from('x\ud800y')));
  assert.equal(t.keyHash(''), t.keyHash(Buffer.alloc(0)));
});

test("seed 000: fnv1a32_fmix_utf16 agrees with a JavaScript ring over charCodeAt", () => {
  // The hash in JavaScript, independently: FNV-1a 32 over UTF-16 code units, then fmix32.
  const h = (s) => {
    let x = 0x811c9dc5;
    for (let i = 0; i < s.length; i++) x = Math.imul(x ^ s.charCodeAt(i), 0x01000193) >>> 0;
    x ^= x >>> 16; x = Math.imul(x, 0x85ebca6b) >>> 0; x ^= x >>> 13;
    x = Math.imul(x, 0xc2b2ae35) >>> 0; x ^= x >>> 16;
    return x >>> 0;
  };
  const t = new chash.Table(['cache-a', 'cache-b', 'cache-c'], { hash: 'fnv1a32_fmix_utf16' });
  for (const k of KEYS) if (typeof k === 'string') assert.equal(t.keyHash(k), BigInt(h(k)), JSON.stringify(k));
});

test('a table is freed when its JS object is collected (the finalizer)', async () => {
  // 60 tables of ~8.6 MB each (0.5 GB if none were freed): their native memory is reported to
  // V8, so its collector collects them as it goes, and Node-API runs their finalizers once the
  // running task yields (setImmediate); RSS stays far below the sum.
  const nodes = Array.from({ length: 4000 }, (_, i) => `n${i}`);
  const before = process.memoryUsage().rss;
  let bytes = 0;
  for (let i = 0; i < 60; i++) {
    const t = new chash.Table(nodes, { vnodes: 200 });
    bytes = t.info().bytes;
    assert.equal(typeof t.lookup('k'), 'string');
    await new Promise(setImmediate);
  }
  assert.ok(bytes > 8e6, `a table holds ${bytes} bytes`);
  const grown = process.memoryUsage().rss - before;
  assert.ok(grown < 20 * bytes, `RSS grew by ${grown} bytes for 60 tables of ${bytes}`);
});

test('npm pack: the tarball installs offline and routes as the module', () => {
  const tgz = env('CHASH_NODE_TGZ');
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'chash-npm-'));
  try {
    const r = spawnSync('npm', ['install', '--offline', '--no-audit', '--no-fund', '--prefix', dir, tgz], { encoding: 'utf8' });
    assert.equal(r.status, 0, r.stderr);
    const installed = require(path.join(dir, 'node_modules', 'chash'));
    const a = new installed.Table(['x', 'y', 'z'], { algorithm: 'ketama', hash: 'md5' });
    const b = new chash.Table(['x', 'y', 'z'], { algorithm: 'ketama', hash: 'md5' });
    assert.deepEqual(a.lookupMany(KEYS), b.lookupMany(KEYS));
    for (const f of ['index.d.ts', 'README.md', 'package.json', 'chash.node']) {
      assert.ok(fs.existsSync(path.join(dir, 'node_modules', 'chash', f)), f);
    }
  } finally {
    fs.rmSync(dir, { recursive: true });
  }
});

test('node-chash: the Debian package holds the module; it and its -dbgsym are lintian-clean', () => {
  const dir = env('CHASH_NODE_DEB_DIR');
  const deb = fs.readdirSync(dir).find((f) => /^node-chash_.*\.deb$/.test(f));
  assert.ok(deb, `no node-chash .deb in ${dir}`);
  const list = spawnSync('dpkg-deb', ['-c', path.join(dir, deb)], { encoding: 'utf8' }).stdout;
  const arch = spawnSync('dpkg-architecture', ['-qDEB_HOST_MULTIARCH'], { encoding: 'utf8' }).stdout.trim();
  for (const f of ['index.js', 'index.d.ts', 'package.json', 'chash.node', 'README.md']) {
    assert.match(list, new RegExp(` \\./usr/lib/${arch}/nodejs/chash/${f.replace('.', '\\.')}\\n`), f);
  }
  assert.match(list, / \.\/usr\/share\/doc\/node-chash\/copyright\n/);
  // The packaged module loads and routes as the built one (libchash from LD_LIBRARY_PATH).
  const tree = fs.mkdtempSync(path.join(os.tmpdir(), 'chash-deb-'));
  try {
    assert.equal(spawnSync('dpkg-deb', ['-x', path.join(dir, deb), tree]).status, 0);
    const pkg = require(path.join(tree, 'usr/lib', arch, 'nodejs/chash'));
    const a = new pkg.Table(['x', 'y', 'z'], { algorithm: 'maglev' });
    const b = new chash.Table(['x', 'y', 'z'], { algorithm: 'maglev' });
    assert.deepEqual(a.lookupMany(KEYS), b.lookupMany(KEYS));
  } finally {
    fs.rmSync(tree, { recursive: true });
  }
  const deps = spawnSync('dpkg-deb', ['-f', path.join(dir, deb), 'Depends'], { encoding: 'utf8' }).stdout;
  assert.match(deps, /libchash0 \(= /);
  assert.match(deps, /nodejs/);
  // With its -dbgsym package (chash.node's debug symbols) when the build made one.
  const ddeb = fs.readdirSync(dir).filter((f) => /^node-chash-dbgsym_.*\.ddeb$/.test(f)).map((f) => path.join(dir, f));
  const l = spawnSync('lintian', ['--tag-display-limit', '0', path.join(dir, deb), ...ddeb], { encoding: 'utf8' });
  assert.equal(l.error, undefined, 'lintian (scripts/bootstrap installs it)');
  const bad = l.stdout.split('\n').filter((x) => /^[EW]: /.test(x));
  assert.deepEqual(bad, [], l.stdout);
});

test('worker threads load the addon and place as the main thread', async () => {
  const { Worker } = require('node:worker_threads');
  const keys = KEYS.filter((k) => typeof k === 'string').slice(0, 2000);
  const main = new chash.Table(['a', 'b', 'c', 'd', 'e'], { algorithm: 'ring' }).lookupMany(keys);
  const code = `const { parentPort, workerData } = require('node:worker_threads');
    const chash = require(workerData.module);
    const t = new chash.Table(['a', 'b', 'c', 'd', 'e'], { algorithm: 'ring' });
    parentPort.postMessage(t.lookupMany(workerData.keys));`;
  const run = () => new Promise((resolve, reject) => {
    const w = new Worker(code, { eval: true, workerData: { module: env('CHASH_NODE_MODULE'), keys } });
    w.once('message', resolve);
    w.once('error', reject);
  });
  const got = await Promise.all([run(), run(), run()]);
  for (const g of got) assert.deepEqual(g, main);
});

test("the examples print what chash lookup prints", () => {
  const run = (file, args) => {
    const r = spawnSync(process.execPath, [path.join(SOURCE, 'bindings/node/examples', file), ...args],
      { encoding: 'utf8', env: { ...process.env, CHASH_NODE_MODULE: env('CHASH_NODE_MODULE') } });
    assert.equal(r.status, 0, r.stderr);
    return r.stdout.split('\n').filter((l) => l && !l.startsWith('#'));
  };
  const keys = ['user:42', 'café', '東京', '😀', '{user:42}:cart'];
  const seed = run('seed000_utf16_ring.js', keys);
  const want = cli(['lookup', '--nodes', 'cache-a,cache-b,cache-c', '--hash', 'fnv1a32_fmix_utf16', '--replicas', '2', ...keys]).stdout;
  // "KEY<TAB>OWNER<TAB>(replicas: OWNER, NEXT)" against the CLI's "KEY<TAB>OWNER<TAB>NEXT".
  const line = (l) => { const [k, , r] = l.split('\t'); return [k, ...r.slice(11, -1).split(', ')].join('\t'); };
  assert.deepEqual(seed.map(line), want.split('\n').filter(Boolean));
  const yml = path.join(SOURCE, 'bindings/node/examples/fleet.yml');
  const fleet = run('fleet.js', [yml, 'cache', ...keys]);
  const wantFleet = cli(['lookup', '--config', yml, '--pool', 'cache', ...keys]).stdout;
  assert.deepEqual(fleet.map((l) => l.replace(/\t$/, '')), wantFleet.split('\n').filter(Boolean));
});
