package servicetest

import (
	"context"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/service"
	"github.com/hourglass-go/hourglass/task"
)

// perKeyRate: with per_key.rate, each key is handed out at most its
// burst, then a task a token: key A of 10 ready and key B of 10 under a
// rate of 1 an hour give a reserve of 10 one task of each, and a second
// reserve nothing, at once (neither key's spent bucket holds it up nor
// makes it spin); a key new to the queue still gets its first task. A
// spent key's next task comes with its next token, to a reserver
// waiting, and not before. The burst is per key, and the queue-wide rate
// holds beside the per-key one.
func perKeyRate(t *testing.T, b service.Service) {
	ctx := context.Background()
	const q = "perkey-rate"
	hourly := task.Rate{Limit: 1, Per: time.Hour}
	p := setPolicy(t, b, q, task.Policy{PerKey: &task.PerKey{Rate: &hourly}})
	want := task.Rate{Limit: 1, Per: time.Hour, Burst: 1}
	if got, err := b.Policy(ctx, q); err != nil || !reflect.DeepEqual(got, p) || got.PerKey == nil || got.PerKey.Rate == nil || *got.PerKey.Rate != want {
		t.Fatalf("Policy = %s, %v; want per_key.rate %+v", showPolicy(got), err, want)
	}
	putKeyed(t, b, q, "A", 10, 0)
	putKeyed(t, b, q, "B", 10, 0)
	reserveKeys(t, b, q, 10, 0, map[string]int{"A": 1, "B": 1})
	start := time.Now()
	reserveKeys(t, b, q, 10, 0, map[string]int{})
	if since := time.Since(start); since > lateSlack {
		t.Fatalf("a reserve of a queue whose keys are all out of tokens took %v; want an answer at once", since)
	}
	putKeyed(t, b, q, "C", 2, 0)
	reserveKeys(t, b, q, 10, 0, map[string]int{"C": 1})
	putKeyed(t, b, q, "", 2, 0)
	reserveKeys(t, b, q, 10, 0, map[string]int{"": 1})

	// A token each 300 ms: the next task of a spent key goes to a
	// reserver waiting, once the token is due. The token was taken after
	// start, so a task handed out before start+every broke the rate (a
	// bound below only, which a loaded machine cannot break).
	const fast = "perkey-rate-wait"
	const every = 300 * time.Millisecond
	setPolicy(t, b, fast, task.Policy{PerKey: &task.PerKey{Rate: &task.Rate{Limit: 1, Per: every}}})
	putKeyed(t, b, fast, "A", 3, 0)
	start = time.Now()
	reserveKeys(t, b, fast, 10, 0, map[string]int{"A": 1})
	reserveKeys(t, b, fast, 1, 10*time.Second, map[string]int{"A": 1})
	if since := sinceEither(start); since < every-timeSlack {
		t.Fatalf("the second task of a key at 1 a %v came %v after its first", every, since)
	}
	// Meanwhile another key is not held up by the spent one.
	putKeyed(t, b, fast, "B", 1, 0)
	reserveKeys(t, b, fast, 10, 0, map[string]int{"B": 1})

	// The burst is per key.
	const burst = "perkey-rate-burst"
	setPolicy(t, b, burst, task.Policy{PerKey: &task.PerKey{Rate: &task.Rate{Limit: 1, Per: time.Hour, Burst: 3}}})
	putKeyed(t, b, burst, "A", 5, 0)
	putKeyed(t, b, burst, "B", 5, 0)
	reserveKeys(t, b, burst, 10, 0, map[string]int{"A": 3, "B": 3})
	reserveKeys(t, b, burst, 10, 0, map[string]int{})

	// Beside the queue-wide rate: both hold.
	const both = "perkey-rate-both"
	setPolicy(t, b, both, task.Policy{Rate: &task.Rate{Limit: 3, Per: time.Hour}, PerKey: &task.PerKey{Rate: &task.Rate{Limit: 2, Per: time.Hour}}})
	putKeyed(t, b, both, "A", 5, 0)
	putKeyed(t, b, both, "B", 5, 0)
	reserveKeys(t, b, both, 10, 0, map[string]int{"A": 2, "B": 1})
	reserveKeys(t, b, both, 10, 0, map[string]int{})

	// Beside the per-key concurrency: a key must have a place and a token.
	const conc = "perkey-rate-conc"
	setPolicy(t, b, conc, task.Policy{PerKey: &task.PerKey{Concurrency: 1, Rate: &task.Rate{Limit: 2, Per: time.Hour}}})
	putKeyed(t, b, conc, "A", 5, 0)
	a := reserveKeys(t, b, conc, 10, 0, map[string]int{"A": 1})[0]
	must(t, "ack", b.Ack(ctx, conc, a.ID, a.Lease))
	a = reserveKeys(t, b, conc, 10, 0, map[string]int{"A": 1})[0]
	must(t, "ack", b.Ack(ctx, conc, a.ID, a.Lease))
	reserveKeys(t, b, conc, 10, 0, map[string]int{})

	// A new per-key rate starts with full buckets; lifting it lets every
	// key through.
	setPolicy(t, b, q, task.Policy{PerKey: &task.PerKey{Rate: &task.Rate{Limit: 2, Per: time.Hour}}})
	reserveKeys(t, b, q, 10, 0, map[string]int{"A": 2, "B": 2, "C": 1, "": 1})
	setPolicy(t, b, q, task.Policy{})
	reserveKeys(t, b, q, 20, 0, map[string]int{"A": 7, "B": 7})
}

// perKeyRateAcross: per_key.rate holds over reservers of both handles: a
// key's token spent through one is spent for the other.
func perKeyRateAcross(t *testing.T, a, b service.Service) {
	const q = "across-perkey-rate"
	setPolicy(t, a, q, task.Policy{PerKey: &task.PerKey{Rate: &task.Rate{Limit: 1, Per: time.Hour}}})
	putKeyed(t, a, q, "A", 5, 0)
	reserveKeys(t, a, q, 10, 0, map[string]int{"A": 1})
	reserveKeys(t, b, q, 10, 0, map[string]int{})
	putKeyed(t, b, q, "B", 5, 0)
	reserveKeys(t, b, q, 10, 0, map[string]int{"B": 1})
	reserveKeys(t, a, q, 10, 0, map[string]int{})
}

// perKeyPriority: under per-key limits a higher priority of any key
// still goes first: key B's task of priority 5 put before key A's of
// priority 0, a reserve of one takes A's, whatever B's turn.
func perKeyPriority(t *testing.T, b service.Service) {
	for _, p := range []task.Policy{
		{PerKey: &task.PerKey{Concurrency: 5}},
		{PerKey: &task.PerKey{Rate: &task.Rate{Limit: 5, Per: time.Hour}}},
		{Concurrency: 5, PerKey: &task.PerKey{Concurrency: 5}},
	} {
		q := "perkey-prio-" + fmt.Sprint(p.Concurrency)
		if p.PerKey.Rate != nil {
			q += "-rate"
		}
		setPolicy(t, b, q, p)
		putTask(t, b, q, task.PutRequest{ID: "b0", Key: "B", Priority: 5})
		putTask(t, b, q, task.PutRequest{ID: "a0", Key: "A", Priority: 0})
		ts, err := b.Reserve(context.Background(), q, 1, 0)
		must(t, "reserve", err)
		if len(ts) != 1 || ts[0].ID != "a0" {
			t.Fatalf("%s: a reserve of one over B's priority 5 and A's 0 took %v; want a0", q, ts)
		}
	}
}

// peekKeys: peek-ready is the first ready task in delivery order
// (priority, then due time, then put order) across keys, whatever their
// turns: keys A (a0, a1) and B (b0) put in that order, a reserve takes
// a0 and gives B the next turn, and peek-ready still names a1, put
// before b0; a higher priority of any key comes first.
func peekKeys(t *testing.T, b service.Service) {
	const q = "peek-keys"
	putTask(t, b, q, task.PutRequest{ID: "a0", Key: "A", Priority: 5})
	putTask(t, b, q, task.PutRequest{ID: "a1", Key: "A", Priority: 5})
	putTask(t, b, q, task.PutRequest{ID: "b0", Key: "B", Priority: 5})
	reserveKeys(t, b, q, 1, 0, map[string]int{"A": 1})
	if got, err := b.Peek(q, task.Ready); err != nil || got.ID != "a1" {
		t.Fatalf("peek ready after a0 was taken = %s, %v; want a1 (put before b0)", got.ID, err)
	}
	putTask(t, b, q, task.PutRequest{ID: "urgent", Key: "C", Priority: 1})
	if got, err := b.Peek(q, task.Ready); err != nil || got.ID != "urgent" {
		t.Fatalf("peek ready = %s, %v; want urgent, of priority 1", got.ID, err)
	}
}

// fairnessLimited is fairness on a queue with a rate and a concurrency
// limit (a cluster takes its tasks in takeLimited's transaction rather
// than the fair statement): key A's backlog of 2,000 ready tasks, keys B
// to K one each put after it, and every one of B to K is handed out
// within the first 20 reserves of one task; a task of a higher priority
// goes first whatever its key, and A's come in put order.
func fairnessLimited(t *testing.T, b service.Service) {
	ctx := context.Background()
	const q = "fair-limited"
	setPolicy(t, b, q, task.Policy{Concurrency: 100, Rate: &task.Rate{Limit: 10_000, Per: time.Hour}})
	var rs []task.PutRequest
	flush := func() {
		t.Helper()
		for i, r := range b.PutBatch(ctx, q, rs) {
			if r.Err != nil {
				t.Fatalf("put %s: %v", rs[i].ID, r.Err)
			}
		}
		rs = rs[:0]
	}
	for i := range 2000 {
		rs = append(rs, task.PutRequest{ID: fmt.Sprintf("a%d", i), Key: "A", Priority: 10})
		if len(rs) == task.MaxBatch {
			flush()
		}
	}
	flush()
	small := map[string]bool{}
	for c := 'B'; c <= 'K'; c++ {
		k := string(c)
		rs = append(rs, task.PutRequest{ID: "small-" + k, Key: k, Priority: 10})
		small["small-"+k] = true
	}
	rs = append(rs, task.PutRequest{ID: "urgent", Key: "A", Priority: 1})
	flush()
	var order []string
	next := 0
	for i := 0; i < 20 && len(small) > 0; i++ {
		ts, err := b.Reserve(ctx, q, 1, 0)
		if err != nil || len(ts) != 1 {
			t.Fatalf("reserve %d: %d tasks, %v", i+1, len(ts), err)
		}
		tk := ts[0]
		order = append(order, tk.ID)
		if i == 0 && tk.ID != "urgent" {
			t.Fatalf("the first reserve took %s (key %s); want urgent, of the highest priority", tk.ID, tk.Key)
		}
		if tk.ID[0] == 'a' {
			if want := fmt.Sprintf("a%d", next); tk.ID != want {
				t.Fatalf("A's tasks came as %v; want in put order", order)
			}
			next++
		}
		delete(small, tk.ID)
		must(t, "ack "+tk.ID, b.Ack(ctx, q, tk.ID, tk.Lease))
	}
	if len(small) > 0 || next > 3 {
		t.Fatalf("after %v, %d one-task keys still wait and A had %d; want none waiting, A at most 3", order, len(small), next)
	}
}
