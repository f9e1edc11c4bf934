package storetest

import (
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/store"
	"github.com/hourglass-go/hourglass/task"
)

// queueRecord returns the record of queue name, its fields derived from v:
// every field set, Retry and Rate included, a push endpoint for odd v
// (with v%4 headers), and some at the bounds of package task.
func queueRecord(name string, v int) store.Queue {
	q := store.Queue{
		Name:        name,
		PausedUntil: time.Date(2030, 1, 2, 3, 4, 5, v, time.UTC).UnixNano(),
		Pauses:      uint64(v) + 1<<40,
		Policy: task.Policy{
			Retry: &task.Retry{
				Initial:    time.Duration(v+1) * time.Millisecond,
				Max:        task.MaxRetryDelay,
				Multiplier: 1.5 + float64(v),
				Jitter:     0.1 * float64(v%10),
			},
			MaxAttempts: task.MaxAttemptsLimit - v,
			TTR:         time.Duration(v+1) * time.Second,
			Rate:        &task.Rate{Limit: task.MaxRateLimit - v, Per: task.MaxRatePer, Burst: v},
			Concurrency: task.MaxConcurrency - v,
			DeadLetter:  fmt.Sprintf("%s-dead ✓%d", name, v),
		},
	}
	if v%2 == 1 {
		q.Policy.Push = pushOf(v)
	}
	if v%3 == 1 {
		q.Tokens, q.TokensAt = float64(v)+0.25, time.Date(2029, 5, 6, 7, 8, 9, v, time.UTC).UnixNano()
	}
	switch v % 3 {
	case 1:
		q.Policy.PerKey = &task.PerKey{Concurrency: task.MaxConcurrency - v}
	case 2:
		q.Policy.PerKey = &task.PerKey{Concurrency: v, Rate: &task.Rate{Limit: v + 1, Per: task.MaxRatePer - time.Duration(v), Burst: v}}
	}
	return q
}

// pushOf returns a push endpoint derived from v, with v%4 headers (Headers
// nil for none), named out of order, a secret for v%3 != 0 and a next
// secret for v%3 == 2.
func pushOf(v int) *task.Push {
	p := &task.Push{
		URL:     fmt.Sprintf("https://hooks.example.com/q/%d?ü=✓", v),
		Timeout: time.Duration(v)*time.Second + task.MaxPushTimeout,
	}
	names := []string{"X-Zeta", "Authorization", "X-Ünïcode", "x-alpha"}
	for i := range v % 4 {
		if p.Headers == nil {
			p.Headers = map[string]string{}
		}
		p.Headers[names[i]] = fmt.Sprintf("value %d of %d", i, v)
	}
	if v%3 != 0 {
		p.Secret = fmt.Sprintf("whsec_%d\x00\xff", v)
	}
	if v%3 == 2 {
		p.NextSecret = fmt.Sprintf("whsec_next%d", v)
	}
	return p
}

// checkQueues checks that Queues returns want, which is ordered by name:
// every field equal, and Retry, Rate, Push and its Headers nil exactly
// where want's are.
func checkQueues(t *testing.T, st store.Store, want ...store.Queue) {
	t.Helper()
	got, err := st.Queues()
	if err != nil {
		t.Fatalf("Queues: %v", err)
	}
	if len(got) != len(want) {
		t.Fatalf("Queues: %d %s, want %d %s", len(got), queuesString(got), len(want), queuesString(want))
	}
	for i := range got {
		if !reflect.DeepEqual(got[i], want[i]) {
			t.Fatalf("Queues[%d]:\n got %s\nwant %s", i, queueString(got[i]), queueString(want[i]))
		}
	}
}

// queueString shows q with what its pointers point to.
func queueString(q store.Queue) string {
	p := q.Policy
	s := fmt.Sprintf("{%q paused %d pauses %d max %d ttr %v conc %d dead %q", q.Name, q.PausedUntil, q.Pauses, p.MaxAttempts, p.TTR, p.Concurrency, p.DeadLetter)
	if p.Retry != nil {
		s += fmt.Sprintf(" retry %+v", *p.Retry)
	}
	if p.Rate != nil {
		s += fmt.Sprintf(" rate %+v", *p.Rate)
	}
	if p.Push != nil {
		s += fmt.Sprintf(" push %+v", *p.Push)
	}
	if p.Dedupe != 0 {
		s += fmt.Sprintf(" dedupe %v", p.Dedupe)
	}
	if q.TokensAt != 0 {
		s += fmt.Sprintf(" tokens %v at %d", q.Tokens, q.TokensAt)
	}
	if k := p.PerKey; k != nil {
		s += fmt.Sprintf(" per_key conc %d", k.Concurrency)
		if k.Rate != nil {
			s += fmt.Sprintf(" rate %+v", *k.Rate)
		}
	}
	return s + "}"
}

func queuesString(qs []store.Queue) string {
	s := "["
	for i, q := range qs {
		if i > 0 {
			s += " "
		}
		s += queueString(q)
	}
	return s + "]"
}

// testQueues: queue records put, replaced and deleted, listed by name
// (bytewise, names that extend others included), every policy field read
// back as written, nil Retry and Rate staying nil and set ones staying
// set; and queue records are apart from tasks and schedules.
func testQueues(t *testing.T, st store.Store) {
	checkQueues(t, st)
	a, ab, b := queueRecord("a", 1), queueRecord("ab", 2), queueRecord("b", 3)
	dot := queueRecord("a.b", 4)
	u := queueRecord("file d'attente ü", 5)
	var batch store.Batch
	for _, q := range []store.Queue{u, b, ab, dot, a} {
		batch.PutQueue(q)
	}
	if err := st.Commit(&batch); err != nil {
		t.Fatal(err)
	}
	checkQueues(t, st, a, dot, ab, b, u)

	// Replace: a loses its retry and keeps its rate, ab the reverse, b
	// keeps its policy and is paused until resumed, dot has the default
	// policy and no pause (a record the broker would delete, but the store
	// keeps what it is given).
	a2 := a
	a2.Policy.Retry, a2.PausedUntil = nil, 0
	ab2 := ab
	ab2.Policy.Rate = nil
	ab2.Policy.Retry = &task.Retry{Initial: time.Nanosecond, Max: time.Nanosecond, Multiplier: 1, Jitter: 0}
	b2 := b
	b2.PausedUntil, b2.Pauses = math.MaxInt64, b.Pauses+1
	dot2 := store.Queue{Name: dot.Name}
	batch.Reset()
	for _, q := range []store.Queue{a2, ab2, b2, dot2} {
		batch.PutQueue(q)
	}
	batch.DeleteQueue(u.Name)
	batch.DeleteQueue("never-there")
	if err := st.Commit(&batch); err != nil {
		t.Fatal(err)
	}
	checkQueues(t, st, a2, dot2, ab2, b2)

	// Queues, schedules and tasks of one name are apart.
	commit(t, st, put(sample(1, "a", "x")))
	batch.Reset()
	batch.PutSchedule(schedule("a", 1))
	batch.DeleteQueue("b")
	if err := st.Commit(&batch); err != nil {
		t.Fatal(err)
	}
	checkQueues(t, st, a2, dot2, ab2)
	checkSchedules(t, st, schedule("a", 1))
	checkAll(t, st, sample(1, "a", "x"))
	commit(t, st, del(sample(1, "a", "x")))
	batch.Reset()
	batch.DeleteSchedule("a")
	if err := st.Commit(&batch); err != nil {
		t.Fatal(err)
	}
	checkQueues(t, st, a2, dot2, ab2)
}

// testQueuesCopied: neither what a caller committed nor what Queues
// returned shares memory with the store: changing a policy's Retry, Rate,
// Push or its Headers through either changes nothing stored. The broker keeps the
// policies it commits and hands out those it reads.
func testQueuesCopied(t *testing.T, st store.Store) {
	q := queueRecord("q", 3) // a push endpoint with 3 headers
	want := queueRecord("q", 3)
	var batch store.Batch
	batch.PutQueue(q)
	if err := st.Commit(&batch); err != nil {
		t.Fatal(err)
	}
	q.Policy.Retry.Initial = time.Hour
	q.Policy.Rate.Limit = 1
	q.Policy.Push.URL = "changed"
	q.Policy.Push.Headers["Authorization"] = "changed"
	q.Policy.Push.Headers["X-Added"] = "added"
	checkQueues(t, st, want)

	got, err := st.Queues()
	if err != nil || len(got) != 1 {
		t.Fatalf("Queues = %v, %v", queuesString(got), err)
	}
	got[0].Policy.Retry.Multiplier = 99
	got[0].Policy.Rate.Per = time.Nanosecond
	got[0].Policy.DeadLetter = "changed"
	got[0].Policy.Push.Timeout = time.Nanosecond
	delete(got[0].Policy.Push.Headers, "X-Zeta")
	checkQueues(t, st, want)

	// Two reads share nothing either.
	one, _ := st.Queues()
	two, _ := st.Queues()
	if one[0].Policy.Retry == two[0].Policy.Retry || one[0].Policy.Rate == two[0].Policy.Rate || one[0].Policy.Push == two[0].Policy.Push {
		t.Fatal("two calls of Queues return the same Retry, Rate or Push")
	}
	one[0].Policy.Push.Headers["X-Zeta"] = "changed"
	if two[0].Policy.Push.Headers["X-Zeta"] == "changed" {
		t.Fatal("two calls of Queues return the same push headers")
	}
}

// testQueuesPush: a push endpoint reads back as written: nil staying nil,
// one with no headers (Headers nil), one with each number of headers up
// to task.MaxPushHeaders at their longest, every field at its bound; a
// replacement drops or changes it whole, headers included.
func testQueuesPush(t *testing.T, st store.Store) {
	var qs []store.Queue
	for v := range 8 {
		q := store.Queue{Name: fmt.Sprint("p", v)}
		if v > 0 {
			q.Policy.Push = pushOf(v)
		}
		qs = append(qs, q)
	}
	full := store.Queue{Name: "p8", Policy: task.Policy{Push: &task.Push{
		URL:        "https://h.example/" + strings.Repeat("a", task.MaxPushURL-len("https://h.example/")),
		Timeout:    task.MaxPushTimeout,
		Headers:    map[string]string{},
		Secret:     strings.Repeat("s", task.MaxPushSecret),
		NextSecret: strings.Repeat("n", task.MaxPushSecret),
	}}}
	for i := range task.MaxPushHeaders {
		name := fmt.Sprintf("X-H%02d", task.MaxPushHeaders-i) // put in reverse order
		full.Policy.Push.Headers[name] = strings.Repeat("v", task.MaxPushHeaderLen-len(name))
	}
	qs = append(qs, full)
	var b store.Batch
	for _, q := range qs {
		b.PutQueue(q)
	}
	if err := st.Commit(&b); err != nil {
		t.Fatal(err)
	}
	checkQueues(t, st, qs...)

	// p1 loses its push, p2 gets one, p3 loses its headers, p4 changes one
	// header's value and drops another.
	qs[1].Policy.Push = nil
	qs[2].Policy.Push = &task.Push{URL: "http://127.0.0.1:9/x"}
	p3 := *qs[3].Policy.Push
	p3.Headers = nil
	qs[3].Policy.Push = &p3
	p4 := *qs[4].Policy.Push
	p4.Headers = map[string]string{"X-Zeta": "new"}
	qs[4].Policy.Push = &p4
	b.Reset()
	for _, q := range qs[1:5] {
		b.PutQueue(q)
	}
	if err := st.Commit(&b); err != nil {
		t.Fatal(err)
	}
	checkQueues(t, st, qs...)
}

// testQueuesBucket: a rate limit's bucket (Tokens, TokensAt) reads back
// as written, with and without the fields written around it (a dedupe
// window, a push endpoint, a pause); a record replaced without one reads
// with none (TokensAt 0), and one replaced with another reads the new.
func testQueuesBucket(t *testing.T, st store.Store) {
	rate := &task.Rate{Limit: 1, Per: time.Hour, Burst: 3}
	at := time.Date(2030, 1, 2, 3, 4, 5, 6, time.UTC).UnixNano()
	qs := []store.Queue{
		{Name: "b0", Policy: task.Policy{Rate: rate}, Tokens: 0, TokensAt: at},
		{Name: "b1", Policy: task.Policy{Rate: rate, Dedupe: time.Minute}, Tokens: 2.5, TokensAt: at + 1},
		{Name: "b2", Policy: task.Policy{Rate: rate, Push: pushOf(3)}, PausedUntil: math.MaxInt64, Tokens: 1e-9, TokensAt: 1},
		{Name: "b3", Policy: task.Policy{Rate: rate}, Tokens: 3, TokensAt: math.MaxInt64},
		{Name: "b4", Policy: task.Policy{Rate: rate}},
	}
	var b store.Batch
	for _, q := range qs {
		b.PutQueue(q)
	}
	if err := st.Commit(&b); err != nil {
		t.Fatal(err)
	}
	checkQueues(t, st, qs...)

	// b0 takes its last token, b1 loses its bucket (a new rate), b4
	// gets one; b2 is written twice in the batch, the later write wins.
	qs[0].Tokens, qs[0].TokensAt = 0, at+int64(time.Second)
	qs[1].Tokens, qs[1].TokensAt = 0, 0
	qs[4].Tokens, qs[4].TokensAt = 1.75, at
	b.Reset()
	b.PutQueue(qs[0])
	b.PutQueue(qs[1])
	b.PutQueue(qs[2])
	qs[2].Tokens, qs[2].TokensAt = 0.5, 2
	b.PutQueue(qs[2])
	b.PutQueue(qs[4])
	if err := st.Commit(&b); err != nil {
		t.Fatal(err)
	}
	checkQueues(t, st, qs...)
}
