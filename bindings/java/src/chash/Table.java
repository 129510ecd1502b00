// SPDX-License-Identifier: Apache-2.0
package chash;

import java.lang.ref.Cleaner;
import java.lang.ref.Reference;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.Objects;

/**
 * A placement table of libchash: built once from nodes and {@link Options}, from a
 * twemproxy/nutcracker YAML pool, or from a membership document, then immutable.
 *
 * <p><b>Thread-safety:</b> a Table is immutable (libchash's ch_table is, and this class holds
 * only final data): any number of threads may call {@link #lookup}, {@link #replicas} and
 * {@link #lookupMany} on one Table at once without locking. A membership change is a new Table;
 * publish it (e.g. through a volatile field or an AtomicReference) and drop the old one.
 *
 * <p><b>Lifetime:</b> the native table is freed by {@link #close()} or, when a Table becomes
 * unreachable without it, by a {@link Cleaner}; never twice. Each call keeps its Table
 * reachable until it returns, so dropping a Table other threads still use is always safe;
 * close() is for a caller who knows no other thread still uses it (calls after close() throw
 * IllegalStateException; a call racing with close() is the caller's error, as in C).
 *
 * <p>Keys are bytes: a String key is its UTF-8 encoding, as {@code chash lookup} reads keys.
 * A node is its index in the list the table was built from (for a pool, the peers' order, see
 * {@link #fromConfig}); {@link #nodeId(int)} names it.
 */
public final class Table implements AutoCloseable {
    private static final Cleaner CLEANER = Cleaner.create();

    /** The native table; freed once, by close() or the Cleaner (it must not refer to the Table). */
    private static final class State implements Runnable {
        volatile long handle;

        State(long handle) {
            this.handle = handle;
        }

        @Override
        public synchronized void run() {
            long h = handle;
            handle = 0;
            if (h != 0) {
                Native.free(h);
            }
        }
    }

    private final State state;
    private final Cleaner.Cleanable cleanable;
    private final List<String> ids;
    private final List<String> addresses; // null unless built from a pool or a document
    private final List<String> names; // ditto; an entry null for an unnamed server
    private final String algorithm;
    private final String hash;
    private final String version; // a membership document's "version", else null
    private final long epoch; // a membership document's "epoch", else 0

    private Table(long handle, Object[] meta) {
        this.state = new State(handle);
        this.cleanable = CLEANER.register(this, state);
        this.ids = Schemes.names(Native.nodeIds(handle));
        long[] info = Native.info(handle);
        this.algorithm = Schemes.algorithms().get((int) info[0]);
        this.hash = Schemes.hashes().get((int) info[1]);
        if (meta != null) {
            this.addresses = strings((byte[][]) meta[0]);
            this.names = strings((byte[][]) meta[1]);
            this.version = meta[2] == null ? null : utf8((byte[]) meta[2]);
            this.epoch = meta[3] == null ? 0 : ((long[]) meta[3])[0];
        } else {
            this.addresses = null;
            this.names = null;
            this.version = null;
            this.epoch = 0;
        }
    }

    private static String utf8(byte[] b) {
        return new String(b, StandardCharsets.UTF_8);
    }

    private static byte[] bytes(String s) {
        return s == null ? null : s.getBytes(StandardCharsets.UTF_8);
    }

    private static List<String> strings(byte[][] raw) {
        List<String> out = new ArrayList<>(raw.length);
        for (byte[] b : raw) {
            out.add(b == null ? null : utf8(b));
        }
        return Collections.unmodifiableList(out);
    }

    // ---- building ------------------------------------------------------------------------

    /**
     * A table over the nodes (in this order: node i is index i in every result).
     *
     * @throws ChashException with libchash's message: no nodes, an empty or duplicate id, a
     *     weight out of range or unequal weights where the scheme has none, an unknown
     *     algorithm or hash, too many points
     */
    public static Table build(List<Node> nodes, Options options) {
        Objects.requireNonNull(nodes, "nodes");
        Options o = options == null ? Options.defaults() : options;
        byte[][] ids = new byte[nodes.size()][];
        double[] weights = new double[nodes.size()];
        for (int i = 0; i < ids.length; i++) {
            Node n = Objects.requireNonNull(nodes.get(i), "node");
            ids[i] = bytes(n.id());
            weights[i] = n.weight();
        }
        long h = Native.build(ids, weights, bytes(o.algorithm), bytes(o.hash), o.vnodes,
            o.tableSize, bytes(o.hashTag));
        return new Table(h, null);
    }

    /** A table over nodes of weight 1 with these ids. */
    public static Table build(Options options, String... ids) {
        List<Node> nodes = new ArrayList<>(ids.length);
        for (String id : ids) {
            nodes.add(new Node(id));
        }
        return build(nodes, options);
    }

    /**
     * The table of a pool of a twemproxy/nutcracker YAML file (chash-proxy's config), placing
     * keys exactly as chash-proxy, nutcracker and {@code chash lookup --config} do: the pool's
     * distribution, hash and hash_tag over its servers, in the order its distribution uses
     * (nutcracker's ketama/modula/random sort servers by name). {@link #address(int)} and
     * {@link #name(int)} give a node's "host:port" and its name in the file.
     *
     * @param pool the pool's name; null when the file has exactly one pool
     * @throws ChashException "file:line:column: message" for a file libchash refuses
     */
    public static Table fromConfig(Path file, String pool) {
        Object[] meta = new Object[4];
        long h = Native.fromConfig(bytes(file.toString()), bytes(pool), meta);
        return new Table(h, meta);
    }

    /**
     * The table of a membership document (docs/FLEET.md; what a chash fleet publishes in etcd):
     * YAML or JSON with "servers" and optionally "hash", "distribution", "hash_tag", "version"
     * and "epoch". {@code name} names the document in error messages.
     */
    public static Table fromMembership(String name, byte[] document) {
        Object[] meta = new Object[4];
        long h = Native.fromMembership(bytes(name == null ? "membership" : name),
            Objects.requireNonNull(document, "document"), meta);
        return new Table(h, meta);
    }

    // ---- lookups -------------------------------------------------------------------------

    private long handle() {
        long h = state.handle;
        if (h == 0) {
            throw new IllegalStateException("chash.Table is closed");
        }
        return h;
    }

    /** The owner of the key: a node index in [0, size()). */
    public int lookup(byte[] key) {
        try {
            return Native.lookup(handle(), key, key.length);
        } finally {
            Reference.reachabilityFence(this);
        }
    }

    /** The owner of the key's UTF-8 bytes. */
    public int lookup(String key) {
        return lookup(key.getBytes(StandardCharsets.UTF_8));
    }

    /** The id of the key's owner. */
    public String owner(String key) {
        return ids.get(lookup(key));
    }

    /** The owner of each key (one crossing into C for all of them). */
    public int[] lookupMany(byte[][] keys) {
        int total = 0;
        for (byte[] k : keys) {
            total = Math.addExact(total, k.length);
        }
        byte[] data = new byte[total];
        int[] ends = new int[keys.length];
        int at = 0;
        for (int i = 0; i < keys.length; i++) {
            System.arraycopy(keys[i], 0, data, at, keys[i].length);
            at += keys[i].length;
            ends[i] = at;
        }
        return lookupPacked(data, ends);
    }

    /** The owner of each key's UTF-8 bytes (one crossing into C for all of them). */
    public int[] lookupMany(List<String> keys) {
        byte[][] raw = new byte[keys.size()][];
        for (int i = 0; i < raw.length; i++) {
            raw[i] = keys.get(i).getBytes(StandardCharsets.UTF_8);
        }
        return lookupMany(raw);
    }

    /**
     * The owners of keys packed end to end in data: key i is data[ends[i-1], ends[i]) with
     * ends[-1] = 0. The cheapest form for many keys: no per-key object.
     */
    public int[] lookupPacked(byte[] data, int[] ends) {
        int prev = 0;
        for (int e : ends) {
            if (e < prev || e > data.length) {
                throw new IllegalArgumentException("ends must be non-decreasing within data ("
                    + e + " after " + prev + ", data.length " + data.length + ")");
            }
            prev = e;
        }
        int[] out = new int[ends.length];
        try {
            Native.lookupMany(handle(), data, ends, ends.length, out);
        } finally {
            Reference.reachabilityFence(this);
        }
        return out;
    }

    /**
     * The first min(r, size()) distinct nodes of the key's walk: its owner first, then the
     * failover order (chash.h's ch_replicas).
     *
     * @throws ChashException for r &gt; 1 under a scheme with no walk (jump, guava@31,
     *     pymemcache@3)
     */
    public int[] replicas(byte[] key, int r) {
        if (r < 0) {
            throw new IllegalArgumentException("replicas: r " + r + " < 0");
        }
        int[] out = new int[Math.min(r, ids.size())]; // a walk lists each node at most once
        int n;
        try {
            n = Native.replicas(handle(), key, key.length, out.length, out);
        } finally {
            Reference.reachabilityFence(this);
        }
        return n == out.length ? out : Arrays.copyOf(out, n);
    }

    public int[] replicas(String key, int r) {
        return replicas(key.getBytes(StandardCharsets.UTF_8), r);
    }

    /**
     * The key's hash as the table places it (chash.h's ch_key_hash: the hash_tag part, the
     * scheme's key hash), an unsigned 64-bit value in a long.
     */
    public long keyHash(byte[] key) {
        try {
            return Native.keyHash(handle(), key, key.length);
        } finally {
            Reference.reachabilityFence(this);
        }
    }

    // ---- the table's description ---------------------------------------------------------

    /** The number of nodes. */
    public int size() {
        return ids.size();
    }

    /** Node i's id (what the placement hashes). */
    public String nodeId(int i) {
        return ids.get(i);
    }

    /** The node ids, in index order. */
    public List<String> nodeIds() {
        return ids;
    }

    /** Node i's weight. */
    public double weight(int i) {
        Objects.checkIndex(i, ids.size());
        try {
            return Native.nodeWeight(handle(), i);
        } finally {
            Reference.reachabilityFence(this);
        }
    }

    /** Node i's address, "host:port" or a socket path (tables from a pool or a document). */
    public String address(int i) {
        return addresses == null ? ids.get(i) : addresses.get(i);
    }

    /** Node i's name in the pool, or null. */
    public String name(int i) {
        return names == null ? null : names.get(i);
    }

    /** The scheme's registry name, e.g. "ketama". */
    public String algorithm() {
        return algorithm;
    }

    /** The key hash's registry name (for a fixed-hash scheme, the scheme's own). */
    public String hash() {
        return hash;
    }

    /** A membership document's "version", else null. */
    public String version() {
        return version;
    }

    /** A membership document's "epoch", else 0. */
    public long epoch() {
        return epoch;
    }

    /** Frees the native table now; later calls throw IllegalStateException. Idempotent. */
    @Override
    public void close() {
        cleanable.clean();
    }

    @Override
    public String toString() {
        return "chash.Table[" + algorithm + ", " + hash + ", " + ids.size() + " nodes]";
    }
}
