// SPDX-License-Identifier: Apache-2.0
// Seed 000's case: a Node service hashed its keys with a JavaScript port of chash's default ring
// hash over charCodeAt() (UTF-16 code units). chash's fnv1a32_fmix_utf16 is that hash, so this
// ring places every key (non-ASCII ones included) where the JavaScript port does, and where
// `chash lookup --nodes cache-a,cache-b,cache-c --hash fnv1a32_fmix_utf16 KEY` does.
//   node examples/seed000_utf16_ring.js [KEY...]
'use strict';
const chash = require(process.env.CHASH_NODE_MODULE || 'chash');

const ring = new chash.Table(['cache-a', 'cache-b', 'cache-c'], { algorithm: 'ring', hash: 'fnv1a32_fmix_utf16' });
const keys = process.argv.length > 2 ? process.argv.slice(2) : ['user:42', 'café', '東京', '😀'];
for (const key of keys) {
  console.log(`${key}\t${ring.lookup(key)}\t(replicas: ${ring.replicas(key, 2).join(', ')})`);
}
