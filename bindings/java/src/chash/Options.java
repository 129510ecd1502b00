// SPDX-License-Identifier: Apache-2.0
package chash;

/**
 * How a table places keys: the algorithm (scheme) and key hash by their registry names
 * ({@link Schemes#algorithms()}, {@link Schemes#hashes()}; as {@code chash lookup --algo} and
 * {@code --hash} take them), ring points per unit weight, maglev's table size and twemproxy's
 * hash_tag. Immutable; each {@code with...} returns a new Options.
 *
 * <pre>{@code Options.of("java_hashcode_ring")}
 * {@code Options.of("ketama").withHash("md5").withHashTag("{}")}</pre>
 */
public final class Options {
    final String algorithm; // null: libchash's default ("ring")
    final String hash; // null: the default (fnv1a32_fmix); fixed-hash schemes ignore it
    final int vnodes; // 0: the scheme's own default (a client library's, else 160)
    final int tableSize; // 0: the default (65537)
    final String hashTag; // null: none

    private Options(String algorithm, String hash, int vnodes, int tableSize, String hashTag) {
        this.algorithm = algorithm;
        this.hash = hash;
        this.vnodes = vnodes;
        this.tableSize = tableSize;
        this.hashTag = hashTag;
    }

    /** libchash's defaults: the ring with fnv1a32_fmix. */
    public static Options defaults() {
        return new Options(null, null, 0, 0, null);
    }

    /** The defaults with this algorithm, e.g. "ring", "ketama", "spymemcached@2". */
    public static Options of(String algorithm) {
        return defaults().withAlgorithm(algorithm);
    }

    public Options withAlgorithm(String name) {
        return new Options(name, hash, vnodes, tableSize, hashTag);
    }

    public Options withHash(String name) {
        return new Options(algorithm, name, vnodes, tableSize, hashTag);
    }

    /** Ring points per unit weight; 0 (the default) gives each scheme its own default. */
    public Options withVnodes(int vnodes) {
        if (vnodes < 0) {
            throw new IllegalArgumentException("vnodes " + vnodes + " < 0");
        }
        return new Options(algorithm, hash, vnodes, tableSize, hashTag);
    }

    /** maglev's table size, a prime greater than the number of nodes. */
    public Options withTableSize(int size) {
        if (size < 0) {
            throw new IllegalArgumentException("table size " + size + " < 0");
        }
        return new Options(algorithm, hash, vnodes, size, hashTag);
    }

    /** twemproxy's hash_tag, two characters such as "{}"; null for none. */
    public Options withHashTag(String tag) {
        return new Options(algorithm, hash, vnodes, tableSize, tag);
    }

    public String algorithm() {
        return algorithm == null ? "ring" : algorithm;
    }

    @Override
    public String toString() {
        return "Options[algorithm=" + algorithm() + ", hash=" + (hash == null ? "default" : hash)
            + ", vnodes=" + vnodes + ", tableSize=" + tableSize + ", hashTag=" + hashTag + "]";
    }
}
