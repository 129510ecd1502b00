// SPDX-License-Identifier: Apache-2.0
package chash;

/**
 * The JNI shim (bindings/java/jni/chash_jni.c, libchash_jni.so) over libchash. Text crosses as
 * UTF-8 byte arrays; a table is its ch_table pointer as a long, owned by {@link Table}.
 *
 * <p>The library is found as the system property {@code chash.jni} (a path to
 * libchash_jni.so) when set, else by {@code System.loadLibrary("chash_jni")} on
 * {@code java.library.path}, which on Debian includes /usr/lib/&lt;multiarch&gt;/jni, where the
 * package libchash-java installs it.
 */
final class Native {
    static {
        String path = System.getProperty("chash.jni");
        try {
            if (path != null && !path.isEmpty()) {
                System.load(path);
            } else {
                System.loadLibrary("chash_jni");
            }
        } catch (UnsatisfiedLinkError e) {
            UnsatisfiedLinkError hint = new UnsatisfiedLinkError(e.getMessage()
                + " (chash.jar's JNI library: the package libchash-java installs it in"
                + " /usr/lib/<multiarch>/jni; else -Djava.library.path=DIR or"
                + " -Dchash.jni=/path/to/libchash_jni.so)");
            hint.initCause(e);
            throw hint;
        }
    }

    private Native() {}

    static native byte[][] algorithms();

    static native byte[][] hashes();

    static native int algoFlags(int algo);

    static native byte[] version();

    static native long build(byte[][] ids, double[] weights, byte[] algo, byte[] hash, int vnodes,
                             int tableSize, byte[] hashTag);

    static native long fromConfig(byte[] path, byte[] pool, Object[] meta);

    static native long fromMembership(byte[] name, byte[] doc, Object[] meta);

    static native void free(long table);

    static native byte[][] nodeIds(long table);

    static native long[] info(long table);

    static native double nodeWeight(long table, int i);

    static native int lookup(long table, byte[] key, int len);

    static native long keyHash(long table, byte[] key, int len);

    static native int replicas(long table, byte[] key, int len, int r, int[] out);

    static native void lookupMany(long table, byte[] data, int[] ends, int n, int[] out);
}
