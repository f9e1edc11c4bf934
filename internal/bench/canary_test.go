package bench

import (
	"flag"
	"io"
	"runtime"
	"slices"
	"syscall"
	"testing"
	"time"
)

// TestCanary_SeesStall stops a stall canary's process for 100 ms
// (SIGSTOP, then SIGCONT) and checks that it reports a stall of about
// that length, and nothing much longer: the canary tells a span in which
// a process was not run.
func TestCanary_SeesStall(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("stops the canary with SIGSTOP")
	}
	c, err := startCanary()
	if err != nil || c == nil {
		t.Fatalf("startCanary: %v, %v", c, err)
	}
	time.Sleep(200 * time.Millisecond) // started and ticking
	before := time.Now()
	if err := c.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	if err := c.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	stalls := c.stop()
	found := false
	for _, s := range stalls {
		t.Logf("stall at %v for %v", s.start.Sub(before), s.d)
		if s.d >= 90*time.Millisecond && s.start.Before(before.Add(100*time.Millisecond)) && s.start.Add(s.d).After(before.Add(100*time.Millisecond)) {
			found = true
		}
	}
	if !found {
		t.Errorf("no stall of at least 90 ms over the 100 ms the canary was stopped: %v", stalls)
	}
}

// TestOverlaps checks the overlap of a task's wait with stalls.
func TestOverlaps(t *testing.T) {
	at := time.Unix(100, 0)
	stalls := []stall{{at, 50 * time.Millisecond}}
	for _, c := range []struct {
		from time.Duration // from at
		d    time.Duration
		want bool
	}{
		{-10 * time.Millisecond, 5 * time.Millisecond, false},
		{-10 * time.Millisecond, 20 * time.Millisecond, true},
		{20 * time.Millisecond, time.Millisecond, true},
		{49 * time.Millisecond, 10 * time.Millisecond, true},
		{50 * time.Millisecond, 10 * time.Millisecond, false},
	} {
		if got := overlaps(stalls, at.Add(c.from), c.d); got != c.want {
			t.Errorf("overlaps(%v for %v) = %v, want %v", c.from, c.d, got, c.want)
		}
	}
}

// TestKeysFlags checks that --keys-engine and --keys-memory select the
// keys scenario's rows (--keys-engine cluster runs no memory rows), and that --keys-big-work takes a duration.
func TestKeysFlags(t *testing.T) {
	saved := Keys
	t.Cleanup(func() { Keys = saved })
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"--keys-engine", "embedded", "--keys-memory=false"}, []string{
			"hourglass reserve→ack no keys", "hourglass reserve→ack 10k keys", "hourglass small key, empty queue", "hourglass small key, flooded",
		}},
		{[]string{"--keys-engine", "cluster"}, []string{
			"1 node reserve→ack no keys", "1 node reserve→ack 10k keys", "1 node small key, empty queue", "1 node small key, flooded",
		}}, // the memory rows are the embedded engine's
		{[]string{"--keys-engine", "both", "--keys-memory=false"}, []string{
			"hourglass reserve→ack no keys", "hourglass reserve→ack 10k keys", "hourglass small key, empty queue", "hourglass small key, flooded",
			"1 node reserve→ack no keys", "1 node reserve→ack 10k keys", "1 node small key, empty queue", "1 node small key, flooded",
		}},
	} {
		Keys = saved
		fs := flag.NewFlagSet("bench", flag.ContinueOnError)
		KeysFlags(fs)
		if err := fs.Parse(tc.args); err != nil {
			t.Fatal(err)
		}
		if rows := plannedRows(t, "keys"); !slices.Equal(rows, tc.want) {
			t.Errorf("%q: rows %q, want %q", tc.args, rows, tc.want)
		}
	}
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	KeysFlags(fs)
	if err := fs.Parse([]string{"--keys-engine", "sqlite"}); err == nil {
		t.Error("--keys-engine sqlite: no error")
	}
	Keys = saved
	fs = flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	KeysFlags(fs)
	if err := fs.Parse([]string{"--keys-big-work", "5ms"}); err != nil || Keys.BigWork != 5*time.Millisecond {
		t.Errorf("--keys-big-work 5ms: %v, BigWork %v", err, Keys.BigWork)
	}
	if err := fs.Parse([]string{"--keys-big-work", "-1s"}); err == nil {
		t.Error("--keys-big-work -1s: no error")
	}
}
