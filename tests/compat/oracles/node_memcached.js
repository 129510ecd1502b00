// SPDX-License-Identifier: Apache-2.0
// node_memcached.js -- the oracle for chash's node_memcached@2: the real npm memcached 2.2
// (installed by scripts/bootstrap under /usr/local/lib/chash-oracles; its ring is npm hashring
// 3 with ketama compatibility and the default port 11211).
//
// Each case of rings_compat.py's batch format on stdin ("case", node W HEXID with the server
// "host:port", key HEX with UTF-8 text; "remove I": take server I out first) makes
// new Memcached({server: weight, ...}) in list order (nothing connects until a command runs)
// and, for each key, lets Memcached#multi([key]) group it by server as get/getMulti do (its
// one-server shortcut, then its HashRing): the server it names is printed as its index in the
// node list. "remove I" is what the client does to a dead server with its remove option on:
// HashRing.remove(server), the ring rebuilt over the others.
'use strict';
const Memcached = require('memcached');

const lines = require('fs').readFileSync(0, 'ascii').split('\n');
const out = [];
let servers = null;
let order = [];
let remove = [];
let client = null;
for (const line of lines) {
  const f = line.split(' ');
  if (f[0] === 'case') {
    servers = {};
    order = [];
    remove = [];
    client = null;
  } else if (f[0] === 'remove') {
    remove.push(+f[1]);
  } else if (f[0] === 'node') {
    const id = Buffer.from(f[2], 'hex').toString('utf8');
    servers[id] = +f[1];
    order.push(id);
  } else if (f[0] === 'key') {
    if (client === null) {
      client = new Memcached(servers);
      for (const i of remove) client.HashRing.remove(order[i]);
    }
    const key = f[1] === '-' ? '' : Buffer.from(f[1], 'hex').toString('utf8');
    let server = null;
    client.multi([key], (s) => { server = s; });
    out.push(order.indexOf(server));
  }
}
process.stdout.write(out.join('\n') + '\n');
