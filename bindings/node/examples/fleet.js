// SPDX-License-Identifier: Apache-2.0
// Route exactly like my chash-proxy fleet: the pool of the proxy's YAML file (nutcracker's
// format), placed as chash-proxy and nutcracker place it (its distribution, hash, hash_tag,
// server order and names). The same answers as `chash lookup --config fleet.yml --pool cache`.
//   node examples/fleet.js [FILE [POOL]] [KEY...]
'use strict';
const path = require('node:path');
const chash = require(process.env.CHASH_NODE_MODULE || 'chash');

const file = process.argv[2] || path.join(__dirname, 'fleet.yml');
const pool = process.argv[3] || 'cache';
const fleet = chash.fromConfig(file, pool);
console.log(`# ${file} pool ${pool}: ${fleet.algorithm}/${fleet.hash}, version ${fleet.version}`);
const keys = process.argv.length > 4 ? process.argv.slice(4) : ['user:42', 'user:43', '{user:42}:cart'];
for (const key of keys) {
  const i = fleet.lookupIndex(key);
  console.log(`${key}\t${fleet.addrs[i]}\t${fleet.names[i] || ''}`);
}
