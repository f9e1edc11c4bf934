package servicetest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/service"
	"github.com/hourglass-go/hourglass/task"
)

// keyOrder pins the order of keys within a round of the keyed reserve,
// service.KeyCompare's rule, on every engine (issue 41): the keys by
// name after the queue's cursor (the last key served), "" after every
// other key; a key that empties and puts again comes at its place by
// name; only the keys whose first task has the first priority are in a
// round; a batch serves the round, then fills in delivery order, leaving
// the cursor at the round's last key; over several queues the rounds'
// tasks go by place in their rounds, and a queue whose ready tasks are
// all of the key "" has no round. Tasks are put in no order of names,
// so that an order by turns (put order) fails it.
func keyOrder(t *testing.T, b service.Service) {
	ctx := context.Background()
	put := func(queue string, specs ...string) {
		t.Helper()
		// A spec is "ID" or "ID:priority"; the key is the ID less its
		// last character, "e" standing for the key "".
		var rs []task.PutRequest
		for _, s := range specs {
			id, prio, _ := strings.Cut(s, ":")
			r := task.PutRequest{ID: id, Key: id[:len(id)-1], Priority: 5}
			if r.Key == "e" {
				r.Key = ""
			}
			if prio != "" {
				_, err := fmt.Sscan(prio, &r.Priority)
				must(t, "spec "+s, err)
			}
			rs = append(rs, r)
		}
		for i, r := range b.PutBatch(ctx, queue, rs) {
			must(t, "put "+rs[i].ID, r.Err)
		}
	}
	got := func(ts []task.Task) []string {
		var s []string
		for _, tk := range ts {
			s = append(s, tk.ID)
		}
		return s
	}
	ones := func(queue string, n int, want ...string) {
		t.Helper()
		var ids []string
		for range n {
			ids = append(ids, ReserveOne(t, b, queue, 0).ID)
		}
		if !slices.Equal(ids, want) {
			t.Fatalf("%s: reserves of one served %v; want %v", queue, ids, want)
		}
	}
	batch := func(queues []string, max int, want ...string) {
		t.Helper()
		ts, err := b.ReserveQueues(ctx, queues, max, 0)
		must(t, "reserve a batch", err)
		ids := got(ts)
		slices.Sort(ids) // an answer lists its tasks in delivery order
		w := slices.Clone(want)
		slices.Sort(w)
		if !slices.Equal(ids, w) {
			t.Fatalf("%v: a batch of %d served %v; want %v", queues, max, got(ts), want)
		}
	}

	// Keys put as c, "", a, b: served a, b, c, "" in every round; b
	// empties in round 2, c and "" too, and they come back while the
	// cursor is at a: at their places by name.
	put("order", "c1", "c2", "e1", "e2", "a1", "a2", "a3", "a4", "b1")
	ones("order", 4, "a1", "b1", "c1", "e1")
	ones("order", 3, "a2", "c2", "e2")
	ones("order", 1, "a3")
	put("order", "e3", "c3", "b2")
	ones("order", 4, "b2", "c3", "e3", "a4")
	put("order", "e4", "a5")
	ones("order", 2, "e4", "a5")

	// The key "" is in the round however its tasks were put: here
	// alone, in a put of its own.
	put("plain", "a1", "a2", "b1")
	put("plain", "e1")
	ones("plain", 4, "a1", "b1", "e1", "a2")

	// Priorities: only the keys whose first task has the first priority
	// are in a round; the others wait, and come at their places by name
	// after the cursor when their priority is the first: after c, d and
	// "", then a and b.
	put("prio", "b1", "c1:1", "a1", "d1", "e1")
	ones("prio", 5, "c1", "d1", "e1", "a1", "b1")

	// A batch: the round (a, b, c, "") then the fill in delivery order
	// (c's tasks were put first), the cursor left at "": the next
	// round starts at a again.
	put("batch", "c1", "c2", "c3", "e1", "e2", "e3", "a1", "a2", "a3", "b1", "b2", "b3")
	batch([]string{"batch"}, 6, "a1", "b1", "c1", "e1", "c2", "c3")
	ones("batch", 2, "a2", "b2")
	batch([]string{"batch"}, 10, "e2", "a3", "b3", "e3")

	// Several queues: each queue's round, by place in it (then put
	// order: multi-1's tasks were put first), then the fills.
	put("multi-1", "b1", "a1", "a2")
	put("multi-2", "d1", "c1", "e1")
	batch([]string{"multi-1", "multi-2"}, 3, "a1", "c1", "b1")
	batch([]string{"multi-1", "multi-2"}, 2, "a2", "d1")
	batch([]string{"multi-2", "multi-1"}, 1, "e1")

	// A queue that drains (every task acked) and fills again goes on
	// after its cursor (within a minute: service.KeyCompare).
	acked := func(queue string, want ...string) {
		t.Helper()
		var ids []string
		for range want {
			tk := ReserveOne(t, b, queue, 0)
			must(t, "ack "+tk.ID, b.Ack(ctx, queue, tk.ID, tk.Lease))
			ids = append(ids, tk.ID)
		}
		if !slices.Equal(ids, want) {
			t.Fatalf("%s: reserves of one served %v; want %v", queue, ids, want)
		}
	}
	put("drain", "b1", "a1", "c1")
	acked("drain", "a1", "b1")
	put("drain", "a2", "d1")
	acked("drain", "c1", "d1", "a2")
	put("drain", "b2", "e2", "c2", "d2", "a3")
	acked("drain", "b2", "c2", "d2", "e2", "a3")

	// A queue whose ready tasks are all of the key "" has no round, as
	// a queue without keys: only-1's tasks of "" are a fill, after
	// only-2's round, though put first (a2 is cancelled).
	put("only-1", "a1", "b1", "a2", "e1", "e2")
	ones("only-1", 2, "a1", "b1")
	must(t, "cancel a2", b.Cancel(ctx, "only-1", "a2"))
	put("only-2", "c1", "d1")
	batch([]string{"only-1", "only-2"}, 2, "c1", "d1")
	batch([]string{"only-2", "only-1"}, 2, "e1", "e2")

	// A limited queue (per-key concurrency, or the queue's rate and
	// concurrency) keeps the rule: the same rounds, fills and
	// priorities; a key its limit holds back is left out of the round
	// (c at 2 tasks reserved, then at 3 in the batch queue).
	setPolicy(t, b, "lim-conc", task.Policy{PerKey: &task.PerKey{Concurrency: 2}})
	put("lim-conc", "c1", "c2", "c3", "e1", "e2", "a1", "a2", "a3", "b1")
	ones("lim-conc", 4, "a1", "b1", "c1", "e1")
	ones("lim-conc", 3, "a2", "c2", "e2")
	put("lim-conc", "b2", "d1")
	ones("lim-conc", 2, "b2", "d1")
	// a's second task, of the first priority, is held back by a's
	// limit: the round is of the keys let through, after the cursor.
	setPolicy(t, b, "lim-prio", task.Policy{PerKey: &task.PerKey{Concurrency: 1}})
	put("lim-prio", "c1", "a1:1", "a2:1", "b1")
	ones("lim-prio", 3, "a1", "b1", "c1")
	setPolicy(t, b, "lim-batch", task.Policy{PerKey: &task.PerKey{Concurrency: 3}})
	put("lim-batch", "c1", "c2", "c3", "c4", "e1", "e2", "e3", "a1", "a2", "a3", "b1", "b2", "b3")
	batch([]string{"lim-batch"}, 6, "a1", "b1", "c1", "e1", "c2", "c3")
	ones("lim-batch", 2, "a2", "b2")
	batch([]string{"lim-batch"}, 10, "e2", "a3", "b3", "e3")
	setPolicy(t, b, "lim-rate", task.Policy{Concurrency: 100,
		Rate: &task.Rate{Limit: 1000, Per: time.Second, Burst: 1000}})
	put("lim-rate", "b1", "c1:1", "a1", "d1", "e1", "b2", "a2")
	ones("lim-rate", 5, "c1", "d1", "e1", "a1", "b1")
	put("lim-rate", "c2")
	ones("lim-rate", 3, "c2", "a2", "b2")
	put("lim-multi-1", "b1", "a1", "a2")
	setPolicy(t, b, "lim-multi-2", task.Policy{PerKey: &task.PerKey{Concurrency: 5}})
	put("lim-multi-2", "d1", "c1", "e1")
	batch([]string{"lim-multi-1", "lim-multi-2"}, 3, "a1", "c1", "b1")
	batch([]string{"lim-multi-1", "lim-multi-2"}, 2, "a2", "d1")
	batch([]string{"lim-multi-2", "lim-multi-1"}, 1, "e1")
}
