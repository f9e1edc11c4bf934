package riverbench

import (
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// TestProcessCPU checks processCPU against the kernel's own account:
// this process's CPU, then a child's that has exited (its parent's
// cutime and cstime once reaped).
func TestProcessCPU(t *testing.T) {
	rusage := func(who int) time.Duration {
		var ru syscall.Rusage
		if err := syscall.Getrusage(who, &ru); err != nil {
			t.Fatal(err)
		}
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	// tick is /proc's resolution, and each of four fields may be
	// truncated by one.
	const tick = 4 * 10 * time.Millisecond
	before := rusage(syscall.RUSAGE_SELF)
	got, err := processCPU(os.Getpid())
	if err != nil {
		t.Skipf("no /proc here: %v", err)
	}
	after := rusage(syscall.RUSAGE_SELF) + rusage(syscall.RUSAGE_CHILDREN)
	if got < before-tick || got > after+tick {
		t.Fatalf("processCPU = %v, kernel says between %v and %v", got, before, after)
	}

	// A child that burns some CPU, bounded by a count, not by time.
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Fatal(err)
	}
	if err := exec.Command(sh, "-c", "i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done").Run(); err != nil {
		t.Fatal(err)
	}
	child := rusage(syscall.RUSAGE_CHILDREN)
	if child < 100*time.Millisecond {
		t.Skipf("the child used %v of CPU, too little to tell", child)
	}
	got, err = processCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if got < before+child-tick {
		t.Fatalf("processCPU = %v after a child of %v: its exited child is not counted", got, child)
	}
}

// TestCPUByProcessSince checks the breakdown's arithmetic: a live
// process counts what it spent between the readings, one that exited
// counts what it spent after the first (its whole time having moved into
// the postmaster's cutime), a new one all of its time.
func TestCPUByProcessSince(t *testing.T) {
	ms := time.Millisecond
	a := cpuByProcess{ok: true, own: 100 * ms,
		pids:  map[int]time.Duration{1: 50 * ms, 2: 30 * ms},
		types: map[int]string{1: "client backend", 2: "autovacuum worker"}}
	// Process 2 exited having spent 45 ms in all (15 after a), so the
	// postmaster's own with its exited children's went from 100 to 147
	// (2 of its own); process 3 started and spent 20; 1 spent 10 more.
	r := cpuByProcess{ok: true, own: 147 * ms,
		pids:  map[int]time.Duration{1: 60 * ms, 3: 20 * ms},
		types: map[int]string{1: "client backend", 3: "client backend"}}
	got := r.since(a)
	want := map[string]time.Duration{"client backend": 30 * ms, exitedType: 17 * ms}
	if len(got) != len(want) {
		t.Fatalf("since = %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("since[%q] = %v, want %v (all: %v)", k, got[k], v, got)
		}
	}
	if (cpuByProcess{}).since(a) != nil {
		t.Error("a reading without /proc gives a breakdown")
	}
}
