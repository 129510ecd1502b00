// SPDX-License-Identifier: Apache-2.0
/*
 * BenchJna.java — the measurement behind the binding's choice of JNI over JNA (README.md):
 * ch_lookup on the same table and keys through JNA (Debian libjna-java) in its fastest mode,
 * direct mapping (Native.register), against the binding's JNI shim. The table is built through
 * JNA too (ch_options_init, ch_algo_from_name, ch_table_build on raw memory).
 *
 *   java -Dchash.jni=.../libchash_jni.so -Djna.library.path=BUILD -cp chash.jar:jna.jar:DIR BenchJna [KEYS]
 */
import chash.Options;
import chash.Table;
import com.sun.jna.Memory;
import com.sun.jna.Native;
import com.sun.jna.NativeLibrary;
import com.sun.jna.Pointer;
import com.sun.jna.ptr.PointerByReference;
import java.nio.charset.StandardCharsets;
import java.util.function.IntSupplier;

public class BenchJna {
    static {
        Native.register(NativeLibrary.getInstance("chash"));
    }

    static native void ch_options_init(Pointer opt);

    static native int ch_algo_from_name(String name, Pointer out);

    static native int ch_table_build(Pointer nodes, long n, Pointer opt, PointerByReference out);

    static native long ch_lookup(Pointer t, byte[] key, long len);

    static native void ch_table_free(Pointer t);

    static volatile int sink;

    static double time(int n, IntSupplier pass) {
        for (int i = 0; i < 3; i++)
            sink += pass.getAsInt();
        double best = Double.MAX_VALUE;
        for (int r = 0; r < 7; r++) {
            long t0 = System.nanoTime();
            sink += pass.getAsInt();
            best = Math.min(best, (System.nanoTime() - t0) / (double) n);
        }
        return best;
    }

    public static void main(String[] args) {
        int n = args.length > 0 ? Integer.parseInt(args[0]) : 200000;
        String[] ids = new String[10];
        Memory nodes = new Memory(16L * ids.length); // ch_node: {const char *id; double weight}
        Memory[] idMem = new Memory[ids.length];
        for (int i = 0; i < ids.length; i++) {
            ids[i] = "10.0.0." + (i + 1) + ":11211";
            byte[] b = ids[i].getBytes(StandardCharsets.UTF_8);
            idMem[i] = new Memory(b.length + 1);
            idMem[i].write(0, b, 0, b.length);
            idMem[i].setByte(b.length, (byte) 0);
            nodes.setPointer(16L * i, idMem[i]);
            nodes.setDouble(16L * i + 8, 1.0);
        }
        Memory opt = new Memory(64);
        ch_options_init(opt);
        if (ch_algo_from_name("spymemcached@2", opt.share(Native.SIZE_T_SIZE)) != 0)
            throw new AssertionError("ch_algo_from_name");
        PointerByReference out = new PointerByReference();
        if (ch_table_build(nodes, ids.length, opt, out) != 0)
            throw new AssertionError("ch_table_build");
        Pointer jt = out.getValue();
        byte[][] raw = new byte[n][];
        for (int i = 0; i < n; i++)
            raw[i] = ("user:" + i + ":profile").getBytes(StandardCharsets.UTF_8);
        try (Table t = Table.build(Options.of("spymemcached@2"), ids)) {
            for (byte[] k : raw)
                if (ch_lookup(jt, k, k.length) != t.lookup(k))
                    throw new AssertionError("JNA and JNI differ");
            double tJna = time(n, () -> {
                int s = 0;
                for (byte[] k : raw)
                    s += (int) ch_lookup(jt, k, k.length);
                return s;
            });
            double tJni = time(n, () -> {
                int s = 0;
                for (byte[] k : raw)
                    s += t.lookup(k);
                return s;
            });
            System.out.printf("ch_lookup(byte[]) per key, spymemcached@2, 10 nodes, %d keys: JNA direct mapping "
                + "%.1f ns, the JNI shim %.1f ns (JNA %+.1f ns a call)%n", n, tJna, tJni, tJna - tJni);
        } finally {
            ch_table_free(jt);
        }
    }
}
