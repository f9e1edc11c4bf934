package e2e_test

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/internal/hiccup"
)

// machine watches, while the tests run, for stalls of the machine and
// steps of its wall clock (lateAllowed).
var machine *hiccup.Watch

// lateAllowed is bound, a bound on how late something due at from may
// come, plus what the machine itself lost from then to to: the stalls and
// the forward steps of the wall clock hiccup saw (logged when any). A
// server slow on its own still fails the bound.
func lateAllowed(t *testing.T, bound time.Duration, from, to time.Time) time.Duration {
	t.Helper()
	lost, events := machine.Over(from, to)
	if lost > 0 {
		t.Logf("the machine lost %v between %s and %s: %v; allowing %v", lost, from.Format("15:04:05.000"), to.Format("15:04:05.000"), events, bound+lost)
	}
	return bound + lost
}

// hourglassBin is the path of the binary TestMain built.
var hourglassBin string

// defaultParallel is how many tests run at once unless -parallel says
// otherwise: they spend their time waiting on server processes, timers and
// fsyncs rather than on the CPU, so more than GOMAXPROCS (the testing
// package's default, 2 on the machine these were written on) fit; more
// than 4 would let -race servers starve each other's timers.
const defaultParallel = 4

func TestMain(m *testing.M) {
	flag.Parse()
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	if !given {
		flag.Set("test.parallel", fmt.Sprint(max(defaultParallel, runtime.GOMAXPROCS(0))))
	}
	os.Exit(runTests(m))
}

// runTests builds the binary, runs the tests, and fails the run if a test
// left a goroutine of the harness or of net/http behind.
func runTests(m *testing.M) int {
	dir, err := os.MkdirTemp("", "hourglass-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	start := time.Now()
	if hourglassBin, err = buildHourglass(dir); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	if testing.Verbose() {
		fmt.Printf("e2e: built %s (race %v) in %v\n", hourglassBin, raceEnabled, time.Since(start).Round(time.Millisecond))
	}
	machine = hiccup.Start()
	code := m.Run()
	machine.Stop()
	closeSharedPostgres()
	if leaks := leftBehind(5 * time.Second); leaks != "" {
		fmt.Fprintf(os.Stderr, "e2e: goroutines left behind by the tests:\n%s\n", leaks)
		if code == 0 {
			code = 1
		}
	}
	return code
}

// buildHourglass builds ./cmd/hourglass of the module this package is in
// into dir, with -race when the tests run with it.
func buildHourglass(dir string) (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", errors.New("go env GOMOD: not in a module")
	}
	bin := filepath.Join(dir, "hourglass")
	args := []string{"build", "-o", bin}
	if raceEnabled {
		args = append(args, "-race")
	}
	cmd := exec.Command("go", append(args, "./cmd/hourglass")...)
	cmd.Dir = filepath.Dir(gomod)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go %s: %v\n%s", strings.Join(cmd.Args[1:], " "), err, out)
	}
	return bin, nil
}

// leftBehind waits up to wait for the goroutines the tests started (the
// harness's, net/http's, os/exec's) to end, and returns the stacks of
// those still running.
func leftBehind(wait time.Duration) string {
	deadline := time.Now().Add(wait)
	for {
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		var leaks []string
		for g := range strings.SplitSeq(string(buf), "\n\n") {
			if strings.Contains(g, "e2e_test.leftBehind") || strings.Contains(g, "testing.(*M).Run") {
				continue
			}
			if strings.Contains(g, "hourglass/e2e") || strings.Contains(g, "net/http.") || strings.Contains(g, "os/exec.") {
				leaks = append(leaks, g)
			}
		}
		if len(leaks) == 0 {
			return ""
		}
		if time.Now().After(deadline) {
			return strings.Join(leaks, "\n\n")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// environ returns the test's environment without HOURGLASS_TOKEN, so that
// a token in the environment of whoever runs the tests changes nothing.
func environ() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "HOURGLASS_TOKEN=") {
			env = append(env, kv)
		}
	}
	return env
}

// runCLI runs the binary with args (a client subcommand) and env, and
// returns its standard output, standard error and exit code.
func runCLI(t testing.TB, env []string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	return runBounded(t, 30*time.Second, env, args...)
}

// runBounded runs the binary with args and env, killing it after timeout,
// and returns its standard output, standard error and exit code (-1 if it
// was killed).
func runBounded(t testing.TB, timeout time.Duration, env []string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, hourglassBin, args...)
	cmd.Env = append(environ(), env...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		code = ee.ExitCode()
	default:
		t.Fatalf("hourglass %s: %v", strings.Join(args, " "), err)
	}
	if strings.Contains(e.String(), "WARNING: DATA RACE") {
		t.Errorf("hourglass %s reported a data race:\n%s", strings.Join(args, " "), e.String())
	}
	return o.String(), e.String(), code
}
