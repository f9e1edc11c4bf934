package hourglass_test

import (
	"testing"
	"time"

	"github.com/hourglass-go/hourglass"
)

// TestDriver_BatchKeptThroughBurst checks that a driver's batch larger
// than the bound it keeps between bursts is kept from one pass to the
// next while the passes fill it, as through a burst, rather than grown
// from nothing by each pass; and that it goes once nothing is due.
func TestDriver_BatchKeptThroughBurst(t *testing.T) {
	const n = 40_000 // beyond batchKeepMax (32,768)
	tm := hourglass.New(hourglass.WithShards(1), hourglass.WithExecutor(hourglass.Inline))
	defer tm.Stop()
	// hold schedules a callback that holds the driver in its hand-over
	// until release is closed, and waits for it to run.
	hold := func() (release chan struct{}) {
		running, release := make(chan struct{}), make(chan struct{})
		if _, err := tm.Arm(0, func() { close(running); <-release }); err != nil {
			t.Fatal(err)
		}
		<-running
		return release
	}
	// due schedules n timeouts due at once while the driver is held, so
	// that its next pass finds them all due; then the callback that
	// holds it next.
	due := func() (running, release chan struct{}) {
		for range n {
			if _, err := tm.Arm(0, noop); err != nil {
				t.Fatal(err)
			}
		}
		running, release = make(chan struct{}), make(chan struct{})
		if _, err := tm.Arm(0, func() { close(running); <-release }); err != nil {
			t.Fatal(err)
		}
		return running, release
	}
	type seen struct {
		capacity int
		array    uintptr
	}
	passed := make(chan seen, 1)
	report := func(c int, a uintptr) { passed <- seen{c, a} }

	release := hold()
	running, release2 := due()
	hourglass.BatchAfterPass(tm, 0, report)
	close(release)
	first := <-passed
	<-running
	if first.capacity <= n {
		t.Fatalf("the batch of a pass with %d due holds %d", n+1, first.capacity)
	}
	running, release3 := due()
	hourglass.BatchAfterPass(tm, 0, report)
	close(release2)
	second := <-passed
	<-running
	if second.array != first.array {
		t.Errorf("the pass after one that filled its batch of %d made another (%d): a burst's passes each grow theirs from nothing", first.capacity, second.capacity)
	}
	close(release3)
	deadline := time.Now().Add(10 * time.Second)
	for tm.Pending() > 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	for time.Now().Before(deadline) {
		if c, _ := hourglass.BatchNow(tm, 0); c == 0 {
			return
		}
		time.Sleep(time.Millisecond)
	}
	c, _ := hourglass.BatchNow(tm, 0)
	t.Errorf("the driver keeps a batch of %d with nothing due or pending", c)
}
