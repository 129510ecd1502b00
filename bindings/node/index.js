// SPDX-License-Identifier: Apache-2.0
// chash for Node.js: libchash's placement tables (the C library, through the Node-API addon
// chash.node beside this file). A Table is built once from nodes and options, or from a
// twemproxy (nutcracker) YAML pool, and is immutable: lookups never change it. Its native table
// is freed when the Table is garbage-collected (the addon's finalizer); there is no close().
'use strict';

const path = require('node:path');

const native = require(path.join(__dirname, 'chash.node'));

const ALGORITHMS = Object.freeze(native.algorithms().map((a) => Object.freeze(a)));
const HASHES = Object.freeze(native.hashes().map((h) => Object.freeze(h)));

function nodeList(nodes) {
  if (!Array.isArray(nodes)) throw new TypeError('chash: nodes must be an array');
  const ids = new Array(nodes.length);
  const weights = new Array(nodes.length);
  nodes.forEach((n, i) => {
    if (typeof n === 'string') {
      ids[i] = n;
      weights[i] = 1;
    } else if (n !== null && typeof n === 'object' && typeof n.id === 'string') {
      ids[i] = n.id;
      weights[i] = n.weight === undefined ? 1 : n.weight;
      if (typeof weights[i] !== 'number') throw new TypeError(`chash: node ${n.id}: weight must be a number`);
    } else {
      throw new TypeError('chash: a node is a string id or {id, weight}');
    }
  });
  return { ids, weights };
}

function count(v, what, dflt) {
  if (v === undefined || v === null) return dflt;
  if (!Number.isInteger(v) || v < 0 || v > 0xffffffff) {
    throw new RangeError(`chash: ${what} must be an integer in [0, 4294967295], not ${v}`);
  }
  return v;
}

const BUILD = Symbol('chash.build');

class Table {
  // new Table(nodes, {algorithm, hash, vnodes, tableSize, hashTag, cache})
  //   nodes: ['a', 'b', {id: 'c', weight: 2}, ...]; node i is index i of every result.
  //   algorithm: a registry name (chash.ALGORITHMS), default 'ring'; hash: a registry name
  //   (chash.HASHES), default the algorithm's (fnv1a32_fmix; a client library's scheme fixes
  //   its own); vnodes: 0 means the scheme's default (160 for chash's own); tableSize: maglev's
  //   prime M (default 65537); hashTag: two characters such as '{}' (twemproxy's hash_tag);
  //   cache: lookup() remembers the owners of up to this many string keys, and forgets them
  //   all when full (default 0: off).
  constructor(nodes, options = {}) {
    if (nodes === BUILD) {
      this._init(options.r, options.cache);
      return;
    }
    const { ids, weights } = nodeList(nodes);
    const o = options || {};
    const handle = native.build(ids, weights, o.algorithm === undefined ? 'ring' : o.algorithm,
      o.hash === undefined ? null : o.hash, count(o.vnodes, 'vnodes', 0),
      count(o.tableSize, 'tableSize', 65537), o.hashTag === undefined ? null : o.hashTag);
    const info = native.info(handle);
    this._init({ handle, ids, addrs: null, names: null, version: null,
      algorithm: info.algorithm, hash: info.hash }, o.cache);
  }

  _init(r, cache) {
    const max = count(cache, 'cache', 0);
    Object.defineProperties(this, {
      _handle: { value: r.handle },
      // options.cache: a memo of up to `cache` string keys' owners (npm's hashring keeps one),
      // emptied when full; 0 (default): none. It holds answers only: results are the same.
      _cache: { value: max > 0 ? new Map() : null },
      _cacheMax: { value: max },
      nodes: { value: Object.freeze(r.ids.slice()), enumerable: true },
      addrs: { value: r.addrs ? Object.freeze(r.addrs) : null, enumerable: true },
      names: { value: r.names ? Object.freeze(r.names) : null, enumerable: true },
      version: { value: r.version, enumerable: true },
      algorithm: { value: r.algorithm, enumerable: true },
      hash: { value: r.hash, enumerable: true },
      epoch: { value: r.epoch === undefined ? null : r.epoch, enumerable: true },
    });
    Object.freeze(this);
  }

  // The servers of a pool of a twemproxy YAML file (a file of one pool needs no name), placed
  // as nutcracker and chash-proxy place them: the pool's distribution, hash and hash_tag, its
  // server order and names. nodes are the ids hashed, addrs the servers' "host:port".
  static fromConfig(file, pool, options = {}) {
    const r = native.fromConfig(String(file), pool === undefined ? null : pool);
    return new Table(BUILD, { r, cache: (options || {}).cache });
  }

  // A membership document (docs/FLEET.md: YAML or JSON with "servers", optional "hash",
  // "distribution", "hash_tag", "version", "epoch"), as chash-proxy applies it from etcd.
  static fromMembershipDocument(text, name = '(membership document)', options = {}) {
    const r = native.fromMembershipDocument(text, name);
    return new Table(BUILD, { r, cache: (options || {}).cache });
  }

  // The owner's id of a key (a string, as UTF-8, or a Buffer/Uint8Array, as bytes).
  lookup(key) {
    const c = this._cache;
    if (c === null || typeof key !== 'string') return this.nodes[native.lookup(this._handle, key)];
    let id = c.get(key);
    if (id === undefined) {
      id = this.nodes[native.lookup(this._handle, key)];
      // Full: start over (evicting one entry at a time from a Map costs more than it saves).
      if (c.size >= this._cacheMax) c.clear();
      c.set(key, id);
    }
    return id;
  }

  // The owner's address ("host:port" or socket path) for a table from a config or membership
  // document: where chash-proxy and nutcracker would send the key. Its id for other tables.
  lookupAddress(key) {
    return (this.addrs || this.nodes)[native.lookup(this._handle, key)];
  }

  // The owner's index in nodes.
  lookupIndex(key) {
    return native.lookup(this._handle, key);
  }

  // The first min(r, N) distinct nodes of the key's walk: the owner, then the failover order.
  replicas(key, r) {
    return native.replicas(this._handle, key, count(r, 'r', 1)).map((i) => this.nodes[i]);
  }

  replicaIndexes(key, r) {
    return native.replicas(this._handle, key, count(r, 'r', 1));
  }

  // The owners' ids of many keys in one call into the library.
  lookupMany(keys) {
    const idx = native.lookupMany(this._handle, keys);
    const ids = this.nodes;
    const out = new Array(idx.length);
    for (let i = 0; i < idx.length; i++) out[i] = ids[idx[i]];
    return out;
  }

  // The owners' indexes of many keys, as a Uint32Array.
  lookupManyIndexes(keys) {
    return native.lookupMany(this._handle, keys);
  }

  // The table's 64-bit hash of a key (ch_key_hash: hash_tag and the scheme's key rules applied).
  keyHash(key) {
    return native.keyHash(this._handle, key);
  }

  // {algorithm, hash, nodes, points, bytes, vnodes, tableSize, weights}
  info() {
    return native.info(this._handle);
  }
}

module.exports = {
  Table,
  fromConfig: Table.fromConfig,
  fromMembershipDocument: Table.fromMembershipDocument,
  ALGORITHMS,
  HASHES,
  algorithms: () => ALGORITHMS.map((a) => a.name),
  hashes: () => HASHES.map((h) => h.name),
  version: native.version(),
};
