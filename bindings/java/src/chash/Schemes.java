// SPDX-License-Identifier: Apache-2.0
package chash;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;

/**
 * libchash's registries, in registry order: the placement schemes ("ring", "ketama",
 * "java_hashcode_ring", "spymemcached@2", ...) and the key hashes, as {@link Options} takes
 * them; and the library's version.
 */
public final class Schemes {
    /** A scheme accepts unequal weights (chash.h's CH_ALGO_F_WEIGHTED). */
    public static final int WEIGHTED = 1;
    /** The scheme fixes its own key hash: Options' hash is ignored. */
    public static final int FIXED_HASH = 2;
    /** The scheme names servers by address: node ids are "host:port". */
    public static final int ADDR_IDS = 4;
    /** The placement hashes the key with each node: no walk, replicas(key, r) only for r = 1. */
    public static final int KEYED = 8;
    /** Not consistent: a change of the node list moves most keys (modulo placements). */
    public static final int REMAPS = 16;
    /** The library's weights are whole numbers >= 1; others are refused. */
    public static final int WHOLE_WEIGHTS = 32;

    private static final List<String> ALGORITHMS = names(Native.algorithms());
    private static final List<String> HASHES = names(Native.hashes());

    private Schemes() {}

    static List<String> names(byte[][] raw) {
        List<String> out = new ArrayList<>(raw.length);
        for (byte[] b : raw) {
            out.add(new String(b, StandardCharsets.UTF_8));
        }
        return Collections.unmodifiableList(out);
    }

    /** The scheme ids, e.g. "ring", "hashring@3", "dalli@3" (an index is its chash.h enum value). */
    public static List<String> algorithms() {
        return ALGORITHMS;
    }

    /** The key hash names, e.g. "fnv1a32_fmix", "md5", "java_hashcode". */
    public static List<String> hashes() {
        return HASHES;
    }

    /** What a scheme takes, as WEIGHTED | FIXED_HASH | ADDR_IDS | KEYED | REMAPS | WHOLE_WEIGHTS
     * bits. */
    public static int flags(String algorithm) {
        int i = ALGORITHMS.indexOf(algorithm);
        if (i < 0) {
            throw new ChashException(-4, "unknown algorithm '" + algorithm
                + "' (Schemes.algorithms() lists them)");
        }
        return Native.algoFlags(i);
    }

    /** The version of the libchash the binding runs with, "MAJOR.MINOR.PATCH". */
    public static String libraryVersion() {
        return new String(Native.version(), StandardCharsets.UTF_8);
    }
}
