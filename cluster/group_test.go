package cluster

import (
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestGroup: calls that arrive while a statement runs share the next
// one; each call gets the answer run gave it, and none is lost or
// answered twice.
func TestGroup(t *testing.T) {
	var statements, running atomic.Int32
	g := group[int]{run: func(calls []*call[int]) {
		if running.Add(1) != 1 {
			t.Error("two statements of one group at once")
		}
		statements.Add(1)
		time.Sleep(time.Millisecond)
		for _, c := range calls {
			if c.req%2 == 1 {
				c.err = errorString(strconv.Itoa(c.req))
			}
		}
		running.Add(-1)
	}}
	const callers, each = 32, 20
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() {
			for j := range each {
				req := i*each + j
				err := g.do(req)
				if (req%2 == 1) != (err != nil) || (err != nil && err.Error() != strconv.Itoa(req)) {
					t.Errorf("call %d: err %v", req, err)
				}
			}
		})
	}
	wg.Wait()
	if n := statements.Load(); n >= callers*each/4 {
		t.Errorf("%d calls from %d callers took %d statements: not grouped", callers*each, callers, n)
	} else {
		t.Logf("%d calls from %d callers: %d statements", callers*each, callers, n)
	}
	if g.running || len(g.pending) != 0 {
		t.Errorf("group left running=%v with %d pending", g.running, len(g.pending))
	}
}

type errorString string

func (e errorString) Error() string { return string(e) }

// TestGroup_Panic: a run that panics answers its calls with an error and
// leaves the group usable; the panic goes up the leader's stack.
func TestGroup_Panic(t *testing.T) {
	var calls atomic.Int32
	g := group[int]{run: func(cs []*call[int]) {
		if calls.Add(1) == 1 {
			panic("bug")
		}
	}}
	func() {
		defer func() {
			if recover() == nil {
				t.Error("the panic did not reach the leader")
			}
		}()
		g.do(1)
	}()
	if err := g.do(2); err != nil {
		t.Errorf("the call after the panic: %v", err)
	}
	if g.running || len(g.pending) != 0 {
		t.Errorf("group left running=%v with %d pending", g.running, len(g.pending))
	}
}
