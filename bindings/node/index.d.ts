// SPDX-License-Identifier: Apache-2.0
// TypeScript declarations of the chash module (index.js).

/// <reference types="node" />

/** A key: a string (hashed as its UTF-8 bytes) or bytes. */
export type Key = string | Uint8Array;

/** A node: its id (weight 1), or an id and a weight (finite, > 0). */
export type NodeSpec = string | { id: string; weight?: number };

export interface TableOptions {
  /** A registry name (ALGORITHMS): 'ring' (default), 'ketama', 'hashring@3', ... */
  algorithm?: string;
  /** A registry name (HASHES); default fnv1a32_fmix. Ignored by schemes with a fixed hash. */
  hash?: string;
  /** Points per unit weight; 0 or absent: the scheme's default (160; a library's own). */
  vnodes?: number;
  /** maglev's table size, a prime larger than the node count (default 65537). */
  tableSize?: number;
  /** twemproxy's hash_tag, two characters such as "{}". */
  hashTag?: string;
  /** lookup() remembers the owners of up to this many string keys (as npm's hashring); 0: off. */
  cache?: number;
}

export interface LoadOptions {
  /** As TableOptions.cache. */
  cache?: number;
}

export interface TableInfo {
  algorithm: string;
  hash: string;
  nodes: number;
  points: number;
  bytes: number;
  vnodes: number;
  tableSize: number;
  weights: number[];
}

export interface AlgorithmInfo {
  name: string;
  id: number;
  /** Takes unequal weights. */
  weighted: boolean;
  /** The key hash a client library's scheme always uses, or null. */
  fixedHash: string | null;
  /** Nodes are named "host:port" as the library names servers. */
  addrIds: boolean;
  /** Hashes the key with each node: no replicas. */
  keyed: boolean;
  /** The library's weights are whole numbers >= 1; others are refused. */
  wholeWeights: boolean;
  /** False for a modulo placement: a change of the node list moves most keys. */
  consistent: boolean;
  /** What the library refuses or caps, in a sentence naming it; null when nothing. */
  limits: string | null;
  /** The largest weight it takes; 0: no bound of its own. */
  maxWeight: number;
}

export interface HashInfo {
  name: string;
  id: number;
  bits: number;
}

/** Errors thrown by the module: libchash's message, code its status name. */
export interface ChashError extends Error {
  code: 'CH_EINVAL' | 'CH_ENOMEM' | 'CH_EEMPTY' | 'CH_EUNKNOWN' | 'CH_EDUPID' | 'CH_EBADID' |
    'CH_EWEIGHT' | 'CH_EUNSUPPORTED' | 'CH_ETOOBIG';
}

/**
 * An immutable placement table. Its native memory is freed when the Table is
 * garbage-collected. Safe to share within a thread; each worker thread builds its own.
 */
export class Table {
  constructor(nodes: readonly NodeSpec[], options?: TableOptions);
  /** A pool of a twemproxy YAML file, placed as nutcracker and chash-proxy place it. */
  static fromConfig(file: string, pool?: string | null, options?: LoadOptions): Table;
  /** A membership document (docs/FLEET.md), as chash-proxy applies it. */
  static fromMembershipDocument(text: string | Uint8Array, name?: string, options?: LoadOptions): Table;

  /** Node ids; index i is node i of every result. */
  readonly nodes: readonly string[];
  /** From a config or membership document: the servers' "host:port" or socket path; else null. */
  readonly addrs: readonly string[] | null;
  /** From a config: the servers' names (null where unnamed); else null. */
  readonly names: readonly (string | null)[] | null;
  /** From a config or document: the membership version; else null. */
  readonly version: string | null;
  /** From a membership document: its epoch (0 when absent); else null. */
  readonly epoch: number | null;
  readonly algorithm: string;
  readonly hash: string;

  lookup(key: Key): string;
  /** The owner's address (addrs) for a table from a config or document, else its id. */
  lookupAddress(key: Key): string;
  lookupIndex(key: Key): number;
  replicas(key: Key, r: number): string[];
  replicaIndexes(key: Key, r: number): number[];
  lookupMany(keys: readonly Key[]): string[];
  lookupManyIndexes(keys: readonly Key[]): Uint32Array;
  keyHash(key: Key): bigint;
  info(): TableInfo;
}

export function fromConfig(file: string, pool?: string | null, options?: LoadOptions): Table;
export function fromMembershipDocument(text: string | Uint8Array, name?: string, options?: LoadOptions): Table;
export const ALGORITHMS: readonly AlgorithmInfo[];
export const HASHES: readonly HashInfo[];
/** Algorithm (scheme) registry names, in id order. */
export function algorithms(): string[];
/** Hash registry names, in id order. */
export function hashes(): string[];
/** libchash's version, "MAJOR.MINOR.PATCH". */
export const version: string;
