// Command netty compares hourglass's timers with Netty's HashedWheelTimer
// (issue 45), side by side: Netty 4.1 from Debian's netty-common.jar at a
// 1 ms tick and 512 slots, hourglass's default Timer (hierarchical wheel,
// 1 ms tick), the same delays drawn on both sides from one seeded
// SplitMix64. Each measurement is a process of its own, a JVM running
// NettyBench.java or this program run with -child, in turns (in order,
// then in reverse on alternate rounds); the table gives the medians of
// the rounds and hourglass's ratio to Netty.
//
//	go run . [-rounds 3] [-quick] [-n 1000000] [-burst 1000000] [-json]
//
// It exits with status 1 if a burst fired a timeout early, lost one or
// fired one twice, on either side, or if the two sides' generators
// disagree; the timing rows are only reported. See README.md.
package main

import (
	"bufio"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"time"
)

//go:embed NettyBench.java
var javaSource []byte

func main() {
	child := flag.String("child", "", "run one Go job and print its result (used by the driver)")
	rounds := flag.Int("rounds", 3, "rounds of every job, in turns")
	quick := flag.Bool("quick", false, "a quick round for CI: small n, short budgets, one round")
	n := flag.Int("n", 1_000_000, "timeouts pending in the pair and heap rows")
	burstN := flag.Int("burst", 1_000_000, "timeouts in the burst")
	spread := flag.Duration("spread", 200*time.Millisecond, "the burst's timeouts are due within this of their calls")
	budget := flag.Duration("budget", time.Second, "measured wall time of the pair loop")
	warmup := flag.Duration("warmup", time.Second, "the pair loop's run before it is measured (JIT warm-up, on both sides)")
	burstWarm := flag.Int("burstwarmup", 100_000, "timeouts of a burst run before the measured one in the same process, on both sides (the JIT's warm-up; a timer that has burst before); 0 for none")
	idleFor := flag.Duration("idle", 3*time.Second, "the idle row's window")
	jar := flag.String("jar", "/usr/share/java/netty-common.jar", "Netty's netty-common jar")
	jvmFlags := flag.String("jvm", "-Xmx4g -XX:+UseG1GC", "the JVM's flags")
	asJSON := flag.Bool("json", false, "print every round's results as JSON instead of the table")
	save := flag.String("save", "", "also write every round's results as JSON to this file")
	cpuProfile := flag.String("cpuprofile", "", "with -child: write the job's CPU profile to this file")
	mutexProfile := flag.String("mutexprofile", "", "with -child: write the job's mutex contention profile to this file")
	profileHz := flag.Int("profilehz", 100, "with -cpuprofile: samples a second (the runtime prints a warning for any rate but 100)")
	base := flag.String("base", "", "another build of this program (another hourglass) whose Go jobs run in turns with this one's, in a column of their own")
	flag.Parse()

	c := childConfig{n: *n, budget: *budget, warmup: *warmup, spread: *spread, timeout: 30 * time.Second, burstWarm: *burstWarm}
	if *child != "" {
		os.Exit(runChild(*child, c, *burstN, *cpuProfile, *profileHz, *mutexProfile))
	}
	if *quick {
		*rounds = 1
		c.n, *burstN, c.burstWarm = 20_000, 20_000, 2_000
		c.budget, c.warmup = 100*time.Millisecond, 100*time.Millisecond
		*idleFor = 300 * time.Millisecond
		c.timeout = 10 * time.Second
	}
	d, err := newDriver(c, *burstN, *idleFor, *jar, strings.Fields(*jvmFlags))
	if err == nil && *base != "" {
		d.base, err = filepath.Abs(*base)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "netty:", err)
		os.Exit(2)
	}
	defer os.RemoveAll(d.dir)
	res, err := d.run(*rounds)
	if err != nil {
		fmt.Fprintln(os.Stderr, "netty:", err)
		os.Exit(1)
	}
	if *save != "" {
		if b, err := json.Marshal(res); err != nil || os.WriteFile(*save, b, 0o644) != nil {
			fmt.Fprintln(os.Stderr, "netty: cannot save the results to", *save)
		}
	}
	if *asJSON {
		err = json.NewEncoder(os.Stdout).Encode(res)
	} else {
		err = writeTable(os.Stdout, d, res, *rounds)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "netty:", err)
		os.Exit(1)
	}
	if bad := incorrect(res); len(bad) > 0 {
		fmt.Fprintln(os.Stderr, "netty: incorrect:", strings.Join(bad, "; "))
		os.Exit(1)
	}
}

// runChild runs Go job name with c, printing its result as JSON, and
// writes the profiles asked for.
func runChild(name string, c childConfig, burstN int, cpuProfile string, profileHz int, mutexProfile string) int {
	job, ok := goJobs[name]
	if !ok {
		fmt.Fprintf(os.Stderr, "netty: no Go job %q\n", name)
		return 2
	}
	if strings.HasPrefix(name, "burst") {
		c.n = burstN
	}
	if cpuProfile != "" {
		f, err := os.Create(cpuProfile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "netty:", err)
			return 1
		}
		defer f.Close()
		if profileHz != 100 {
			// StartCPUProfile keeps a rate set before it (and warns).
			runtime.SetCPUProfileRate(profileHz)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(os.Stderr, "netty:", err)
			return 1
		}
		defer pprof.StopCPUProfile()
	}
	if mutexProfile != "" {
		runtime.SetMutexProfileFraction(1)
		defer writeProfile("mutex", mutexProfile)
	}
	r, err := job(c)
	if err != nil {
		fmt.Fprintf(os.Stderr, "netty: %s: %v\n", name, err)
		return 1
	}
	if r != nil {
		if err := json.NewEncoder(os.Stdout).Encode(r); err != nil {
			return 1
		}
	}
	return 0
}

// writeProfile writes the named runtime/pprof profile to file.
func writeProfile(name, file string) {
	f, err := os.Create(file)
	if err == nil {
		err = pprof.Lookup(name).WriteTo(f, 0)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "netty:", err)
	}
}

// driver starts the jobs' processes.
type driver struct {
	c      childConfig
	burstN int
	idle   time.Duration
	dir    string // the compiled Java side
	jar    string
	jvm    []string
	self   string // this program, for the Go side
	base   string // another build's, run in turns as side "base"; "" for none
	javaV  string // java -version's first line
}

func newDriver(c childConfig, burstN int, idle time.Duration, jar string, jvm []string) (*driver, error) {
	if _, err := os.Stat(jar); err != nil {
		return nil, fmt.Errorf("Netty's jar: %v (Debian's libnetty-java installs it)", err)
	}
	for _, tool := range []string{"java", "javac"} {
		if _, err := exec.LookPath(tool); err != nil {
			return nil, fmt.Errorf("%v (Debian's default-jdk-headless installs it)", err)
		}
	}
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "hourglass-netty-")
	if err != nil {
		return nil, err
	}
	src := filepath.Join(dir, "NettyBench.java")
	if err := os.WriteFile(src, javaSource, 0o644); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	if out, err := exec.Command("javac", "-cp", jar, "-d", dir, src).CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("javac: %v: %s", err, out)
	}
	v, _ := exec.Command("java", "-version").CombinedOutput()
	javaV, _, _ := strings.Cut(string(v), "\n")
	return &driver{c: c, burstN: burstN, idle: idle, dir: dir, jar: jar, jvm: jvm, self: self, javaV: javaV}, nil
}

// job is one measurement: a side's process.
type job struct {
	side string // "netty" or "go"
	name string // the side's job
}

// jobs are the measurements of a round, in order.
var jobs = []job{
	{"netty", "pair"}, {"go", "pair-afterfunc"}, {"go", "pair-arm"},
	{"netty", "heap"}, {"go", "heap-afterfunc"}, {"go", "heap-arm"},
	{"netty", "burst"}, {"go", "burst-inline"}, {"go", "burst-arm-inline"}, {"go", "burst-default"}, {"go", "burst-arm-default"},
	{"go", "burst-inline-locked"}, {"go", "burst-arm-inline-locked"},
	{"netty", "idle"}, {"go", "idle"},
}

func (j job) key() string { return j.side + ":" + j.name }

// results holds every round's metrics by job key.
type results map[string][]map[string]float64

// run checks that both sides draw the same delays, then runs the jobs,
// rounds times in turns.
func (d *driver) run(rounds int) (results, error) {
	js, err := d.start(job{"netty", "seed"})
	if err != nil {
		return nil, err
	}
	gs, err := d.start(job{"go", "seed"})
	if err != nil {
		return nil, err
	}
	if fmt.Sprint(js) != fmt.Sprint(gs) {
		return nil, fmt.Errorf("the two generators disagree: Java %v, Go %v", js, gs)
	}
	res := results{}
	for r := range rounds {
		order := slices.Clone(jobs)
		if r%2 == 1 {
			slices.Reverse(order)
		}
		if d.base != "" {
			// Each Go job of the base build right after this build's.
			var both []job
			for _, j := range order {
				both = append(both, j)
				if j.side == "go" {
					both = append(both, job{"base", j.name})
				}
			}
			order = both
		}
		for _, j := range order {
			fmt.Fprintf(os.Stderr, "netty: round %d/%d: %s\n", r+1, rounds, j.key())
			m, err := d.start(j)
			if err != nil {
				return nil, fmt.Errorf("%s: %v", j.key(), err)
			}
			res[j.key()] = append(res[j.key()], m)
		}
	}
	return res, nil
}

// command returns the command that runs j.
func (d *driver) command(ctx context.Context, j job) *exec.Cmd {
	n := d.c.n
	if strings.HasPrefix(j.name, "burst") {
		n = d.burstN
	}
	if j.side == "netty" {
		args := append(slices.Clone(d.jvm), "-cp", d.jar+string(os.PathListSeparator)+d.dir, "NettyBench", j.name,
			strconv.Itoa(n), strconv.FormatInt(d.c.budget.Milliseconds(), 10),
			strconv.FormatInt(d.c.warmup.Milliseconds(), 10), strconv.FormatInt(d.c.spread.Milliseconds(), 10),
			strconv.Itoa(d.c.burstWarm))
		return exec.CommandContext(ctx, "java", args...)
	}
	self := d.self
	if j.side == "base" {
		self = d.base
	}
	return exec.CommandContext(ctx, self, "-child", j.name, "-n", strconv.Itoa(n), "-burst", strconv.Itoa(d.burstN),
		"-budget", d.c.budget.String(), "-warmup", d.c.warmup.String(), "-spread", d.c.spread.String(),
		"-burstwarmup", strconv.Itoa(d.c.burstWarm))
}

// start runs j and returns its metrics: the line of JSON it prints, or
// for the idle job what the driver measures of it from outside.
func (d *driver) start(j job) (map[string]float64, error) {
	// A job's deadline: its own waits are far shorter.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := d.command(ctx, j)
	cmd.Stderr = os.Stderr
	if j.name == "idle" {
		return d.idleJob(cmd)
	}
	out, err := cmd.Output()
	if err != nil {
		return nil, err
	}
	return lastJSON(out)
}

// lastJSON decodes the last line of out that holds a JSON object.
func lastJSON(out []byte) (map[string]float64, error) {
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.HasPrefix(lines[i], "{") {
			var m map[string]float64
			if err := json.Unmarshal([]byte(lines[i]), &m); err != nil {
				return nil, err
			}
			return m, nil
		}
	}
	return nil, fmt.Errorf("no result in %q", out)
}

// idleJob starts cmd, waits for its "ready", lets it settle, then reads
// its CPU time and context switches over the idle window, and ends it by
// closing its standard input.
func (d *driver) idleJob(cmd *exec.Cmd) (map[string]float64, error) {
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	outPipe, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	ready := make(chan error, 1)
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		line, err := bufio.NewReader(outPipe).ReadString('\n')
		if err == nil && strings.TrimSpace(line) != "ready" {
			err = fmt.Errorf("not ready: %q", line)
		}
		ready <- err
		io.Copy(io.Discard, outPipe)
	}()
	// end closes the child's standard input, which ends it, and reaps it;
	// a child that does not end within a minute is killed.
	end := func() error {
		in.Close()
		select {
		case <-drained:
		case <-time.After(time.Minute):
			cmd.Process.Kill()
			<-drained
		}
		return cmd.Wait()
	}
	select {
	case err := <-ready:
		if err != nil {
			end()
			return nil, err
		}
	case <-time.After(time.Minute):
		cmd.Process.Kill()
		end()
		return nil, errors.New("no ready line within a minute")
	}
	time.Sleep(min(d.idle, time.Second)) // startup's threads (JIT, GC) go quiet
	pid := strconv.Itoa(cmd.Process.Pid)
	c0, s0, err := procCounters(pid)
	if err != nil {
		end()
		return nil, err
	}
	w0 := time.Now()
	time.Sleep(d.idle)
	c1, s1, err := procCounters(pid)
	wall := time.Since(w0)
	if err != nil {
		end()
		return nil, err
	}
	if err := end(); err != nil {
		return nil, err
	}
	return map[string]float64{
		"cpu_ms":  float64((c1 - c0).Microseconds()) / 1e3,
		"wakeups": float64(s1 - s0),
		"wall_s":  wall.Seconds(),
	}, nil
}

// procCounters reads process pid's CPU time and context switches.
func procCounters(pid string) (time.Duration, int64, error) {
	c, err := procCPU(pid)
	if err != nil {
		return 0, 0, err
	}
	s, err := procSwitches(pid)
	return c, s, err
}

// incorrect lists what went wrong in any burst: timeouts fired early,
// lost, or fired twice.
func incorrect(res results) []string {
	var bad []string
	keys := slices.Sorted(func(yield func(string) bool) {
		for k := range res {
			if !yield(k) {
				return
			}
		}
	})
	for _, k := range keys {
		for r, m := range res[k] {
			for _, what := range []string{"early", "lost", "double"} {
				if v := m[what]; v != 0 {
					bad = append(bad, fmt.Sprintf("%s round %d: %s %v", k, r+1, what, v))
				}
			}
		}
	}
	return bad
}
