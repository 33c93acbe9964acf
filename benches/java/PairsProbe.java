// The Java anchor for livecount's `Striped`: `java.util.concurrent.atomic.LongAdder` and
// `AtomicLong` doing increment + decrement pairs with the picker's loop shape (threads started
// together on a barrier, each timing its own loop of back-to-back pairs; the window runs from
// the earliest start to the latest end). Run by `scripts/longadder.sh`, and by the picker when
// a JDK is present (see `crates/picker/src/java_probe.rs`).
//
//     java PairsProbe.java [--seconds S] [--reps R] [THREADS...]   a table on stdout
//     java PairsProbe.java --serve                                 the picker's protocol
//
// `--serve` warms the JIT, prints `ready`, then answers each stdin line
// `run <LongAdder|AtomicLong> <threads> <pairs per thread>` with `<window ns> <cpu ns>` (the
// window, and the threads' CPU time in their loops summed), so the picker sizes, times and
// repeats these runs exactly as it does its own contenders, between them.

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.LongAdder;

public final class PairsProbe {
    /** The contenders, by the names the picker and the table use. */
    static final String[] IMPLS = {"LongAdder", "AtomicLong"};

    /** One thread's loop: `n` increment + decrement pairs on a fresh counter shared by all. */
    interface Loop {
        void pairs(long n);
    }

    static Loop counter(String impl) {
        switch (impl) {
            case "LongAdder": {
                LongAdder adder = new LongAdder();
                return n -> {
                    for (long i = 0; i < n; i++) {
                        adder.increment();
                        adder.decrement();
                    }
                };
            }
            case "AtomicLong": {
                AtomicLong atomic = new AtomicLong();
                return n -> {
                    for (long i = 0; i < n; i++) {
                        atomic.incrementAndGet();
                        atomic.decrementAndGet();
                    }
                };
            }
            default:
                throw new IllegalArgumentException(
                        "unknown counter `" + impl + "` (expected LongAdder or AtomicLong)");
        }
    }

    static final ThreadMXBean CPU = ManagementFactory.getThreadMXBean();

    /**
     * `{window, cpu}` of `threads` threads each doing `perThread` pairs: nanoseconds from the
     * earliest start to the latest end, and the threads' CPU time in their loops, summed.
     */
    static long[] run(String impl, int threads, long perThread) throws Exception {
        if (threads < 1 || perThread < 1) {
            throw new IllegalArgumentException("threads and pairs must be at least 1");
        }
        Loop loop = counter(impl);
        CyclicBarrier barrier = new CyclicBarrier(threads);
        long[] starts = new long[threads];
        long[] ends = new long[threads];
        long[] cpu = new long[threads];
        Thread[] workers = new Thread[threads];
        Throwable[] failed = new Throwable[1];
        for (int t = 0; t < threads; t++) {
            final int me = t;
            workers[t] = new Thread(() -> {
                try {
                    barrier.await();
                    starts[me] = System.nanoTime();
                    long cpu0 = CPU.getCurrentThreadCpuTime();
                    loop.pairs(perThread);
                    cpu[me] = CPU.getCurrentThreadCpuTime() - cpu0;
                    ends[me] = System.nanoTime();
                } catch (Throwable e) {
                    failed[0] = e;
                }
            });
            workers[t].start();
        }
        for (Thread w : workers) {
            w.join();
        }
        if (failed[0] != null) {
            throw new RuntimeException(failed[0]);
        }
        long window = Arrays.stream(ends).max().getAsLong() - Arrays.stream(starts).min().getAsLong();
        return new long[] {window, Arrays.stream(cpu).sum()};
    }

    /** Pairs per second of one run sized to about `seconds` (a pilot grows it first). */
    static double sized(String impl, int threads, double seconds) throws Exception {
        long n = 1_000;
        long ns;
        while ((ns = run(impl, threads, n)[0]) < seconds * 1e9 / 8 && n < (1L << 40)) {
            n *= 8;
        }
        n = Math.max(1, (long) (n * seconds * 1e9 / Math.max(ns, 1)));
        return threads * n / (run(impl, threads, n)[0] / 1e9);
    }

    /** Compiles both loops before anything is timed (C2 after tens of thousands of calls). */
    static void warm() throws Exception {
        for (String impl : IMPLS) {
            for (int threads : new int[] {1, 2}) {
                sized(impl, threads, 0.2);
            }
        }
    }

    static void serve() throws Exception {
        warm();
        System.out.println("ready");
        System.out.flush();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        String line;
        while ((line = in.readLine()) != null) {
            String[] w = line.trim().split("\\s+");
            if (w.length != 4 || !w[0].equals("run")) {
                System.out.println("error: expected `run <impl> <threads> <pairs>`, got `" + line + "`");
            } else {
                try {
                    long[] r = run(w[1], Integer.parseInt(w[2]), Long.parseLong(w[3]));
                    System.out.println(r[0] + " " + r[1]);
                } catch (Exception e) {
                    System.out.println("error: " + e.getMessage());
                }
            }
            System.out.flush();
        }
    }

    public static void main(String[] args) throws Exception {
        if (args.length == 1 && args[0].equals("--serve")) {
            serve();
            return;
        }
        double seconds = 0.5;
        int reps = 3;
        List<Integer> threads = new ArrayList<>();
        for (int i = 0; i < args.length; i++) {
            switch (args[i]) {
                case "--seconds": seconds = Double.parseDouble(args[++i]); break;
                case "--reps": reps = Integer.parseInt(args[++i]); break;
                default: threads.add(Integer.parseInt(args[i]));
            }
        }
        if (threads.isEmpty()) {
            threads = List.of(1, 2, 4, 8);
        }
        warm();
        System.out.println("counter\tthreads\tmedian pairs/s\tsamples");
        for (String impl : IMPLS) {
            for (int t : threads) {
                double[] v = new double[reps];
                for (int r = 0; r < reps; r++) {
                    v[r] = sized(impl, t, seconds);
                }
                double[] sorted = v.clone();
                Arrays.sort(sorted);
                System.out.printf("%s\t%d\t%.4g\t%s%n", impl, t, sorted[reps / 2], Arrays.toString(v));
            }
        }
    }
}
