// SPDX-License-Identifier: Apache-2.0
// memjs_server.js -- the oracle for chash's memjs@1: the real npm memjs 1.3 (installed by
// scripts/bootstrap under /usr/local/lib/chash-oracles).
//
// Each case of rings_compat.py's batch format on stdin ("case", node W HEXID with the server
// "host:port", down I, key HEX with UTF-8 text) makes memjs.Client.create("h1:p1,h2:p2,...",
// {failover: true}) (nothing connects until a command runs) and prints, for each key,
// Client#server(key) -- the server every command uses -- as its index in the node list, -1 for
// none. A server the case marks down is given the wakeupAt that Client#perform sets on a server
// that failed with failover on (now + failoverTime), so server() passes over it as after a
// real failure.
'use strict';
const memjs = require('memjs');

const lines = require('fs').readFileSync(0, 'ascii').split('\n');
const out = [];
let ids = [];
let down = [];
let client = null;
for (const line of lines) {
  const f = line.split(' ');
  if (f[0] === 'case') {
    ids = [];
    down = [];
    client = null;
  } else if (f[0] === 'node') {
    ids.push(Buffer.from(f[2], 'hex').toString('utf8'));
  } else if (f[0] === 'down') {
    down.push(+f[1]);
  } else if (f[0] === 'key') {
    if (client === null) {
      client = memjs.Client.create(ids.join(','), { failover: true, logger: { log() {} } });
      for (const i of down) client.servers[i].wakeupAt = Date.now() + client.options.failoverTime * 1000;
    }
    const key = f[1] === '-' ? '' : Buffer.from(f[1], 'hex').toString('utf8');
    const s = client.server(key);
    out.push(s ? ids.indexOf(s.host + ':' + s.port) : -1);
  }
}
process.stdout.write(out.join('\n') + '\n');
