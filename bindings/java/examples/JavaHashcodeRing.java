// SPDX-License-Identifier: Apache-2.0
/*
 * JavaHashcodeRing.java — seed 003's case: a service that shards with the Java tutorial ring
 * (String.hashCode, Math.abs, a TreeMap of 100 points per server) moves to chash's table of the
 * same placement, java_hashcode_ring, without moving a key. The tutorial ring is written out
 * below as such services have it; every key goes to the same server under both.
 *
 *   javac -cp /usr/share/java/chash.jar JavaHashcodeRing.java
 *   java -cp /usr/share/java/chash.jar:. JavaHashcodeRing
 */
import chash.Options;
import chash.Table;
import java.util.Map;
import java.util.SortedMap;
import java.util.TreeMap;

public class JavaHashcodeRing {
    /** The tutorial ring: 100 points per server at Math.abs((server + "#" + i).hashCode()). */
    static final class TutorialRing {
        private final TreeMap<Integer, String> ring = new TreeMap<>();

        TutorialRing(String... servers) {
            for (String s : servers)
                for (int i = 0; i < 100; i++)
                    ring.put(Math.abs((s + "#" + i).hashCode()), s);
        }

        String get(String key) {
            Map.Entry<Integer, String> e = ring.ceilingEntry(Math.abs(key.hashCode()));
            return (e != null ? e : ring.firstEntry()).getValue();
        }
    }

    public static void main(String[] args) {
        String[] servers = {"serveur_A", "serveur_B", "serveur_C"};
        TutorialRing old = new TutorialRing(servers);
        SortedMap<String, Integer> counts = new TreeMap<>();
        int same = 0, keys = 20000;
        try (Table t = Table.build(Options.of("java_hashcode_ring").withVnodes(100), servers)) {
            for (int i = 0; i < keys; i++) {
                String key = "user:" + i;
                String owner = t.owner(key);
                counts.merge(owner, 1, Integer::sum);
                if (owner.equals(old.get(key)))
                    same++;
            }
            System.out.println("user:42 -> " + t.owner("user:42") + ", replicas "
                + t.nodeId(t.replicas("user:42", 2)[1]) + " next");
        }
        System.out.println(same + " of " + keys + " keys on the same server as the tutorial ring");
        System.out.println("keys per server: " + counts);
        if (same != keys)
            System.exit(1);
    }
}
