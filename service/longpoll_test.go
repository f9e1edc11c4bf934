package service_test

import (
	"context"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hourglass-go/hourglass/service"
	"github.com/hourglass-go/hourglass/task"
)

// signalled reports whether w's channel holds a signal, without taking
// it: a waiter is signalled at most once, and LongPoll reads it.
func signalled[T any](w *service.Waiter[T]) bool { return service.Signalled(w) }

// TestWaitList_WakeByCapacity: k tasks made ready wake waiters, oldest
// first, until those woken can take k between them; Wake reports what
// they can take, which a cluster node subtracts before telling others.
func TestWaitList_WakeByCapacity(t *testing.T) {
	var l service.WaitList[int]
	add := func(max int) *service.Waiter[int] {
		w := service.NewWaiter[int](max, 1)
		l.Add(w)
		return w
	}
	big, one, two := add(100), add(1), add(1)
	if took := l.Wake(30); took != 100 {
		t.Errorf("Wake(30) with a waiter of max 100 first: took %d, want 100", took)
	}
	if !signalled(big) || signalled(one) || signalled(two) || l.Len() != 2 {
		t.Errorf("Wake(30) woke big=%v one=%v two=%v, %d left waiting; want only big", signalled(big), signalled(one), signalled(two), l.Len())
	}
	if took := l.Wake(5); took != 2 {
		t.Errorf("Wake(5) with two waiters of max 1: took %d, want 2", took)
	}
	if !signalled(one) || !signalled(two) || l.Len() != 0 {
		t.Errorf("Wake(5) left %d waiting", l.Len())
	}
	if took := l.Wake(5); took != 0 {
		t.Errorf("Wake with no waiter: took %d", took)
	}
	a, b := add(100), add(100)
	l.WakeAll()
	if !signalled(a) || !signalled(b) || l.Len() != 0 {
		t.Error("WakeAll did not wake every waiter")
	}
}

// TestWaitList_WakeSkipsSignalled: a waiter on two queues signalled
// through one counts for nothing when the other wakes it, so the next
// waiter is woken instead.
func TestWaitList_WakeSkipsSignalled(t *testing.T) {
	var a, b service.WaitList[int]
	both := service.NewWaiter[int](1, 2)
	a.Add(both)
	b.Add(both)
	other := service.NewWaiter[int](1, 1)
	b.Add(other)
	a.Wake(1)
	if took := b.Wake(1); took != 1 || !signalled(other) {
		t.Errorf("Wake(1) after the first waiter was signalled elsewhere: took %d, other signalled %v; want 1, true", took, signalled(other))
	}
}

// TestWaiter_LeavePassesSignalOn is the worked example of longpoll.go: a
// waiter signalled as it gives up passes the signal on, as many tasks as
// it stood for, to the list that signalled it; one that leaves
// unsignalled wakes no one.
func TestWaiter_LeavePassesSignalOn(t *testing.T) {
	var l service.WaitList[int]
	a, b := service.NewWaiter[int](10, 1), service.NewWaiter[int](1, 1)
	l.Add(a)
	l.Add(b)
	l.Wake(3)
	if !signalled(a) || signalled(b) {
		t.Fatal("Wake(3) did not signal the oldest waiter alone")
	}
	if got := a.Leave(); got != nil {
		t.Errorf("Leave handed %v, want nothing", got)
	}
	if !signalled(b) || l.Len() != 0 {
		t.Errorf("the signal a left with did not reach b (signalled %v, %d waiting)", signalled(b), l.Len())
	}

	c, d := service.NewWaiter[int](1, 1), service.NewWaiter[int](1, 1)
	l.Add(c)
	l.Add(d)
	c.Leave()
	if signalled(d) || l.Len() != 1 {
		t.Errorf("an unsignalled waiter leaving woke d (%v) or left %d waiting, want 1", signalled(d), l.Len())
	}
}

// TestWaitList_HandOver: items go to waiters on this queue alone that
// have looked, oldest first, each as many as it takes; the rest come
// back.
func TestWaitList_HandOver(t *testing.T) {
	var l, other service.WaitList[int]
	notYet := service.NewWaiter[int](5, 1) // has not looked
	l.Add(notYet)
	multi := service.NewWaiter[int](5, 2) // waits on two queues
	l.Add(multi)
	other.Add(multi)
	multi.MarkWaiting()
	first, second := service.NewWaiter[int](2, 1), service.NewWaiter[int](10, 1)
	for _, w := range []*service.Waiter[int]{first, second} {
		l.Add(w)
		w.MarkWaiting()
	}
	if got := l.Slots(); got != 12 {
		t.Errorf("Slots = %d, want 12 (the two single waiters that looked)", got)
	}
	if got := l.Waiting(); got != 3 {
		t.Errorf("Waiting = %d, want 3", got)
	}
	left := l.HandOver([]int{1, 2, 3, 4, 5})
	if len(left) != 0 {
		t.Errorf("left %v, want none", left)
	}
	if got := first.Leave(); len(got) != 2 || got[0] != 1 || got[1] != 2 {
		t.Errorf("first was handed %v, want [1 2]", got)
	}
	if got := second.Leave(); len(got) != 3 || got[0] != 3 {
		t.Errorf("second was handed %v, want [3 4 5]", got)
	}
	if signalled(notYet) || signalled(multi) || l.Len() != 2 {
		t.Errorf("hand-over touched a waiter it may not (notYet %v, multi %v), %d left", signalled(notYet), signalled(multi), l.Len())
	}
	if left := l.HandOver([]int{6}); len(left) != 1 {
		t.Errorf("no waiter left to take: got back %v, want [6]", left)
	}
}

// memPoller is an engine of one queue of ints for LongPoll's tests: its
// look takes under its lock, and a put wakes by capacity, as the
// broker's. handOver reserves for waiters first, as a cluster's flush.
type memPoller struct {
	mu       sync.Mutex
	ready    []int
	waiters  service.WaitList[int]
	retry    time.Duration // a look that finds nothing says look again then
	given    []int
	lookHook func()
}

func (p *memPoller) Look(ctx context.Context, queues []string, max int, w *service.Waiter[int]) ([]task.Task, time.Duration, error) {
	if p.lookHook != nil {
		p.lookHook()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.ready) == 0 {
		if w != nil {
			p.waiters.Add(w)
			w.MarkWaiting()
		}
		return nil, p.retry, nil
	}
	k := min(max, len(p.ready))
	took := p.ready[:k]
	p.ready = p.ready[k:]
	return tasks(took), 0, nil
}

func (p *memPoller) Deliver(items []int) []task.Task { return tasks(items) }

func (p *memPoller) Left([]string) {}

func (p *memPoller) GiveBack(items []int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.given = append(p.given, items...)
	p.ready = append(p.ready, items...)
	p.waiters.Wake(len(items))
}

func (p *memPoller) put(items ...int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.ready = append(p.ready, items...)
	p.waiters.Wake(len(items))
}

// handOver reserves items for the waiters that have looked, handing them
// over; what none takes becomes ready.
func (p *memPoller) handOver(items ...int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	left := p.waiters.HandOver(items)
	p.ready = append(p.ready, left...)
	p.waiters.Wake(len(left))
}

func tasks(items []int) []task.Task {
	out := make([]task.Task, len(items))
	for i, it := range items {
		out[i] = task.Task{ID: strconv.Itoa(it)}
	}
	return out
}

func ids(ts []task.Task) []int {
	out := make([]int, len(ts))
	for i, t := range ts {
		out[i], _ = strconv.Atoi(t.ID)
	}
	return out
}

var queues = []string{"q"}

func TestLongPoll_WaitRunsOut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := &memPoller{}
		start := time.Now()
		got, err := service.LongPoll(t.Context(), &p.mu, p, queues, 10, 2*time.Second)
		if err != nil || len(got) != 0 {
			t.Fatalf("got %v, %v; want nothing", got, err)
		}
		if d := time.Since(start); d != 2*time.Second {
			t.Errorf("returned after %v, want 2s", d)
		}
		if p.waiters.Len() != 0 {
			t.Errorf("%d waiters left on the list", p.waiters.Len())
		}
		// No wait: one look, nothing registered.
		if got, err := service.LongPoll(t.Context(), &p.mu, p, queues, 10, 0); err != nil || len(got) != 0 || p.waiters.Len() != 0 {
			t.Errorf("wait 0: got %v, %v, %d waiting", got, err, p.waiters.Len())
		}
	})
}

func TestLongPoll_WokenByPut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := &memPoller{}
		go func() {
			time.Sleep(300 * time.Millisecond)
			p.put(1, 2, 3)
		}()
		start := time.Now()
		got, err := service.LongPoll(t.Context(), &p.mu, p, queues, 10, 5*time.Second)
		if err != nil || len(got) != 3 {
			t.Fatalf("got %v, %v; want three tasks", ids(got), err)
		}
		if d := time.Since(start); d != 300*time.Millisecond {
			t.Errorf("returned after %v, want 300ms (woken by the put)", d)
		}
	})
}

// TestLongPoll_Retry: nothing signals a pause's end; the look's retry
// has the reserver look again then.
func TestLongPoll_Retry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := &memPoller{retry: 500 * time.Millisecond}
		start := time.Now()
		p.lookHook = func() {
			if time.Since(start) >= 500*time.Millisecond {
				p.mu.Lock()
				p.ready = append(p.ready, 7) // made ready with no wake
				p.mu.Unlock()
			}
		}
		got, err := service.LongPoll(t.Context(), &p.mu, p, queues, 1, 5*time.Second)
		if err != nil || len(got) != 1 {
			t.Fatalf("got %v, %v; want one task", ids(got), err)
		}
		if d := time.Since(start); d < 500*time.Millisecond || d > 600*time.Millisecond {
			t.Errorf("returned after %v, want just after the retry (500ms)", d)
		}
	})
}

func TestLongPoll_HandOver(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := &memPoller{}
		go func() {
			time.Sleep(time.Second)
			p.handOver(4, 5, 6)
		}()
		got, err := service.LongPoll(t.Context(), &p.mu, p, queues, 2, 5*time.Second)
		if err != nil || len(got) != 2 || ids(got)[0] != 4 || ids(got)[1] != 5 {
			t.Fatalf("got %v, %v; want [4 5] handed over", ids(got), err)
		}
		if len(p.ready) != 1 || p.ready[0] != 6 {
			t.Errorf("ready %v, want [6]: what the waiter could not take", p.ready)
		}
	})
}

// TestLongPoll_HandedToGoneCaller: tasks handed to a waiter whose caller
// went away as they came are given back, not delivered.
func TestLongPoll_HandedToGoneCaller(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := &memPoller{}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan []task.Task)
		go func() {
			got, _ := service.LongPoll(ctx, &p.mu, p, queues, 5, 5*time.Second)
			done <- got
		}()
		synctest.Wait()
		// The hand-over and the cancellation in one critical section, so
		// the waiter sees both when it wakes.
		p.mu.Lock()
		p.waiters.HandOver([]int{8, 9})
		cancel()
		p.mu.Unlock()
		if got := <-done; len(got) != 0 {
			t.Errorf("a gone caller got %v", ids(got))
		}
		if len(p.given) != 2 || len(p.ready) != 2 {
			t.Errorf("given back %v, ready %v; want both tasks back", p.given, p.ready)
		}
	})
}

// TestLongPoll_Model: tasks put or handed over at random, reservers that
// wait long and loop, and one-shot reservers that give up at random
// (their wait runs out, their caller goes away), often just as they are
// signalled or handed tasks. Every task is taken exactly once, and
// whenever every goroutine is blocked no task is ready while a reserver
// waits: no lost wake-up, no lost signal, no task handed to a gone
// caller lost.
func TestLongPoll_Model(t *testing.T) {
	for seed := range uint64(20) {
		synctest.Test(t, func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, 1))
			p := &memPoller{}
			var mu sync.Mutex
			seen := map[int]int{}
			take := func(got []task.Task) {
				mu.Lock()
				defer mu.Unlock()
				for _, id := range ids(got) {
					seen[id]++
				}
			}
			ctx, cancel := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			for range 2 {
				max := 1 + r.IntN(2)
				wg.Go(func() {
					for ctx.Err() == nil {
						got, err := service.LongPoll(ctx, &p.mu, p, queues, max, time.Hour)
						if err != nil {
							t.Error(err)
						}
						take(got)
					}
				})
			}
			next := 0
			for range 300 {
				// Steps of 5 ms, so that waits run out as tasks come.
				time.Sleep(time.Duration(r.IntN(3)) * 5 * time.Millisecond)
				switch r.IntN(2) {
				case 0: // a one-shot reserver that may give up
					max, wait := 1+r.IntN(4), time.Duration(r.IntN(4))*5*time.Millisecond
					cctx, ccancel := context.WithTimeout(ctx, time.Duration(r.IntN(6))*5*time.Millisecond)
					wg.Go(func() {
						defer ccancel()
						got, err := service.LongPoll(cctx, &p.mu, p, queues, max, wait)
						if err != nil {
							t.Error(err)
						}
						take(got)
					})
				default:
					items := make([]int, 1+r.IntN(4))
					for j := range items {
						items[j] = next
						next++
					}
					if r.IntN(2) == 0 {
						p.put(items...)
					} else {
						p.handOver(items...)
					}
				}
				// Once every goroutine is blocked, a task still ready
				// with a reserver waiting is a wake-up lost.
				synctest.Wait()
				p.mu.Lock()
				ready, waiting := len(p.ready), p.waiters.Len()
				p.mu.Unlock()
				if ready > 0 && waiting > 0 {
					cancel()
					wg.Wait()
					t.Fatalf("seed %d: %d tasks ready while %d reservers wait", seed, ready, waiting)
				}
			}
			time.Sleep(100 * time.Millisecond)
			p.mu.Lock()
			left := len(p.ready)
			p.mu.Unlock()
			if left != 0 {
				t.Errorf("seed %d: %d tasks ready while reservers wait", seed, left)
			}
			cancel()
			wg.Wait()
			for id := range next {
				if seen[id] != 1 {
					t.Fatalf("seed %d: task %d taken %d times", seed, id, seen[id])
				}
			}
			if p.waiters.Len() != 0 {
				t.Errorf("seed %d: %d waiters left", seed, p.waiters.Len())
			}
		})
	}
}

// BenchmarkWaiter_Leave_Wide measures a waiter on 1,000 queues leaving
// them, each queue with 100 other waiters (a beanstalkd connection among
// 100 watching the same 1,000 tubes).
func BenchmarkWaiter_Leave_Wide(b *testing.B) {
	lists := make([]service.WaitList[int], 1000)
	for range 100 {
		w := service.NewWaiter[int](1, len(lists))
		for i := range lists {
			lists[i].Add(w)
		}
	}
	for b.Loop() {
		w := service.NewWaiter[int](1, len(lists))
		for i := range lists {
			lists[i].Add(w)
		}
		w.Leave()
	}
}
