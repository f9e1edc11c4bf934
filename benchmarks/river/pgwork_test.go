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
