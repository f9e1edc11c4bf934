package beanstalk_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"runtime/trace"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hourglass-go/hourglass/beanstalk"
	"github.com/hourglass-go/hourglass/broker"
	"github.com/hourglass-go/hourglass/internal/loadgen"
	"github.com/hourglass-go/hourglass/service"
	"github.com/hourglass-go/hourglass/store"
	"github.com/hourglass-go/hourglass/store/memstore"
	"github.com/hourglass-go/hourglass/store/pebblestore"
)

// TestProfile profiles the server under the beanstalk scenario's loads
// (package loadgen: puts ×64, and reserve→delete ×64 on a tube filled
// beforehand) with the server in this process, and compares it in turns
// with other servers under the same loads. It runs only when
// HOURGLASS_BEANSTALK_PROFILE names a directory:
//
//	HOURGLASS_BEANSTALK_PROFILE=/tmp/prof go test -run TestProfile -v ./beanstalk
//	go tool pprof -top /tmp/prof/cpu-pebble-roundtrips.pprof
//
// Settings, by environment variable:
//
//   - HOURGLASS_BEANSTALK_PROFILE_CASES: puts, roundtrips (comma-separated;
//     default both);
//   - HOURGLASS_BEANSTALK_PROFILE_SERVERS: pebble (a broker over Pebble
//     in a temporary directory, as `hourglass serve --data`), mem (over
//     memstore: no disk, the protocol and broker alone), beanstalkd (the
//     real one, with its binlog, in its own process), tcp:HOST:PORT (a
//     server already listening there, `hourglass serve --beanstalk` under
//     perf say; give it a fresh store); default pebble;
//   - HOURGLASS_BEANSTALK_PROFILE_ROUNDS: rounds of every case and server,
//     in turns (default 1); the log ends with each one's median;
//   - HOURGLASS_BEANSTALK_PROFILE_CACHE: the Pebble block cache in MiB
//     (default pebblestore's).
//
// For each in-process server and case it writes, once, to the directory:
// cpu-SERVER-CASE.pprof, mutex-SERVER-CASE.pprof, block-SERVER-CASE.pprof
// (which hold the earlier cases too: subtract mutex-SERVER-CASE.base.pprof
// or block-SERVER-CASE.base.pprof with go tool pprof -base) and an
// execution trace of the first second, trace-SERVER-CASE.out (go tool
// trace -pprof=sched: how long goroutines waited to run). It
// logs the rate and, for the brokers, the group commits over the
// measured part: tasks per commit and mean commit time. The client
// shares the process with an in-process server: read the CPU profile
// focused on the server (-focus 'beanstalk\.\(\*conn\)|broker\.|pebble').
func TestProfile(t *testing.T) {
	dir := os.Getenv("HOURGLASS_BEANSTALK_PROFILE")
	if dir == "" {
		t.Skip("set HOURGLASS_BEANSTALK_PROFILE to a directory to profile the server")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	cases := listEnv("HOURGLASS_BEANSTALK_PROFILE_CASES", "puts,roundtrips")
	servers := listEnv("HOURGLASS_BEANSTALK_PROFILE_SERVERS", "pebble")
	rounds := 1
	if r := os.Getenv("HOURGLASS_BEANSTALK_PROFILE_ROUNDS"); r != "" {
		var err error
		if rounds, err = strconv.Atoi(r); err != nil || rounds < 1 {
			t.Fatalf("HOURGLASS_BEANSTALK_PROFILE_ROUNDS=%q: want a positive count", r)
		}
	}
	o := loadgen.Options{Conns: 64, BodySize: 200, Duration: 5 * time.Second, Prefill: 200_000}
	rates := make(map[string][]float64)
	for round := range rounds {
		for _, c := range cases {
			for _, s := range servers {
				name := s + "-" + c
				t.Run(name, func(t *testing.T) {
					rate := profileOne(t, dir, s, c, o, round == 0)
					rates[name] = append(rates[name], rate)
				})
			}
		}
	}
	for _, c := range cases {
		for _, s := range servers {
			if r := rates[s+"-"+c]; len(r) > 0 {
				slices.Sort(r)
				t.Logf("%s %s: median %.0f/s of %d (%.0f)", s, c, r[len(r)/2], len(r), r)
			}
		}
	}
}

// listEnv returns the comma-separated list in the environment variable
// key, or def.
func listEnv(key, def string) []string {
	v := os.Getenv(key)
	if v == "" {
		v = def
	}
	return strings.Split(v, ",")
}

// profileOne measures case c of server s once, profiling an in-process
// server when profile is set, and returns the rate.
func profileOne(t *testing.T, dir, s, c string, o loadgen.Options, profile bool) float64 {
	ctx := context.Background()
	reg := prometheus.NewRegistry()
	var addr string
	switch s {
	case "pebble":
		var po pebblestore.Options
		if v := os.Getenv("HOURGLASS_BEANSTALK_PROFILE_CACHE"); v != "" {
			mib, err := strconv.Atoi(v)
			if err != nil || mib < 1 {
				t.Fatalf("HOURGLASS_BEANSTALK_PROFILE_CACHE=%q: want MiB", v)
			}
			po.CacheSize = int64(mib) << 20
		}
		st, err := pebblestore.Open(t.TempDir(), po)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		addr = profileServer(t, st, reg)
	case "mem":
		addr = profileServer(t, memstore.New(), reg)
	case "beanstalkd":
		b, err := loadgen.StartBeanstalkd(t.TempDir())
		if err != nil {
			t.Skip(err)
		}
		t.Cleanup(func() { b.Stop() })
		addr, profile = b.Addr, false
	default:
		a, ok := strings.CutPrefix(s, "tcp:")
		if !ok {
			t.Fatalf("unknown server %q", s)
		}
		addr, profile = a, false
	}
	var run func() (float64, error)
	switch c {
	case "puts":
		run = func() (float64, error) { return loadgen.Puts(ctx, addr, o) }
	case "roundtrips":
		if err := loadgen.Fill(ctx, addr, "profile", o.Prefill, o.BodySize, 0); err != nil {
			t.Fatal(err)
		}
		run = func() (float64, error) { return loadgen.ReserveDelete(ctx, addr, "profile", o) }
	default:
		t.Fatalf("unknown case %q", c)
	}
	runtime.GC()
	before := commits(t, reg)
	stop := func() {}
	if profile {
		stop = startProfiles(t, dir, s+"-"+c)
	}
	rate, err := run()
	stop()
	if err != nil {
		t.Fatal(err)
	}
	after := commits(t, reg)
	if n := after.n - before.n; n > 0 {
		tasks, secs := after.tasks-before.tasks, after.secs-before.secs
		t.Logf("%s %s: %.0f/s; %d group commits, %.1f tasks per commit, mean commit %.2f ms",
			s, c, rate, n, tasks/float64(n), 1000*secs/float64(n))
	} else {
		t.Logf("%s %s: %.0f/s", s, c, rate)
	}
	return rate
}

// profileServer serves a broker over st, registered with reg, on a
// loopback port until the test ends.
func profileServer(t *testing.T, st store.Store, reg prometheus.Registerer) string {
	b, err := broker.Open(st, broker.Config{Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Close()
		t.Fatal(err)
	}
	srv := beanstalk.NewServer(service.New(b), beanstalk.Options{})
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		<-served
		if err := b.Close(); err != nil {
			t.Errorf("broker Close: %v", err)
		}
	})
	return l.Addr().String()
}

// commitStats are the totals of the broker's group-commit histograms.
type commitStats struct {
	n           uint64
	tasks, secs float64
}

func commits(t *testing.T, reg *prometheus.Registry) commitStats {
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var c commitStats
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			h := m.GetHistogram()
			switch mf.GetName() {
			case "hourglass_store_tasks_per_commit":
				c.n, c.tasks = h.GetSampleCount(), h.GetSampleSum()
			case "hourglass_store_commit_seconds":
				c.secs = h.GetSampleSum()
			}
		}
	}
	return c
}

// startProfiles starts the CPU profile and an execution trace (stopped
// after a second) and turns on mutex and block profiling; the returned
// stop writes the profiles to dir, named after name.
func startProfiles(t *testing.T, dir, name string) (stop func()) {
	create := func(kind, ext string) *os.File {
		f, err := os.Create(filepath.Join(dir, fmt.Sprintf("%s-%s.%s", kind, name, ext)))
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	cpu := create("cpu", "pprof")
	if err := pprof.StartCPUProfile(cpu); err != nil {
		t.Fatal(err)
	}
	tf := create("trace", "out")
	if err := trace.Start(tf); err != nil {
		t.Fatal(err)
	}
	traced := time.AfterFunc(time.Second, trace.Stop)
	// The block and mutex profiles accumulate over the program's life:
	// what they hold before is written too, to subtract (pprof -base).
	for _, p := range []string{"mutex", "block"} {
		f := create(p, "base.pprof")
		if err := pprof.Lookup(p).WriteTo(f, 0); err != nil {
			t.Error(err)
		}
		f.Close()
	}
	runtime.SetMutexProfileFraction(5)
	runtime.SetBlockProfileRate(int(10 * time.Microsecond))
	return func() {
		pprof.StopCPUProfile()
		cpu.Close()
		if traced.Stop() {
			trace.Stop()
		}
		tf.Close()
		for _, p := range []string{"mutex", "block"} {
			f := create(p, "pprof")
			if err := pprof.Lookup(p).WriteTo(f, 0); err != nil {
				t.Error(err)
			}
			f.Close()
		}
		runtime.SetMutexProfileFraction(0)
		runtime.SetBlockProfileRate(0)
	}
}
