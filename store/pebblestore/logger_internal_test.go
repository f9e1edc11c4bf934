package pebblestore

import (
	"testing"
	"testing/synctest"
	"time"
)

// TestLimiter: a burst of logBurst lines, then one a logEvery, each line
// let through after others were held back counting them.
func TestLimiter(t *testing.T) {
	t.Parallel()
	l := newLimiter()
	t0 := time.Unix(1000, 0)
	for i := range logBurst {
		if ok, held := l.allow(t0); !ok || held != 0 {
			t.Fatalf("line %d of the burst: %v, %d held; want it through", i, ok, held)
		}
	}
	for i := range 100 {
		if ok, _ := l.allow(t0.Add(time.Duration(i) * logEvery / 200)); ok {
			t.Fatalf("line %d after the burst, within half a logEvery, let through", i)
		}
	}
	if ok, held := l.allow(t0.Add(logEvery)); !ok || held != 100 {
		t.Fatalf("a logEvery after the burst: %v, %d held; want it through, reporting 100 held", ok, held)
	}
	if ok, _ := l.allow(t0.Add(logEvery + logEvery/2)); ok {
		t.Fatalf("a second line within the next logEvery let through")
	}
	// A quiet spell refills the burst, and no more.
	t1 := t0.Add(time.Hour)
	n := 0
	for {
		if ok, _ := l.allow(t1); !ok {
			break
		}
		n++
	}
	if n != logBurst {
		t.Errorf("after an hour's quiet %d lines through at once; want %d", n, logBurst)
	}
}

// TestBackoff: the waits after errors in a row double from backoffMin to
// backoffMax, start again at backoffMin after a quiet spell, and end at
// once on stop.
func TestBackoff(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b := newBackoff()
		var got []time.Duration
		for range 10 {
			start := time.Now()
			b.wait(start)
			got = append(got, time.Since(start))
		}
		want := []time.Duration{10, 20, 40, 80, 160, 320, 640, 1000, 1000, 1000}
		for i := range want {
			if got[i] != want[i]*time.Millisecond {
				t.Fatalf("waits %v; want %v ms", got, want)
			}
		}
		time.Sleep(backoffReset + time.Millisecond)
		start := time.Now()
		b.wait(start)
		if d := time.Since(start); d != backoffMin {
			t.Errorf("wait after a quiet spell: %v; want %v", d, backoffMin)
		}
		done := make(chan struct{})
		go func() {
			b.wait(time.Now())
			close(done)
		}()
		synctest.Wait()
		b.stop()
		synctest.Wait()
		select {
		case <-done:
		default:
			t.Fatal("a wait went on after stop")
		}
	})
}
