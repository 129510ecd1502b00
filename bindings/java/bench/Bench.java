// SPDX-License-Identifier: Apache-2.0
/*
 * Bench.java — a lookup through the Java binding against spymemcached's KetamaNodeLocator
 * (Debian libspymemcached-java), Java's best-known native ring, in one run: the same 10 nodes,
 * the same keys, and the same placement (chash's spymemcached@2 reproduces the locator; every
 * key is checked to land on the same node before anything is timed).
 *
 *   java -Dchash.jni=.../libchash_jni.so -cp chash.jar:spymemcached.jar:DIR Bench [KEYS]
 *
 * Each form is timed over all keys, 7 rounds after a warm-up of the JIT; the best round is
 * printed in ns per key. Single-threaded; a Table is lock-free, so threads scale.
 */
import chash.Options;
import chash.Table;
import java.lang.reflect.Proxy;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Map;
import java.util.function.IntSupplier;
import net.spy.memcached.DefaultHashAlgorithm;
import net.spy.memcached.KetamaNodeLocator;
import net.spy.memcached.MemcachedNode;

public class Bench {
    static MemcachedNode node(InetSocketAddress a) {
        return (MemcachedNode) Proxy.newProxyInstance(MemcachedNode.class.getClassLoader(),
            new Class<?>[] {MemcachedNode.class}, (proxy, m, args) -> {
                switch (m.getName()) {
                    case "getSocketAddress": return a;
                    case "hashCode": return System.identityHashCode(proxy);
                    case "equals": return proxy == args[0];
                    case "toString": return "node " + a;
                    default: throw new UnsupportedOperationException(m.getName());
                }
            });
    }

    static volatile int sink;

    /** The best of 7 rounds of one pass over n keys, in ns per key. */
    static double time(int n, IntSupplier pass) {
        for (int i = 0; i < 3; i++)
            sink += pass.getAsInt(); // warm-up: the JIT compiles the loop
        double best = Double.MAX_VALUE;
        for (int r = 0; r < 7; r++) {
            long t0 = System.nanoTime();
            sink += pass.getAsInt();
            best = Math.min(best, (System.nanoTime() - t0) / (double) n);
        }
        return best;
    }

    public static void main(String[] args) throws Exception {
        int n = args.length > 0 ? Integer.parseInt(args[0]) : 200000;
        List<MemcachedNode> nodes = new ArrayList<>();
        Map<MemcachedNode, Integer> index = new IdentityHashMap<>();
        String[] ids = new String[10];
        for (int i = 0; i < 10; i++) {
            byte[] ip = {10, 0, 0, (byte) (i + 1)};
            MemcachedNode m = node(new InetSocketAddress(InetAddress.getByAddress(ip), 11211));
            index.put(m, i);
            nodes.add(m);
            ids[i] = "10.0.0." + (i + 1) + ":11211";
        }
        KetamaNodeLocator spy = new KetamaNodeLocator(nodes, DefaultHashAlgorithm.KETAMA_HASH);
        String[] keys = new String[n];
        byte[][] raw = new byte[n][];
        int total = 0;
        for (int i = 0; i < n; i++) {
            keys[i] = "user:" + i + ":profile";
            raw[i] = keys[i].getBytes(StandardCharsets.UTF_8);
            total += raw[i].length;
        }
        byte[] packed = new byte[total];
        int[] ends = new int[n];
        for (int i = 0, at = 0; i < n; i++) {
            System.arraycopy(raw[i], 0, packed, at, raw[i].length);
            at += raw[i].length;
            ends[i] = at;
        }
        List<String> keyList = Arrays.asList(keys);
        try (Table t = Table.build(Options.of("spymemcached@2"), ids)) {
            for (int i = 0; i < n; i++)
                if (index.get(spy.getPrimary(keys[i])) != t.lookup(keys[i]))
                    throw new AssertionError("key " + keys[i] + ": spymemcached and chash differ");
            double tSpy = time(n, () -> {
                int s = 0;
                for (String k : keys)
                    s += System.identityHashCode(spy.getPrimary(k)) & 1;
                return s;
            });
            double tString = time(n, () -> {
                int s = 0;
                for (String k : keys)
                    s += t.lookup(k);
                return s;
            });
            double tBytes = time(n, () -> {
                int s = 0;
                for (byte[] k : raw)
                    s += t.lookup(k);
                return s;
            });
            double tMany = time(n, () -> t.lookupMany(keyList)[n - 1]);
            double tPacked = time(n, () -> t.lookupPacked(packed, ends)[n - 1]);
            // The crossing alone: chash's default ring, whose key hash costs a few ns.
            double tRing;
            try (Table ring = Table.build(Options.of("ring"), ids)) {
                tRing = time(n, () -> {
                    int s = 0;
                    for (byte[] k : raw)
                        s += ring.lookup(k);
                    return s;
                });
            }
            System.out.printf("Java binding vs spymemcached KetamaNodeLocator (KETAMA_HASH), 10 nodes, %d keys "
                + "(\"user:N:profile\"), same owner for every key; best of 7, ns per key (JDK %s):%n",
                n, System.getProperty("java.version"));
            System.out.printf("  spymemcached getPrimary(String)      %7.1f%n", tSpy);
            System.out.printf("  chash Table.lookup(String)           %7.1f  (%.2fx spymemcached)%n", tString, tString / tSpy);
            System.out.printf("  chash Table.lookup(byte[])           %7.1f  (%.2fx)%n", tBytes, tBytes / tSpy);
            System.out.printf("  chash Table.lookupMany(List<String>) %7.1f  (%.2fx)%n", tMany, tMany / tSpy);
            System.out.printf("  chash Table.lookupPacked(byte[], int[]) %4.1f  (%.2fx)%n", tPacked, tPacked / tSpy);
            System.out.printf("  chash Table.lookup(byte[]), ring (fnv1a32_fmix): the crossing %5.1f%n", tRing);
        }
    }
}
