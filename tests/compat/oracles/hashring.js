// SPDX-License-Identifier: Apache-2.0
// hashring.js -- the oracle for chash's hashring@3 and hashring_hash_ring@3: the real npm
// package hashring (3.x; scripts/bootstrap installs it under /usr/local/lib/chash-oracles).
//
//   node hashring.js {default,hash_ring} < case
//
// Reads the case format of clients_compat.py on stdin (vnodes V = "vnode count", node W HEXID
// with the id a connection string "host:port", key HEX; keys are UTF-8 text, as JavaScript
// strings) and builds new HashRing({id: weight, ...}, 'md5', options) in list order, with
// { compatibility: 'hash_ring' } for the second mode and a cache of size 0; prints ring.get(key)
// as the index of that server in the node list.
'use strict';
const HashRing = require('hashring');

const lines = require('fs').readFileSync(0, 'ascii').split('\n');
const servers = {};
const index = {};
const options = { 'max cache size': 1 };
if (process.argv[2] === 'hash_ring') options.compatibility = 'hash_ring';
let ring = null;
const out = [];
for (const line of lines) {
  const f = line.split(' ');
  if (f[0] === 'vnodes') {
    options['vnode count'] = +f[1];
  } else if (f[0] === 'node') {
    const id = Buffer.from(f[2], 'hex').toString('utf8');
    servers[id] = +f[1];
    index[id] = Object.keys(index).length;
  } else if (f[0] === 'key') {
    if (ring === null) ring = new HashRing(servers, 'md5', options);
    const key = f[1] === '-' ? '' : Buffer.from(f[1], 'hex').toString('utf8');
    out.push(index[ring.get(key)]);
  }
}
process.stdout.write(out.join('\n') + '\n');
