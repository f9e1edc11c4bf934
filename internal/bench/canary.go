package bench

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"time"
)

// A stall canary tells the machine's stalls from a server's. It is a
// process of its own (this executable run again with canaryEnv set, so
// that hourglass-bench and its test binary both have one) that does
// nothing but sleep canaryTick at a time, and reports each sleep that
// lasted canaryStall or more: a span in which the machine did not run a
// process that wanted a core for a few microseconds. Where a late task's
// wait overlaps such a span, the lateness is at least partly the
// machine's (another process held both cores, or the host did not run
// the virtual machine), whatever the server did. It costs about a
// thousand wake-ups a second, each of a few microseconds.
//
// The child writes one line a stall, "START_UNIX_NS DURATION_NS", and
// stops when its standard input closes (the parent is done or gone) or
// after canaryMaxLife, whichever comes first.
const (
	canaryEnv     = "HOURGLASS_BENCH_CANARY"
	canaryTick    = time.Millisecond
	canaryStall   = 20 * time.Millisecond
	canaryMaxLife = 10 * time.Minute
)

func init() {
	if os.Getenv(canaryEnv) == "" {
		return
	}
	runCanary(os.Stdin, os.Stdout)
	os.Exit(0)
}

// runCanary is the child's loop: it writes to out each sleep of
// canaryTick that took canaryStall or more, until in reaches its end or
// canaryMaxLife has passed.
func runCanary(in io.Reader, out io.Writer) {
	runtime.GOMAXPROCS(1)
	done := make(chan struct{})
	go func() {
		io.Copy(io.Discard, in)
		close(done)
	}()
	w := bufio.NewWriter(out)
	end := time.Now().Add(canaryMaxLife)
	t := time.NewTicker(canaryTick)
	defer t.Stop()
	last := time.Now()
	for last.Before(end) {
		select {
		case <-done:
			w.Flush()
			return
		case <-t.C:
			now := time.Now() // not the tick's own time, which is when it was due
			if d := now.Sub(last); d >= canaryStall {
				fmt.Fprintf(w, "%d %d\n", last.UnixNano(), int64(d))
				w.Flush()
			}
			last = now
		}
	}
	w.Flush()
}

// stall is a span in which the canary was not run: from its start for
// its duration.
type stall struct {
	start time.Time
	d     time.Duration
}

// canary is a running stall canary.
type canary struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stalls chan []stall // the stalls read, once the child has ended
}

// startCanary starts a stall canary; nil, nil when this executable
// cannot be run again (a figure then goes without its stalls).
func startCanary() (*canary, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, nil
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), canaryEnv+"=1")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("bench: starting the stall canary: %w", err)
	}
	c := &canary{cmd: cmd, stdin: stdin, stalls: make(chan []stall, 1)}
	go func() {
		var out []stall
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			var start, d int64
			if _, err := fmt.Sscan(sc.Text(), &start, &d); err == nil {
				out = append(out, stall{time.Unix(0, start), time.Duration(d)})
			}
		}
		c.stalls <- out
	}()
	return c, nil
}

// stop ends the canary and returns the stalls it saw. A nil canary saw
// none.
func (c *canary) stop() []stall {
	if c == nil {
		return nil
	}
	c.stdin.Close()
	var out []stall
	select {
	case out = <-c.stalls:
	case <-time.After(10 * time.Second):
		c.cmd.Process.Kill()
		out = <-c.stalls
	}
	c.cmd.Wait()
	return out
}

// overlaps reports whether any of stalls overlaps the span from start
// for d.
func overlaps(stalls []stall, start time.Time, d time.Duration) bool {
	end := start.Add(d)
	return slices.ContainsFunc(stalls, func(s stall) bool {
		return s.start.Before(end) && s.start.Add(s.d).After(start)
	})
}
