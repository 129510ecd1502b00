// SPDX-License-Identifier: Apache-2.0
/*
 * GuavaConsistentHash.java — the oracle for chash's guava@31: the real
 * com.google.common.hash.Hashing.consistentHash(HashCode, int) of Guava (Debian libguava-java,
 * /usr/share/java/guava.jar), over Guava's own key hashes.
 *
 *   java -cp guava.jar:DIR GuavaConsistentHash {md5,crc32} < case
 *
 * Reads the case format of clients_compat.py on stdin (node W HEXID, key HEX; keys are bytes)
 * and prints, for each key, Hashing.consistentHash(Hashing.md5().hashBytes(key), N) (or
 * crc32()): the bucket, which is the node's index in the list; for "keyhash HEX64" lines,
 * Hashing.consistentHash(long, N) of that input.
 */
import com.google.common.hash.HashFunction;
import com.google.common.hash.Hashing;
import java.io.BufferedReader;
import java.io.BufferedWriter;
import java.io.InputStreamReader;
import java.io.OutputStreamWriter;
import java.nio.charset.StandardCharsets;

public class GuavaConsistentHash {
    static byte[] unhex(String hex) {
        if (hex.equals("-"))
            return new byte[0];
        byte[] b = new byte[hex.length() / 2];
        for (int i = 0; i < b.length; i++)
            b[i] = (byte) Integer.parseInt(hex.substring(2 * i, 2 * i + 2), 16);
        return b;
    }

    @SuppressWarnings("deprecation")
    public static void main(String[] args) throws Exception {
        HashFunction fn = args[0].equals("md5") ? Hashing.md5() : Hashing.crc32();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.US_ASCII));
        BufferedWriter out = new BufferedWriter(new OutputStreamWriter(System.out, StandardCharsets.US_ASCII));
        int buckets = 0;
        String line;
        while ((line = in.readLine()) != null) {
            String[] f = line.split(" ");
            if (f[0].equals("node")) {
                buckets++;
            } else if (f[0].equals("keyhash")) {
                long h = Long.parseUnsignedLong(f[1], 16);
                out.write(Integer.toString(Hashing.consistentHash(h, buckets)));
                out.write('\n');
            } else if (f[0].equals("key")) {
                out.write(Integer.toString(Hashing.consistentHash(fn.hashBytes(unhex(f[1])), buckets)));
                out.write('\n');
            }
        }
        out.flush();
    }
}
