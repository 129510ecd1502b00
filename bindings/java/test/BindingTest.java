// SPDX-License-Identifier: Apache-2.0
/*
 * BindingTest.java — the Java binding against `chash lookup`, every scheme in one JVM
 * (driven by java_binding_test.py, which runs the oracle and writes the case file).
 *
 *   java -Dchash.jni=libchash_jni.so -cp chash.jar:DIR BindingTest CASEFILE
 *
 * The case file, one record a line, fields separated by spaces, bytes in hex ("-": empty):
 *   K HEX                       a key (all K lines come first; every case uses all keys)
 *   S ALGO HASH|- VNODES R N    a scheme case over the next N "N HEXID WEIGHT" lines, then one
 *                               "E I0 I1 ..." line per key: its owner and replicas (indexes)
 *   C HEXPATH POOL              a pool of a YAML file, then one "A HEXADDR" line per key: the
 *                               owner's address as `chash lookup --config` prints it
 *   M HEXDOC                    a membership document, then "A HEXADDR" lines as for C
 * Checks per case: lookup(byte[]), lookup(String) where the key is valid UTF-8, replicas(key, R)
 * in order, lookupMany and lookupPacked over all keys. Prints one line per case and a summary;
 * exits 1 on the first mismatch (naming the key, the scheme and both answers).
 */
import chash.ChashException;
import chash.Node;
import chash.Options;
import chash.Schemes;
import chash.Table;
import java.io.BufferedReader;
import java.nio.ByteBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

public class BindingTest {
    static byte[] unhex(String h) {
        if (h.equals("-"))
            return new byte[0];
        byte[] b = new byte[h.length() / 2];
        for (int i = 0; i < b.length; i++)
            b[i] = (byte) Integer.parseInt(h.substring(2 * i, 2 * i + 2), 16);
        return b;
    }

    static String hex(byte[] b) {
        StringBuilder s = new StringBuilder();
        for (byte x : b)
            s.append(String.format("%02x", x & 0xff));
        return s.length() == 0 ? "-" : s.toString();
    }

    /** The key as a String when its bytes are well-formed UTF-8 (so the String form is the same key). */
    static String text(byte[] k) {
        try {
            return StandardCharsets.UTF_8.newDecoder().onMalformedInput(CodingErrorAction.REPORT)
                .onUnmappableCharacter(CodingErrorAction.REPORT).decode(ByteBuffer.wrap(k)).toString();
        } catch (CharacterCodingException e) {
            return null;
        }
    }

    static void fail(String msg) {
        System.out.println("FAIL: " + msg);
        System.exit(1);
    }

    static List<byte[]> keys = new ArrayList<>();
    static int checked = 0;

    static void checkOwners(String what, Table t, int[] expect) {
        byte[][] raw = keys.toArray(new byte[0][]);
        int[] many = t.lookupMany(raw);
        if (!Arrays.equals(many, expect))
            fail(what + ": lookupMany differs from the single lookups' oracle");
        List<String> texts = new ArrayList<>();
        for (byte[] k : raw) {
            String s = text(k);
            if (s != null)
                texts.add(s);
        }
        int[] viaText = t.lookupMany(texts);
        for (int i = 0, j = 0; i < raw.length; i++) {
            if (text(raw[i]) == null)
                continue;
            if (viaText[j++] != expect[i])
                fail(what + ": lookupMany(List<String>) differs at key " + hex(raw[i]));
        }
    }

    static void schemeCase(BufferedReader in, String[] f) throws Exception {
        String algo = f[1], hash = f[2].equals("-") ? null : f[2];
        int vnodes = Integer.parseInt(f[3]), r = Integer.parseInt(f[4]), n = Integer.parseInt(f[5]);
        List<Node> nodes = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            String[] g = in.readLine().split(" ");
            nodes.add(new Node(new String(unhex(g[1]), StandardCharsets.UTF_8), Double.parseDouble(g[2])));
        }
        Options o = Options.of(algo).withVnodes(vnodes);
        if (hash != null)
            o = o.withHash(hash);
        String what = algo + (hash != null ? " --hash " + hash : "") + " (" + n + " nodes, R " + r + ")";
        int[] owners = new int[keys.size()];
        try (Table t = Table.build(nodes, o)) {
            if (!t.algorithm().equals(algo))
                fail(what + ": table says algorithm " + t.algorithm());
            for (int i = 0; i < keys.size(); i++) {
                String[] e = in.readLine().split(" ");
                int[] want = new int[e.length - 1];
                for (int j = 1; j < e.length; j++)
                    want[j - 1] = Integer.parseInt(e[j]);
                byte[] k = keys.get(i);
                int own = t.lookup(k);
                if (algo.equals("random")) {
                    // nutcracker draws a random server per request, and so does `chash lookup`:
                    // its rows are one draw's walk (consecutive slots). libchash's ch_lookup is
                    // the deterministic h % N (chash.h); the walk continues slot by slot.
                    int[] got = t.replicas(k, r);
                    long h = t.keyHash(k);
                    if (own != (int) Long.remainderUnsigned(h, n) || got[0] != own)
                        fail(what + ": key " + hex(k) + ": owner " + own + " is not its hash mod " + n);
                    for (int j = 1; j < r; j++)
                        if (got[j] != (got[0] + j) % n || want[j] != (want[0] + j) % n)
                            fail(what + ": key " + hex(k) + ": the walk is not slot order");
                    owners[i] = own;
                    checked++;
                    continue;
                }
                if (own != want[0])
                    fail(what + ": key " + hex(k) + ": lookup " + t.nodeId(own) + ", chash lookup " + t.nodeId(want[0]));
                String s = text(k);
                if (s != null && t.lookup(s) != own)
                    fail(what + ": key " + hex(k) + ": lookup(String) differs from lookup(byte[])");
                if (r > 1) {
                    int[] got = t.replicas(k, r);
                    if (!Arrays.equals(got, want))
                        fail(what + ": key " + hex(k) + ": replicas " + Arrays.toString(got) + ", chash lookup " + Arrays.toString(want));
                }
                owners[i] = own;
                checked++;
            }
            checkOwners(what, t, owners);
        }
        System.out.println("ok " + what);
    }

    static void poolCase(BufferedReader in, Table t, String what) throws Exception {
        int[] owners = new int[keys.size()];
        for (int i = 0; i < keys.size(); i++) {
            String want = new String(unhex(in.readLine().split(" ")[1]), StandardCharsets.UTF_8);
            byte[] k = keys.get(i);
            int own = t.lookup(k);
            if (!t.address(own).equals(want))
                fail(what + ": key " + hex(k) + ": lookup " + t.address(own) + ", chash lookup " + want);
            owners[i] = own;
            checked++;
        }
        checkOwners(what, t, owners);
        System.out.println("ok " + what + " (" + t.algorithm() + ", " + t.hash() + ", " + t.size() + " servers)");
    }

    /** Errors carry libchash's messages and status codes. */
    static void errors() {
        try {
            Table.build(Options.of("ring"), "a", "a");
            fail("a duplicate id was accepted");
        } catch (ChashException e) {
            if (e.status() != -5 || !e.getMessage().contains("nodes 0 and 1 have the same id \"a\""))
                fail("duplicate id: " + e.status() + " " + e.getMessage());
        }
        try {
            Table.build(Options.of("no-such-scheme"), "a");
            fail("an unknown scheme was accepted");
        } catch (ChashException e) {
            if (e.status() != -4 || !e.getMessage().contains("no-such-scheme"))
                fail("unknown scheme: " + e.getMessage());
        }
        try {
            Table.build(new ArrayList<>(), Options.defaults());
            fail("an empty node list was accepted");
        } catch (ChashException e) {
            if (e.status() != -3)
                fail("empty: " + e.getMessage());
        }
        try (Table t = Table.build(Options.of("jump"), "a", "b")) {
            t.replicas("k", 2);
            fail("jump gave replicas");
        } catch (ChashException e) {
            if (!e.getMessage().contains("not supported"))
                fail("jump replicas: " + e.getMessage());
        }
        Table closed = Table.build(Options.defaults(), "a", "b");
        closed.close();
        closed.close();
        try {
            closed.lookup("k");
            fail("a closed table answered");
        } catch (IllegalStateException expected) {
            // closed
        }
        System.out.println("ok errors carry libchash's messages; close() is idempotent");
    }

    /** Runs fn, which must throw a ChashException of this status whose message holds every word. */
    static void refused(String what, int status, Runnable fn, String... words) {
        try {
            fn.run();
            fail(what + ": accepted");
        } catch (ChashException e) {
            for (String w : words)
                if (!e.getMessage().contains(w))
                    fail(what + ": message \"" + e.getMessage() + "\" lacks \"" + w + "\"");
            if (e.status() != status)
                fail(what + ": status " + e.status() + ", not " + status);
        }
    }

    /** A NUL in a string that goes to C is refused naming the argument (issue 35); a Path cannot
     * hold one (java.nio refuses it). */
    static void nulRefused() {
        Path cfg = Paths.get(System.getProperty("chash.src"), "tests/config/fixtures/valid_quirks.yml");
        byte[] doc = "{\"servers\": [\"127.0.0.1:6379:1 a\"]}".getBytes(StandardCharsets.UTF_8);
        refused("NUL in the algorithm", -1, () -> Table.build(Options.of("ring\0x"), "a", "b"), "algorithm", "NUL");
        refused("NUL in the hash", -1, () -> Table.build(Options.defaults().withHash("md5\0x"), "a", "b"), "hash", "NUL");
        refused("NUL in a node id", -1, () -> Table.build(Options.defaults(), "a\0b", "c"), "node id", "NUL");
        refused("NUL in the hash tag", -1, () -> Table.build(Options.defaults().withHashTag("{\0"), "a", "b"), "hash tag", "NUL");
        refused("NUL in the pool", -1, () -> Table.fromConfig(cfg, "alpha\0beta"), "pool", "NUL");
        refused("NUL in the document's name", -1, () -> Table.fromMembership("etcd://x\0y", doc), "name", "NUL");
        System.out.println("ok a NUL in any string argument is refused, naming it");
    }

    /** A build's refusal says which argument and which limit, in libchash's words (issue 35). */
    static void limitsNamed() {
        String[] ids = new String[100000];
        for (int i = 0; i < ids.length; i++)
            ids[i] = Integer.toString(i);
        refused("maglev of 100,000 nodes", -1, () -> Table.build(Options.of("maglev"), ids),
            "maglev: table_size 65537 must be a prime greater than the node count, 100000 (e.g. 100003)");
        refused("maglev's table size", -1, () -> Table.build(Options.of("maglev").withTableSize(4), "a", "b", "c"),
            "table_size 4 must be a prime greater than the node count, 3 (e.g. 5)");
        refused("ketama's vnodes", -1, () -> Table.build(Options.of("ketama").withVnodes(2), "a", "b", "c"),
            "ketama: vnodes 2 gives no node a point");
        List<Node> uneq = Arrays.asList(new Node("a", 1), new Node("b", 2));
        refused("jump's weights", -8, () -> Table.build(uneq, Options.of("jump")),
            "jump has no weights: every node must weigh the same, but node 1 (\"b\") weighs 2");
        List<Node> heavy = Arrays.asList(new Node("a", 500000), new Node("b", 1));
        refused("a ring's points", -9, () -> Table.build(heavy, Options.of("ring")),
            "ring: more than 67108864 points (CH_MAX_POINTS) from 2 nodes at vnodes 160");
        List<Node> hap = Arrays.asList(new Node("1", 1), new Node("2", 300));
        refused("haproxy@2's weights", -7, () -> Table.build(hap, Options.of("haproxy@2")),
            "HAProxy's weights are 1 to 256");
        StringBuilder doc = new StringBuilder("{\"distribution\": \"maglev\", \"servers\": [");
        for (int i = 0; i < 66000; i++)
            doc.append(i == 0 ? "" : ",").append("\"10.0.").append(i / 250).append('.').append(i % 250 + 1)
                .append(":6379:1\"");
        byte[] big = doc.append("]}").toString().getBytes(StandardCharsets.UTF_8);
        refused("a maglev document of 66,000 servers", -1, () -> Table.fromMembership("m", big),
            "table_size 65537 must be a prime greater than the node count, 66000 (e.g. 66029)");
        System.out.println("ok every refused build names its argument and limit");
    }

    /**
     * Runs fn under a watchdog: if it has not returned after 10 s, the JVM halts with status 1
     * (a deadline on the call returning, not a timing assertion: the thread stuck in native code
     * cannot be interrupted, so the watchdog thread ends the process).
     */
    static void bounded(String what, Runnable fn) {
        Thread dog = new Thread(() -> {
            try {
                Thread.sleep(10_000);
            } catch (InterruptedException returned) {
                return;
            }
            System.err.println("BindingTest: FAIL: " + what + " did not return within 10 s");
            Runtime.getRuntime().halt(1);
        });
        dog.setDaemon(true);
        dog.start();
        try {
            fn.run();
        } finally {
            dog.interrupt();
        }
    }

    /** 1 MiB and 16 MiB of nesting are refused at once, naming the limit (issue 35). */
    static void nesting() throws Exception {
        String limit = "nesting deeper than 64 levels, the limit (CH_CONFIG_MAX_DEPTH)";
        for (int size : new int[] {1 << 20, 16 << 20}) {
            byte[] flat = new byte[size];
            Arrays.fill(flat, (byte) '[');
            byte[] servers = flat.clone();
            System.arraycopy("{\"servers\": ".getBytes(StandardCharsets.UTF_8), 0, servers, 0, 12);
            bounded("fromMembership of " + size + " bytes of nesting", () -> {
                refused("'[' x " + size, -1, () -> Table.fromMembership("p", flat), "p:1:65: " + limit);
                refused("'{\"servers\": [[[...' of " + size, -1, () -> Table.fromMembership("p", servers),
                    "p:1:76: " + limit);
            });
            Path file = Files.createTempFile("chash-nesting-", ".yml");
            try {
                String head = "alpha:\n  servers:\n    ";
                StringBuilder text = new StringBuilder(head);
                while (text.length() + 2 <= size)
                    text.append("- ");
                Files.write(file, text.toString().getBytes(StandardCharsets.UTF_8));
                bounded("fromConfig of " + size + " bytes of nesting", () -> refused("a nested file of " + size, -1,
                    () -> Table.fromConfig(file, null), file + ":3:129: " + limit));
            } finally {
                Files.delete(file);
            }
        }
        System.out.println("ok 1 MiB and 16 MiB of nesting refused at once, naming the limit");
    }

    /** One table shared by 4 threads at once gives each thread the single-threaded answers. */
    static void threads() throws Exception {
        List<Node> nodes = new ArrayList<>();
        for (int i = 0; i < 50; i++)
            nodes.add(new Node("cache-" + i, 1 + i % 4));
        try (Table t = Table.build(nodes, Options.of("ring"))) {
            int[] want = t.lookupMany(keys.toArray(new byte[0][]));
            List<Thread> threads = new ArrayList<>();
            int[] bad = new int[1];
            for (int w = 0; w < 4; w++) {
                Thread th = new Thread(() -> {
                    for (int round = 0; round < 20; round++)
                        for (int i = 0; i < keys.size(); i++)
                            if (t.lookup(keys.get(i)) != want[i] || t.replicas(keys.get(i), 2)[0] != want[i])
                                synchronized (bad) {
                                    bad[0]++;
                                }
                });
                threads.add(th);
                th.start();
            }
            for (Thread th : threads)
                th.join();
            if (bad[0] != 0)
                fail(bad[0] + " lookups from 4 threads differ from one thread's");
        }
        System.out.println("ok 4 threads share one table: 4 x 20 x " + keys.size() + " lookups agree");
    }

    static long rssKiB() throws Exception {
        for (String l : Files.readAllLines(Paths.get("/proc/self/status")))
            if (l.startsWith("VmRSS:"))
                return Long.parseLong(l.replaceAll("[^0-9]", ""));
        return -1;
    }

    /**
     * Tables dropped without close() are freed by the Cleaner: 300 rings of 1,000 nodes x 160
     * points (about 1.3 MB each, 390 MB if leaked) leave the process's RSS within 150 MB.
     */
    static void cleaner() throws Exception {
        String[] ids = new String[1000];
        for (int i = 0; i < ids.length; i++)
            ids[i] = "node-" + i;
        System.gc();
        long before = rssKiB();
        for (int i = 0; i < 300; i++) {
            Table t = Table.build(Options.of("ring"), ids);
            sink += t.lookup("k" + i);
            if (i % 20 == 19) {
                System.gc();
                Thread.sleep(1); // the Cleaner's thread runs the frees
            }
        }
        long deadline = System.nanoTime() + 10_000_000_000L;
        long grown;
        do {
            System.gc();
            Thread.sleep(10);
            grown = (rssKiB() - before) / 1024;
        } while (grown >= 150 && System.nanoTime() < deadline);
        if (grown >= 150)
            fail("300 dropped tables grew the RSS by " + grown + " MB: the Cleaner did not free them");
        System.out.println("ok 300 dropped tables (~390 MB if leaked) freed by the Cleaner: RSS +" + grown + " MB");
    }

    static volatile int sink;

    public static void main(String[] args) throws Exception {
        long t0 = System.nanoTime();
        int cases = 0;
        List<String> seen = new ArrayList<>();
        try (BufferedReader in = Files.newBufferedReader(Paths.get(args[0]), StandardCharsets.US_ASCII)) {
            String line;
            while ((line = in.readLine()) != null) {
                String[] f = line.split(" ");
                switch (f[0]) {
                    case "K":
                        keys.add(unhex(f[1]));
                        break;
                    case "S":
                        schemeCase(in, f);
                        seen.add(f[1]);
                        cases++;
                        break;
                    case "C": {
                        Path p = Paths.get(new String(unhex(f[1]), StandardCharsets.UTF_8));
                        try (Table t = Table.fromConfig(p, f[2])) {
                            poolCase(in, t, p.getFileName() + " pool " + f[2]);
                        }
                        cases++;
                        break;
                    }
                    case "M": {
                        try (Table t = Table.fromMembership("doc", unhex(f[1]))) {
                            poolCase(in, t, "membership document (version " + t.version() + ", epoch " + t.epoch() + ")");
                        }
                        cases++;
                        break;
                    }
                    default:
                        fail("bad case line: " + line);
                }
            }
        }
        for (String a : Schemes.algorithms())
            if (!seen.contains(a))
                fail("scheme " + a + " of Schemes.algorithms() has no case");
        errors();
        nulRefused();
        limitsNamed();
        nesting();
        threads();
        cleaner();
        System.out.printf("BindingTest: %d cases, %d keys each, %d lookups checked, %.1f s%n", cases, keys.size(),
            checked, (System.nanoTime() - t0) / 1e9);
    }
}
