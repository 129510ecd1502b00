// SPDX-License-Identifier: Apache-2.0
// node-redis 6's client-side cache through chash-proxy (tests/proxy/test_client_tracking.py,
// part 5): a client with RESP 3 and clientSideCache reads each key twice (the second from its
// cache: counted hits), prints "ready", and once a line comes on stdin (the test has written
// every key straight to its server) reads each key until it answers the new value: each must
// within DEADLINE_MS, which only the proxy's invalidation pushes make happen (the cache's ttl
// is 0: no expiry). Prints "ok keys=N hits=H invalidated=I" or throws (exit 1).
//
// Usage: node csc_node.js HOST PORT OLD NEW KEY...
'use strict';

const assert = require('assert');
const readline = require('readline');
const { createClient, BasicClientSideCache } = require('redis');

const [host, portText, oldValue, newValue, ...keys] = process.argv.slice(2);
const DEADLINE_MS = 5000;

async function main() {
  const cache = new BasicClientSideCache({ ttl: 0, maxEntries: 0 });
  const invalidated = new Set();
  cache.on('invalidate', (key) => invalidated.add(key === null ? '*' : key.toString()));
  const c = createClient({ socket: { host, port: Number(portText) }, RESP: 3,
                           clientSideCache: cache });
  let lastError = null;
  c.on('error', (e) => { lastError = e; });
  // a proxy refusing CLIENT TRACKING ON fails the handshake, which node-redis retries forever
  let timer;
  await Promise.race([c.connect(), new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`not connected within ${DEADLINE_MS} ms: ` +
                                              `${lastError}`)), DEADLINE_MS);
  })]);
  clearTimeout(timer);
  for (const k of keys)
    assert.strictEqual(await c.get(k), oldValue, `GET ${k}`);
  const before = cache.stats().hitCount;
  for (const k of keys)
    assert.strictEqual(await c.get(k), oldValue, `GET ${k} again`);
  const hits = cache.stats().hitCount - before;
  assert.strictEqual(hits, keys.length, `the second reads answered from the cache: ${hits}`);
  process.stdout.write('ready\n');
  const rl = readline.createInterface({ input: process.stdin });
  await new Promise((resolve) => rl.once('line', resolve));
  rl.close();
  const end = Date.now() + DEADLINE_MS;
  for (const k of keys) {
    for (;;) {
      const v = await c.get(k);
      if (v === newValue)
        break;
      if (Date.now() > end)
        throw new Error(`${k}: still ${v} from the cache ${DEADLINE_MS} ms after the write ` +
                        `(invalidated: ${[...invalidated].join(',')})`);
      await new Promise((r) => setTimeout(r, 5));
    }
  }
  process.stdout.write(`ok keys=${keys.length} hits=${hits} invalidated=${invalidated.size}\n`);
  await c.quit();
}

main().catch((e) => { process.stderr.write(`${e.stack || e}\n`); process.exit(1); });
