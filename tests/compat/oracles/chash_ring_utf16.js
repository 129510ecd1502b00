// SPDX-License-Identifier: Apache-2.0
// chash_ring_utf16.js -- the oracle for chash's ring with hash fnv1a32_fmix_utf16: chash's
// default ring as a JavaScript service would port it, written from its description in
// include/chash.h (not from chash's C), hashing JavaScript strings through charCodeAt():
//
//   hash(s)   FNV-1a 32 over s.charCodeAt(i) (one step per UTF-16 code unit), then murmur3's
//             fmix32;
//   points    node i has max(1, round(160 * w_i)) points at hash("<id>#<j>"), j from 0;
//             equal positions ordered by id, then j;
//   lookup    the first point with position >= hash(key), wrapping to the first point.
//
// Reads the case format of clients_compat.py on stdin (vnodes V, node W HEXID, key HEX; ids and
// keys are UTF-8 text, decoded into JavaScript strings) and prints each key's owner as its index
// in the node list. Ids are compared with < (code units): equal to chash's byte order for the
// ASCII ids the test uses.
'use strict';

function hash(s) {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i);
    h = Math.imul(h, 16777619) >>> 0;
  }
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b) >>> 0;
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35) >>> 0;
  h ^= h >>> 16;
  return h >>> 0;
}

const lines = require('fs').readFileSync(0, 'ascii').split('\n');
let vnodes = 160;
const nodes = [];
let ring = null;
const out = [];
for (const line of lines) {
  const f = line.split(' ');
  if (f[0] === 'vnodes') {
    vnodes = +f[1];
  } else if (f[0] === 'node') {
    nodes.push({ id: Buffer.from(f[2], 'hex').toString('utf8'), w: +f[1] });
  } else if (f[0] === 'key') {
    if (ring === null) {
      ring = [];
      nodes.forEach((n, i) => {
        const p = Math.max(1, Math.round(vnodes * n.w));
        for (let j = 0; j < p; j++) ring.push({ pos: hash(n.id + '#' + j), id: n.id, j, i });
      });
      ring.sort((a, b) => a.pos - b.pos || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0) || a.j - b.j);
    }
    const h = hash(f[1] === '-' ? '' : Buffer.from(f[1], 'hex').toString('utf8'));
    let lo = 0, hi = ring.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (ring[mid].pos < h) lo = mid + 1; else hi = mid;
    }
    out.push(ring[lo === ring.length ? 0 : lo].i);
  }
}
process.stdout.write(out.join('\n') + '\n');
