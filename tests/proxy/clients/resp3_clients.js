// SPDX-License-Identifier: Apache-2.0
// A real client's work through chash-proxy (tests/proxy/test_resp3_clients.py), with the
// client's own defaults: node-redis 6 (RESP3), ioredis 6 with protocol 3 and with 2,
// valkey-glide 2.5 (RESP3). Strings, a hash read back as the client's map, a sorted set with
// its scores (RESP3 doubles), MGET with holes, a pipeline, a transaction, pub/sub, the
// connection's name and library, and a wrong-type error; each result checked here, against
// values this script wrote. Prints one line "ok CLIENT resp=N ..." or throws (exit 1).
//
// Usage: node resp3_clients.js CLIENT HOST PORT PREFIX
//   CLIENT: node-redis | ioredis3 | ioredis2 | glide; PREFIX: this run's hash tag, so the
//   clients running at once through one proxy write keys of their own.
'use strict';

const assert = require('assert');

const [kind, host, portText, prefix] = process.argv.slice(2);
const port = Number(portText);
const k = (name) => `{${prefix}}${name}`;           // one tag: a transaction's keys, one server
const spread = (name) => `${prefix}:${name}`;       // no tag: MGET's keys over the pool
const DEADLINE_MS = 30000;

function withDeadline(promise, what) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: no answer within ${DEADLINE_MS} ms`)),
                       DEADLINE_MS);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

// Each client behind one small interface; results normalized only where the clients' own
// representations differ (a map as an object or as field/value pairs).
const adapters = {
  'node-redis': async () => {
    const { createClient } = require('redis');
    const c = createClient({ socket: { host, port }, name: `${prefix}-main` });
    c.on('error', () => {});
    await c.connect();
    const sub = c.duplicate();
    sub.on('error', () => {});
    await sub.connect();
    return {
      resp: 3,
      raw: (args) => c.sendCommand(args),
      hgetall: (key) => c.hGetAll(key),
      zrangeWithScores: async (key) =>
        (await c.zRangeWithScores(key, 0, -1)).map((e) => [e.value, e.score]),
      zscore: (key, m) => c.zScore(key, m),
      mget: (keys) => c.mGet(keys),
      pipeline: (cmds) => c.multi().addCommand(cmds[0]).addCommand(cmds[1]).addCommand(cmds[2])
        .execAsPipeline(),
      transaction: (cmds) => {
        let m = c.multi();
        for (const a of cmds) m = m.addCommand(a);
        return m.exec();
      },
      subscribe: (ch, fn) => sub.subscribe(ch, (msg) => fn(msg)),
      publish: (ch, msg) => c.publish(ch, msg),
      close: async () => { await sub.quit(); await c.quit(); },
    };
  },
  ioredis3: () => ioredis(3),
  ioredis2: () => ioredis(2),
  glide: async () => {
    const { GlideClient, Batch, GlideClientConfiguration } = require('@valkey/valkey-glide');
    const base = { addresses: [{ host, port }], requestTimeout: 5000 };
    const c = await GlideClient.createClient({ ...base, clientName: `${prefix}-main` });
    let onMessage = () => {};
    const chan = k('ch');
    const sub = await GlideClient.createClient({
      ...base,
      pubsubSubscriptions: {
        channelsAndPatterns: { [GlideClientConfiguration.PubSubChannelModes.Exact]: new Set([chan]) },
        callback: (msg) => onMessage(msg.message.toString()),
      },
    });
    const batch = (atomic, cmds) => {
      const b = new Batch(atomic);
      for (const a of cmds) b.customCommand(a);
      return c.exec(b, true);
    };
    return {
      resp: 3,
      raw: (args) => c.customCommand(args),
      hgetall: async (key) => {
        const out = {};
        for (const e of await c.hgetall(key)) out[e.field.toString()] = e.value.toString();
        return out;
      },
      zrangeWithScores: async (key) =>
        (await c.zrangeWithScores(key, { start: 0, end: -1 }))
          .map((e) => [e.element.toString(), e.score]),
      zscore: (key, m) => c.zscore(key, m),
      mget: async (keys) => (await c.mget(keys)).map((v) => (v === null ? null : v.toString())),
      pipeline: (cmds) => batch(false, cmds),
      transaction: (cmds) => batch(true, cmds),
      subscribe: async (ch, fn) => {
        assert.strictEqual(ch, chan);
        onMessage = fn;
      },
      publish: (ch, msg) => c.publish(msg, ch),
      close: async () => { sub.close(); c.close(); },
    };
  },
};

const lower = (cmds) => cmds.map(([name, ...args]) => [name.toLowerCase(), ...args]);

async function ioredis(protocol) {
  const Redis = require('ioredis');
  const opts = { host, port, protocol, connectionName: `${prefix}-main`, lazyConnect: true,
                 maxRetriesPerRequest: 1 };
  const c = new Redis(opts);
  const sub = new Redis(opts);
  c.on('error', () => {});
  sub.on('error', () => {});
  await c.connect();
  await sub.connect();
  return {
    resp: protocol,
    raw: (args) => c.call(...args),
    hgetall: (key) => c.hgetall(key),
    zrangeWithScores: async (key) => {
      const flat = await c.zrange(key, 0, -1, 'WITHSCORES');
      const out = [];
      for (let i = 0; i < flat.length; i += 2) out.push([flat[i], Number(flat[i + 1])]);
      return out;
    },
    zscore: async (key, m) => Number(await c.zscore(key, m)),
    mget: (keys) => c.mget(keys),
    // ioredis takes a batch's commands by its method names: lower case.
    pipeline: async (cmds) => (await c.pipeline(lower(cmds)).exec()).map(([err, v]) => err || v),
    transaction: async (cmds) => (await c.multi(lower(cmds)).exec()).map(([err, v]) => err || v),
    subscribe: async (ch, fn) => {
      sub.on('message', (channel, msg) => { if (channel === ch) fn(msg); });
      await sub.subscribe(ch);
    },
    publish: (ch, msg) => c.publish(ch, msg),
    close: async () => { await sub.quit(); await c.quit(); },
  };
}

async function work(cl) {
  const str = (v) => (v === null || v === undefined ? v : v.toString());
  // Strings.
  assert.strictEqual(str(await cl.raw(['SET', k('s'), 'hello'])), 'OK');
  assert.strictEqual(str(await cl.raw(['GET', k('s')])), 'hello');
  assert.strictEqual(await cl.raw(['GET', k('missing')]), null);
  assert.strictEqual(Number(await cl.raw(['INCRBY', k('n'), '41'])), 41);
  // A hash, read back as the client's map.
  await cl.raw(['HSET', k('h'), 'f1', 'v1', 'f2', 'v2']);
  assert.deepStrictEqual({ ...(await cl.hgetall(k('h'))) }, { f1: 'v1', f2: 'v2' });
  assert.deepStrictEqual({ ...(await cl.hgetall(k('nohash'))) }, {});
  // A sorted set with its scores: RESP3 doubles.
  await cl.raw(['ZADD', k('z'), '1.5', 'a', '2.25', 'b', '-3', 'c']);
  assert.deepStrictEqual(await cl.zrangeWithScores(k('z')), [['c', -3], ['a', 1.5], ['b', 2.25]]);
  const score = await cl.zscore(k('z'), 'b');
  assert.strictEqual(Number(score), 2.25);
  if (kind !== 'ioredis3' && cl.resp === 3) assert.strictEqual(typeof score, 'number');
  // MGET with holes, its keys spread over the pool's servers.
  for (let i = 0; i < 6; i += 2) await cl.raw(['SET', spread(`m${i}`), `v${i}`]);
  const got = await cl.mget([0, 1, 2, 3, 4, 5].map((i) => spread(`m${i}`)));
  assert.deepStrictEqual(got.map(str), ['v0', null, 'v2', null, 'v4', null]);
  // A pipeline (not a transaction), then a transaction on one server.
  const piped = await cl.pipeline([['SET', k('p'), '1'], ['INCR', k('p')], ['GET', k('p')]]);
  assert.deepStrictEqual(piped.map(str), ['OK', '2', '2']);
  const tx = await cl.transaction([['SET', k('t'), '10'], ['INCRBY', k('t'), '5'],
                                   ['GET', k('t')]]);
  assert.deepStrictEqual(tx.map(str), ['OK', '15', '15']);
  // The connection's own: its name (set by the client at connect) and library, and the
  // protocol the proxy lists it with.
  assert.strictEqual(str(await cl.raw(['CLIENT', 'GETNAME'])), `${prefix}-main`);
  const id = Number(await cl.raw(['CLIENT', 'ID']));
  const list = str(await cl.raw(['CLIENT', 'LIST']));
  const mine = list.split('\n').find((l) => l.startsWith(`id=${id} `));
  assert.ok(mine, `CLIENT LIST has no id=${id}: ${list}`);
  assert.ok(mine.includes(` resp=${cl.resp} `), `protocol: ${mine}`);
  assert.ok(mine.includes(` name=${prefix}-main `), `name: ${mine}`);
  // A wrong type: the server's error.
  await assert.rejects(cl.raw(['LPUSH', k('s'), 'x']), /WRONGTYPE/);
  // Pub/sub: a message published through the proxy reaches the subscriber's connection.
  const chan = k('ch');
  const received = new Promise((resolve) => { cl.subscribe(chan, resolve); });
  let delivered = '';
  const publisher = (async () => {
    for (let i = 0; i < 200 && !delivered; i++) {
      if (Number(await cl.publish(chan, 'hi there')) > 0) return;
      await new Promise((r) => setTimeout(r, 25)); // the subscription is still being confirmed
    }
  })();
  delivered = await withDeadline(received, 'pub/sub message');
  await publisher;
  assert.strictEqual(str(delivered), 'hi there');
  return `resp=${cl.resp} name=${prefix}-main id=${id}`;
}

(async () => {
  const cl = await withDeadline(adapters[kind](), `${kind}: connect`);
  const summary = await withDeadline(work(cl), `${kind}: work`);
  await cl.close();
  console.log(`ok ${kind} ${summary}`);
  process.exit(0);
})().catch((e) => {
  console.error(`FAIL ${kind}: ${e && e.stack ? e.stack : e}`);
  process.exit(1);
});
