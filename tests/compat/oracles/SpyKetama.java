// SPDX-License-Identifier: Apache-2.0
/*
 * SpyKetama.java — the oracle for chash's spymemcached@2 and spymemcached_libmemcached@2: the
 * real net.spy.memcached.KetamaNodeLocator of spymemcached (Debian libspymemcached-java,
 * /usr/share/java/spymemcached.jar) with DefaultHashAlgorithm.KETAMA_HASH.
 *
 *   java -cp spymemcached.jar:DIR SpyKetama {SPYMEMCACHED,LIBMEMCACHED} < case
 *
 * Reads the case format of clients_compat.py on stdin (node W HEXID, key HEX). Each node is a
 * MemcachedNode (a java.lang.reflect.Proxy: the locator only asks for getSocketAddress()) whose
 * InetSocketAddress is built without any name lookup from the id:
 *   SPYMEMCACHED  "ip:port" -> the address of that IP literal (String.valueOf gives "/ip:port");
 *                 "host/ip:port" -> InetAddress.getByAddress(host, ip) ("host/ip:port");
 *   LIBMEMCACHED  "host:port" -> InetAddress.getByAddress(host, 127.0.0.x) (getHostName() is
 *                 host, with no lookup).
 * With unequal weights the locator gets a weights map (weighted ketama); with equal weights no
 * map (spymemcached's unweighted ketama). Prints getPrimary(key).
 */
import java.io.BufferedReader;
import java.io.BufferedWriter;
import java.io.InputStreamReader;
import java.io.OutputStreamWriter;
import java.lang.reflect.Proxy;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Map;
import net.spy.memcached.DefaultHashAlgorithm;
import net.spy.memcached.KetamaNodeKeyFormatter;
import net.spy.memcached.KetamaNodeLocator;
import net.spy.memcached.MemcachedNode;

public class SpyKetama {
    static String utf8(String hex) {
        if (hex.equals("-"))
            return "";
        byte[] b = new byte[hex.length() / 2];
        for (int i = 0; i < b.length; i++)
            b[i] = (byte) Integer.parseInt(hex.substring(2 * i, 2 * i + 2), 16);
        return new String(b, StandardCharsets.UTF_8);
    }

    static byte[] ipv4(String ip) {
        String[] p = ip.split("\\.");
        byte[] b = new byte[4];
        for (int i = 0; i < 4; i++)
            b[i] = (byte) Integer.parseInt(p[i]);
        return b;
    }

    static InetSocketAddress address(String id, boolean libmemcached, int n) throws Exception {
        int colon = id.lastIndexOf(':');
        String host = id.substring(0, colon);
        int port = Integer.parseInt(id.substring(colon + 1));
        if (libmemcached)
            return new InetSocketAddress(InetAddress.getByAddress(host, new byte[] {127, 0, 0, (byte) (n + 1)}), port);
        int slash = host.indexOf('/');
        if (slash < 0)
            return new InetSocketAddress(InetAddress.getByAddress(ipv4(host)), port);
        return new InetSocketAddress(InetAddress.getByAddress(host.substring(0, slash), ipv4(host.substring(slash + 1))), port);
    }

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

    public static void main(String[] args) throws Exception {
        boolean libmemcached = args[0].equals("LIBMEMCACHED");
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.US_ASCII));
        BufferedWriter out = new BufferedWriter(new OutputStreamWriter(System.out, StandardCharsets.US_ASCII));
        List<MemcachedNode> nodes = new ArrayList<>();
        Map<MemcachedNode, Integer> index = new IdentityHashMap<>();
        Map<InetSocketAddress, Integer> weights = new HashMap<>();
        boolean equal = true;
        KetamaNodeLocator loc = null;
        String line;
        while ((line = in.readLine()) != null) {
            String[] f = line.split(" ");
            if (f[0].equals("node")) {
                double w = Double.parseDouble(f[1]);
                if (w != Math.floor(w))
                    throw new IllegalArgumentException("spymemcached weights are integers");
                InetSocketAddress a = address(utf8(f[2]), libmemcached, nodes.size());
                MemcachedNode m = node(a);
                index.put(m, nodes.size());
                if (!nodes.isEmpty() && (int) w != weights.values().iterator().next())
                    equal = false;
                weights.put(a, (int) w);
                nodes.add(m);
            } else if (f[0].equals("key")) {
                if (loc == null)
                    loc = new KetamaNodeLocator(nodes, DefaultHashAlgorithm.KETAMA_HASH,
                        libmemcached ? KetamaNodeKeyFormatter.Format.LIBMEMCACHED : KetamaNodeKeyFormatter.Format.SPYMEMCACHED,
                        equal ? new HashMap<InetSocketAddress, Integer>() : weights);
                out.write(Integer.toString(index.get(loc.getPrimary(utf8(f[1])))));
                out.write('\n');
            }
        }
        out.flush();
    }
}
