// NettyBench is the Java side of the Netty comparison (see README.md): one
// job a process, Netty's HashedWheelTimer at a 1 ms tick and 512 slots,
// the delays drawn from the SplitMix64 generator that the Go side
// (splitmix.go) implements identically. It prints its results as one
// line of JSON, a flat object of numbers; the idle job prints "ready"
// and waits for standard input to close, the driver measuring it from
// outside. Compiled by the driver with javac against netty-common.jar.
//
//   java -cp netty-common.jar:DIR NettyBench JOB N BUDGET_MS WARMUP_MS SPREAD_MS [BURST_WARMUP_N]

import io.netty.util.HashedWheelTimer;
import io.netty.util.Timeout;
import io.netty.util.TimerTask;
import java.lang.management.GarbageCollectorMXBean;
import java.lang.management.ManagementFactory;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.Arrays;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicIntegerArray;

public final class NettyBench {
    // The seeds and spans every job shares with the Go side (splitmix.go).
    static final long SEED_FILL = 1, SEED_PAIRS = 2, SEED_BURST = 3, SEED_WARM = 4;
    static final long TEN_MINUTES = 600_000_000_000L;

    // SplitMix64, as splitmix.go: the same sequence of delays both sides.
    static final class SplitMix64 {
        long state;
        SplitMix64(long seed) { state = seed; }
        long next() {
            long z = (state += 0x9e3779b97f4a7c15L);
            z = (z ^ (z >>> 30)) * 0xbf58476d1ce4e5b9L;
            z = (z ^ (z >>> 27)) * 0x94d049bb133111ebL;
            return z ^ (z >>> 31);
        }
        // delay returns a delay in [0, span) nanoseconds.
        long delay(long span) { return Long.remainderUnsigned(next(), span); }
    }

    static final TimerTask NOOP = timeout -> {};

    static HashedWheelTimer newTimer() {
        // 1 ms tick, 512 slots, no leak detection, no pending limit.
        return new HashedWheelTimer(r -> {
            Thread t = new Thread(r, "netty-wheel");
            t.setDaemon(true);
            return t;
        }, 1, TimeUnit.MILLISECONDS, 512, false, -1);
    }

    public static void main(String[] args) throws Exception {
        String job = args[0];
        int n = Integer.parseInt(args[1]);
        long budgetMs = Long.parseLong(args[2]);
        long warmupMs = Long.parseLong(args[3]);
        long spreadMs = Long.parseLong(args[4]);
        int burstWarm = args.length > 5 ? Integer.parseInt(args[5]) : 0;
        switch (job) {
            case "seed": seed(); break;
            case "pair": pair(n, budgetMs, warmupMs); break;
            case "heap": heap(n); break;
            case "burst": burst(n, spreadMs, burstWarm); break;
            case "idle": idle(); break;
            default: throw new IllegalArgumentException("no job " + job);
        }
    }

    // seed prints the first delays of each seed, for the driver to check
    // against the Go side's.
    static void seed() {
        StringBuilder b = new StringBuilder("{");
        long[] seeds = {SEED_FILL, SEED_PAIRS, SEED_BURST, SEED_WARM};
        for (int s = 0; s < seeds.length; s++) {
            SplitMix64 g = new SplitMix64(seeds[s]);
            long sum = 0;
            for (int i = 0; i < 1000; i++) sum += g.delay(TEN_MINUTES) / 1000;
            if (s > 0) b.append(',');
            b.append("\"seed").append(seeds[s]).append("\":").append(sum);
        }
        System.out.println(b.append('}'));
    }

    // cpuNanos is the process's CPU time, user plus system, from
    // /proc/self/stat (fields 14 and 15, in ticks of 1/100 s), as the Go
    // side reads it.
    static long cpuNanos() throws Exception { return statNanos("/proc/self/stat"); }

    // threadCpuNanos is the calling thread's CPU time, from
    // /proc/thread-self/stat, as the Go side's threadCPU.
    static long threadCpuNanos() throws Exception { return statNanos("/proc/thread-self/stat"); }

    static long statNanos(String path) throws Exception {
        String s = new String(Files.readAllBytes(Paths.get(path)));
        String[] f = s.substring(s.lastIndexOf(')') + 2).split(" ");
        return (Long.parseLong(f[11]) + Long.parseLong(f[12])) * 10_000_000L;
    }

    static long gcMillis() {
        long ms = 0;
        for (GarbageCollectorMXBean b : ManagementFactory.getGarbageCollectorMXBeans()) {
            ms += Math.max(b.getCollectionTime(), 0);
        }
        return ms;
    }

    // fill schedules n timeouts 0-10 minutes away, keeping their handles.
    static Timeout[] fill(HashedWheelTimer t, int n) {
        SplitMix64 g = new SplitMix64(SEED_FILL);
        Timeout[] kept = new Timeout[n];
        for (int i = 0; i < n; i++) {
            kept[i] = t.newTimeout(NOOP, g.delay(TEN_MINUTES), TimeUnit.NANOSECONDS);
        }
        return kept;
    }

    // pairs schedules and cancels timeouts, one call each, for budget
    // nanoseconds of wall time, and returns how many pairs it made.
    static long pairs(HashedWheelTimer t, SplitMix64 g, long budget) {
        long start = System.nanoTime(), count = 0;
        do {
            for (int i = 0; i < 1000; i++) {
                t.newTimeout(NOOP, g.delay(TEN_MINUTES), TimeUnit.NANOSECONDS).cancel();
            }
            count += 1000;
        } while (System.nanoTime() - start < budget);
        return count;
    }

    static void pair(int n, long budgetMs, long warmupMs) throws Exception {
        HashedWheelTimer t = newTimer();
        Timeout[] kept = fill(t, n);
        Thread.sleep(100); // the worker moves them from its queue to the wheel
        SplitMix64 g = new SplitMix64(SEED_PAIRS);
        pairs(t, g, warmupMs * 1_000_000L); // JIT
        long c0 = cpuNanos(), gc0 = gcMillis(), w0 = System.nanoTime();
        long count = pairs(t, g, budgetMs * 1_000_000L);
        long wall = System.nanoTime() - w0, cpu = cpuNanos() - c0, gc = gcMillis() - gc0;
        System.out.printf("{\"pairs\":%d,\"wall_ns\":%.2f,\"cpu_ns\":%.2f,\"gc_ms_per_s\":%.2f,\"kept\":%d}%n",
                count, (double) wall / count, (double) cpu / count, gc / (wall / 1e9), kept.length);
        t.stop();
    }

    static long heapUsed() throws Exception {
        for (int i = 0; i < 3; i++) {
            System.gc();
            Thread.sleep(50);
        }
        return ManagementFactory.getMemoryMXBean().getHeapMemoryUsage().getUsed();
    }

    static void heap(int n) throws Exception {
        HashedWheelTimer t = newTimer();
        t.newTimeout(NOOP, 1, TimeUnit.HOURS).cancel(); // starts the worker
        Thread.sleep(100);
        long before = heapUsed();
        Timeout[] kept = fill(t, n);
        Thread.sleep(200); // the worker moves them from its queue to the wheel
        long after = heapUsed();
        System.out.printf("{\"bytes\":%.2f,\"kept\":%d}%n", (double) (after - before) / n, kept.length);
        t.stop();
    }

    // warmBurst runs a burst of n timeouts through t before the measured
    // one, as the Go side's warmBurst (child.go): due within spread of
    // their calls (delays from SEED_WARM), each counting its fire, and
    // waits for the last: the JIT's warm-up of the burst's paths.
    static void warmBurst(HashedWheelTimer t, int n, long spreadMs) throws Exception {
        if (n <= 0) return;
        AtomicInteger fired = new AtomicInteger();
        CountDownLatch done = new CountDownLatch(1);
        TimerTask task = timeout -> {
            if (fired.incrementAndGet() == n) done.countDown();
        };
        SplitMix64 g = new SplitMix64(SEED_WARM);
        long spread = spreadMs * 1_000_000L;
        for (int i = 0; i < n; i++) {
            t.newTimeout(task, g.delay(spread), TimeUnit.NANOSECONDS);
        }
        if (!done.await(spreadMs + 30_000, TimeUnit.MILLISECONDS)) {
            throw new IllegalStateException("the warm-up burst: " + fired.get() + " of " + n + " fired");
        }
    }

    static void burst(int n, long spreadMs, int burstWarm) throws Exception {
        HashedWheelTimer t = newTimer();
        t.newTimeout(NOOP, 1, TimeUnit.HOURS).cancel(); // starts the worker
        warmBurst(t, burstWarm, spreadMs);
        SplitMix64 g = new SplitMix64(SEED_BURST);
        long spread = spreadMs * 1_000_000L;
        long[] delays = new long[n], deadline = new long[n], late = new long[n];
        AtomicIntegerArray runs = new AtomicIntegerArray(n);
        AtomicInteger fired = new AtomicInteger();
        long[] end = new long[1];
        CountDownLatch done = new CountDownLatch(1);
        TimerTask[] tasks = new TimerTask[n];
        long[] base = new long[1];
        for (int i = 0; i < n; i++) {
            delays[i] = g.delay(spread);
            final int k = i;
            tasks[i] = timeout -> {
                long now = System.nanoTime() - base[0];
                late[k] = now - deadline[k];
                runs.incrementAndGet(k);
                if (fired.incrementAndGet() == n) {
                    end[0] = now;
                    done.countDown();
                }
            };
        }
        System.gc();
        Thread.sleep(100);
        long t0 = threadCpuNanos();
        long c0 = cpuNanos(), gc0 = gcMillis();
        base[0] = System.nanoTime();
        for (int i = 0; i < n; i++) {
            deadline[i] = System.nanoTime() - base[0] + delays[i];
            t.newTimeout(tasks[i], delays[i], TimeUnit.NANOSECONDS);
        }
        long scheduled = System.nanoTime() - base[0];
        long c1 = cpuNanos();
        long t1 = threadCpuNanos();
        boolean all = done.await(spreadMs + 30_000, TimeUnit.MILLISECONDS);
        long c2 = cpuNanos(), gc = gcMillis() - gc0;
        Thread.sleep(50); // a second run of any would show now
        long early = 0, lost = 0, twice = 0;
        long[] seen = new long[n];
        int m = 0;
        for (int i = 0; i < n; i++) {
            int r = runs.get(i);
            if (r == 0) { lost++; continue; }
            if (r > 1) twice++;
            if (late[i] < 0) early++;
            seen[m++] = late[i];
        }
        Arrays.sort(seen, 0, m);
        double fps = all ? n / (end[0] / 1e9) : 0;
        String dec = all ? decompose(deadline, late, scheduled) : "";
        System.out.printf("{" + dec + "\"gc_ms\":" + gc + ",\"schedule_ns\":%.2f,\"schedule_cpu_ns\":%.2f,\"caller_cpu_ns\":%.2f,\"cpu_ns\":%.2f,\"fires_per_s\":%.0f,\"late_p50_ms\":%.3f,\"late_p99_ms\":%.3f,\"late_max_ms\":%.3f,\"early\":%d,\"lost\":%d,\"double\":%d}%n",
                (double) scheduled / n, (double) (c1 - c0) / n, (double) (t1 - t0) / n, (double) (c2 - c0) / n, fps, pct(seen, m, 0.50) / 1e6, pct(seen, m, 0.99) / 1e6,
                m > 0 ? seen[m - 1] / 1e6 : 0.0, early, lost, twice);
        t.stop();
    }

    // decompose splits the burst's time from the first call to the last
    // fire, as the Go side's decompose (child.go): the loop, the last
    // deadline, the last fire, and how far firing was behind; returned
    // as JSON members followed by a comma. It sorts copies.
    static String decompose(long[] deadline, long[] late, long loop) {
        int m = deadline.length;
        long[] due = deadline.clone(), fire = new long[m];
        for (int i = 0; i < m; i++) fire[i] = deadline[i] + late[i];
        Arrays.sort(due);
        Arrays.sort(fire);
        if (m == 0) return "";
        int worst = 0, f = 0;
        for (int i = 0; i < m; i++) {
            while (f < m && fire[f] <= due[i]) f++;
            worst = Math.max(worst, i + 1 - f);
        }
        int dueByLoop = upper(due, loop), firedByLoop = upper(fire, loop);
        return String.format("\"loop_ms\":%.3f,\"last_due_ms\":%.3f,\"end_ms\":%.3f,\"behind_at_loop_end\":%d,\"behind_max\":%d,",
                loop / 1e6, due[m - 1] / 1e6, fire[m - 1] / 1e6, Math.max(0, dueByLoop - firedByLoop), worst);
    }

    // upper is the number of values of sorted not above v.
    static int upper(long[] sorted, long v) {
        int lo = 0, hi = sorted.length;
        while (lo < hi) {
            int mid = (lo + hi) >>> 1;
            if (sorted[mid] <= v) lo = mid + 1; else hi = mid;
        }
        return lo;
    }

    // pct is the p-th percentile of the m sorted values, nearest rank.
    static double pct(long[] sorted, int m, double p) {
        if (m == 0) return 0;
        int i = (int) Math.ceil(p * m) - 1;
        return sorted[Math.max(0, Math.min(i, m - 1))];
    }

    static void idle() throws Exception {
        HashedWheelTimer t = newTimer();
        Timeout kept = t.newTimeout(NOOP, 1, TimeUnit.HOURS);
        System.out.println("ready");
        System.out.flush();
        while (System.in.read() >= 0) {
        }
        if (kept.isExpired()) throw new IllegalStateException("fired early");
        t.stop();
    }
}
