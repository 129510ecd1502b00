// SPDX-License-Identifier: Apache-2.0
/*
 * FleetRoute.java — route exactly like my chash-proxy fleet: the table of a pool of the
 * fleet's twemproxy/nutcracker YAML file sends every key to the server chash-proxy (and
 * nutcracker, and `chash lookup --config FILE`) sends it to: the pool's distribution, hash and
 * hash_tag over its servers in nutcracker's order.
 *
 *   javac -cp /usr/share/java/chash.jar FleetRoute.java
 *   java -cp /usr/share/java/chash.jar:. FleetRoute /etc/chash-proxy/chash-proxy.yml [POOL] [KEY...]
 */
import chash.Table;
import java.nio.file.Paths;
import java.util.Arrays;
import java.util.List;

public class FleetRoute {
    public static void main(String[] args) {
        if (args.length < 1) {
            System.err.println("usage: FleetRoute FILE.yml [POOL] [KEY...]");
            System.exit(2);
        }
        String pool = args.length > 1 ? args[1] : null; // null: the file's only pool
        List<String> keys = args.length > 2 ? Arrays.asList(args).subList(2, args.length)
                                            : Arrays.asList("user:42", "{user:42}:cart", "session:9");
        // One immutable table for the whole process: share it across threads, rebuild it when
        // the file changes (and drop the old one: its Cleaner frees it).
        try (Table t = Table.fromConfig(Paths.get(args[0]), pool)) {
            System.out.println(t);
            int[] owners = t.lookupMany(keys); // one call for the batch
            for (int i = 0; i < keys.size(); i++) {
                int o = owners[i];
                String name = t.name(o);
                System.out.println(keys.get(i) + "\t" + t.address(o) + (name != null ? "\t" + name : ""));
            }
        }
    }
}
