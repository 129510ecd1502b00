// SPDX-License-Identifier: Apache-2.0
/*
 * JavaHashcodeRing.java — the oracle for chash's java_hashcode_ring: the Java tutorial ring as
 * issue 15 describes it, written from that description (not from chash's code), on the real
 * java.lang.String.hashCode() and java.util.TreeMap:
 *
 *   position = Math.abs(("<server>#" + i).hashCode()), i from 0 (Math.abs(Integer.MIN_VALUE)
 *   stays negative); a TreeMap<Integer, String> where a later put at an equal position replaces
 *   the owner; a key goes to ceilingEntry(Math.abs(key.hashCode())), else to firstEntry().
 *
 * Reads the case format of clients_compat.py on stdin (vnodes, node W HEXID, key HEX); ids and
 * keys are well-formed UTF-8, decoded into Strings. Prints each key's owner as its index in the
 * node list.
 */
import java.io.BufferedReader;
import java.io.BufferedWriter;
import java.io.InputStreamReader;
import java.io.OutputStreamWriter;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

public class JavaHashcodeRing {
    private final TreeMap<Integer, String> ring = new TreeMap<>();

    JavaHashcodeRing(List<String> servers, int vnodes) {
        for (String s : servers)
            for (int i = 0; i < vnodes; i++)
                ring.put(Math.abs((s + "#" + i).hashCode()), s);
    }

    String get(String key) {
        Map.Entry<Integer, String> e = ring.ceilingEntry(Math.abs(key.hashCode()));
        return e != null ? e.getValue() : ring.firstEntry().getValue();
    }

    static String utf8(String hex) {
        if (hex.equals("-"))
            return "";
        byte[] b = new byte[hex.length() / 2];
        for (int i = 0; i < b.length; i++)
            b[i] = (byte) Integer.parseInt(hex.substring(2 * i, 2 * i + 2), 16);
        return new String(b, StandardCharsets.UTF_8);
    }

    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.US_ASCII));
        BufferedWriter out = new BufferedWriter(new OutputStreamWriter(System.out, StandardCharsets.US_ASCII));
        int vnodes = 100;
        List<String> servers = new ArrayList<>();
        Map<String, Integer> index = new HashMap<>();
        JavaHashcodeRing r = null;
        String line;
        while ((line = in.readLine()) != null) {
            String[] f = line.split(" ");
            if (f[0].equals("vnodes")) {
                vnodes = Integer.parseInt(f[1]);
            } else if (f[0].equals("node")) {
                if (Double.parseDouble(f[1]) != 1.0)
                    throw new IllegalArgumentException("the tutorial ring has no weights");
                servers.add(utf8(f[2]));
                index.put(servers.get(servers.size() - 1), servers.size() - 1);
            } else if (f[0].equals("key")) {
                if (r == null)
                    r = new JavaHashcodeRing(servers, vnodes);
                out.write(Integer.toString(index.get(r.get(utf8(f[1])))));
                out.write('\n');
            }
        }
        out.flush();
    }
}
