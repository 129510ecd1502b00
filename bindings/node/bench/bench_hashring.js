// SPDX-License-Identifier: Apache-2.0
// The Node.js binding against npm's hashring (3.x), Node's best-known native ring, in one run:
// the same 32 servers and the same keys; chash's table is built as hashring@3, the scheme that
// reproduces hashring's placement, and the two are first checked to agree on every key.
//   node bindings/node/bench/bench_hashring.js [--module DIR] [--hashring DIR] [--keys N]
// Measured: ns per lookup, best of 5 rounds over N distinct keys (default 200,000, so
// hashring's 5,000-entry LRU cache mostly misses, as with a large key space), and again over
// 1,000 hot keys (its cache then answers every lookup). chash: lookup() per key, without and
// with the same memo (options.cache 5000), and
// lookupMany() over all keys at once; and chash's own ring (ring, fnv1a32_fmix) per key, a
// placement of its own (not hashring's), to show the call's cost without MD5.
'use strict';

const path = require('node:path');

function arg(name, dflt) {
  const i = process.argv.indexOf(name);
  return i > 0 && i + 1 < process.argv.length ? process.argv[i + 1] : dflt;
}
const root = path.join(__dirname, '..', '..', '..');
const chash = require(path.resolve(arg('--module', process.env.CHASH_NODE_MODULE ||
  path.join(root, 'build', 'release', 'bindings', 'node', 'chash'))));
const HashRing = require(path.resolve(arg('--hashring', '/usr/local/lib/chash-oracles/node_modules/hashring')));
const nkeys = Number(arg('--keys', '200000'));

const servers = Array.from({ length: 32 }, (_, i) => `10.0.${i >> 8}.${i & 255}:11211`);
const keys = Array.from({ length: nkeys }, (_, i) => `user:${i}:profile`);
const hot = keys.slice(0, 1000);

const ring = new HashRing(servers);
const table = new chash.Table(servers, { algorithm: 'hashring@3' });
// chash's own ring (fnv1a32_fmix, no MD5): what the call crossing costs beside the hash.
const own = new chash.Table(servers);
// With hashring's own memo: lookup() remembers the last 5,000 string keys' owners.
const memo = new chash.Table(servers, { algorithm: 'hashring@3', cache: 5000 });
const many = table.lookupMany(keys);
for (let i = 0; i < keys.length; i++) {
  const a = ring.get(keys[i]);
  if (a !== many[i] || a !== table.lookup(keys[i])) {
    throw new Error(`bench_hashring: key ${keys[i]}: hashring ${a}, chash ${many[i]}`);
  }
}

let sink = 0;
function best(fn, ks, rounds = 5) {
  let ns = Infinity;
  for (let r = 0; r < rounds; r++) {
    const reps = Math.max(1, Math.ceil(200000 / ks.length));
    const t0 = process.hrtime.bigint();
    for (let j = 0; j < reps; j++) fn(ks);
    const t = Number(process.hrtime.bigint() - t0) / (reps * ks.length);
    ns = Math.min(ns, t);
  }
  return ns;
}
const perKey = (get) => (ks) => { for (let i = 0; i < ks.length; i++) sink += get(ks[i]).length; };
const cases = [
  ['hashring get()', perKey((k) => ring.get(k))],
  ['chash lookup()', perKey((k) => table.lookup(k))],
  ['chash lookup() cache 5000', perKey((k) => memo.lookup(k))],
  ['chash lookupMany()', (ks) => { sink += table.lookupMany(ks).length; }],
  ['chash ring lookup()', perKey((k) => own.lookup(k))],
];
console.log(`# node ${process.version}, libchash ${chash.version}, 32 servers, hashring@3 placement (agrees on all ${nkeys} keys)`);
console.log('case                      distinct keys (ns/lookup)   1,000 hot keys (ns/lookup)');
const res = {};
for (const [name, fn] of cases) {
  best(fn, hot, 1); // warm-up
  const d = best(fn, keys);
  const h = best(fn, hot);
  res[name] = [d, h];
  console.log(`${name.padEnd(26)}${d.toFixed(0).padStart(14)}${h.toFixed(0).padStart(29)}`);
}
const [hd, hh] = res['hashring get()'];
const [cd, ch] = res['chash lookup()'];
const [md, mh] = res['chash lookup() cache 5000'];
console.log(`chash lookup() / hashring get(): ${(cd / hd).toFixed(2)}x distinct, ${(ch / hh).toFixed(2)}x hot;` +
  ` with cache 5000: ${(md / hd).toFixed(2)}x, ${(mh / hh).toFixed(2)}x (goal: <= 1x)${sink < 0 ? '' : ''}`);
