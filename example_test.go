package hourglass_test

import (
	"fmt"
	"time"

	"github.com/hourglass-go/hourglass"
)

func ExampleTimer_AfterFunc() {
	timer := hourglass.New()
	defer timer.Stop()

	done := make(chan struct{})
	_, err := timer.AfterFunc(10*time.Millisecond, func() {
		fmt.Println("request timed out")
		close(done)
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	<-done
	// Output: request timed out
}

func ExampleTimeout_Cancel() {
	timer := hourglass.New()
	defer timer.Stop()

	to, _ := timer.AfterFunc(time.Hour, func() { fmt.Println("never runs") })
	fmt.Println("cancelled:", to.Cancel())
	fmt.Println("again:", to.Cancel())
	// Output:
	// cancelled: true
	// again: false
}

func ExampleTimeout_Reset() {
	timer := hourglass.New()
	defer timer.Stop()

	// An idle timeout pushed back on every sign of life.
	done := make(chan struct{})
	idle, _ := timer.AfterFunc(time.Hour, func() {
		fmt.Println("connection idle")
		close(done)
	})
	fmt.Println("was pending:", idle.Reset(5*time.Millisecond))
	<-done
	// Output:
	// was pending: true
	// connection idle
}

func ExampleTimer_ScheduleAtFixedRate() {
	timer := hourglass.New()
	defer timer.Stop()

	beats := make(chan int)
	n := 0
	hb, _ := timer.ScheduleAtFixedRate(0, 5*time.Millisecond, func() {
		n++ // runs never overlap, so no lock is needed
		beats <- n
	})
	for range 3 {
		fmt.Println("heartbeat", <-beats)
	}
	hb.Cancel()
	// Output:
	// heartbeat 1
	// heartbeat 2
	// heartbeat 3
}

func ExampleTimer_Schedule() {
	timer := hourglass.New()
	defer timer.Stop()

	nightly, err := hourglass.Cron("30 2 * * *") // 02:30 every day
	if err != nil {
		fmt.Println(err)
		return
	}
	job, _ := timer.Schedule(nightly, func() { fmt.Println("compacting") })
	at := job.Deadline()
	fmt.Println(at.Hour(), at.Minute())
	job.Cancel()

	_, err = hourglass.Cron("99 * * * *")
	fmt.Println(err != nil)
	// Output:
	// 2 30
	// true
}

func ExampleTimer_Stop() {
	timer := hourglass.New(hourglass.WithHeap())
	for i := range 3 {
		timer.AfterFunc(time.Duration(i+1)*time.Hour, func() {})
	}
	left := timer.Stop()
	fmt.Println(len(left), "never ran; cancelled:", left[0].Cancelled())
	_, err := timer.AfterFunc(time.Second, func() {})
	fmt.Println(err)
	// Output:
	// 3 never ran; cancelled: true
	// hourglass: timer stopped
}

// Stop returns without waiting; Done says when the drivers have exited,
// and with them every callback they ran themselves (Inline).
func ExampleTimer_Done() {
	timer := hourglass.New(hourglass.WithExecutor(hourglass.Inline))
	started := make(chan struct{})
	timer.AfterFunc(0, func() {
		close(started)
		time.Sleep(10 * time.Millisecond)
		fmt.Println("callback returned")
	})
	<-started
	timer.Stop() // returns at once, the callback still running
	<-timer.Done()
	fmt.Println("drivers exited")
	// Output:
	// callback returned
	// drivers exited
}

func ExampleNewPool() {
	pool := hourglass.NewPool(4, 1024)
	defer pool.Close()
	timer := hourglass.New(hourglass.WithExecutor(pool), hourglass.WithMaxPending(100_000))
	defer timer.Stop()

	done := make(chan struct{})
	timer.AfterFunc(time.Millisecond, func() {
		fmt.Println("ran on a pool worker")
		close(done)
	})
	<-done
	// Output: ran on a pool worker
}

// A server that cannot group its calls arms a timeout per request with
// Arm, which allocates nothing, and cancels it when the reply comes.
func ExampleTimer_Arm() {
	timer := hourglass.New()
	defer timer.Stop()

	done := make(chan struct{})
	slow, err := timer.Arm(10*time.Millisecond, func() {
		fmt.Println("request 1 timed out")
		close(done)
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fast, err := timer.Arm(10*time.Millisecond, func() { fmt.Println("request 2 timed out") })
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("reply 2 in time:", timer.Cancel(fast))
	<-done
	fmt.Println("reply 1 in time:", timer.Cancel(slow))
	// Output:
	// reply 2 in time: true
	// request 1 timed out
	// reply 1 in time: false
}
