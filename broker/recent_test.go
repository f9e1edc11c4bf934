package broker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/store/memstore"
	"github.com/hourglass-go/hourglass/task"
)

// TestRecent_Model runs random puts (ready, due within the horizon, far
// ahead; payloads of random sizes), reserves, acks, releases, nacks,
// buries, kicks, deletes and touches, on a broker whose budget of kept
// records is a few KiB, so that records are kept, refused and freed all
// along. After every operation each record kept equals the store's, the
// bytes counted match the records kept and stay within the budget, and
// every task handed out carries the payload its put gave.
func TestRecent_Model(t *testing.T) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	ctx := context.Background()
	for seed := range uint64(6) {
		r := rand.New(rand.NewPCG(seed, 7))
		st := memstore.New()
		b, err := Open(st, Config{Logger: quiet, RecentBytes: 4 << 10})
		if err != nil {
			t.Fatal(err)
		}
		payloads := map[string][]byte{} // id → payload put
		held := map[string]string{}     // id → lease, of tasks reserved
		var ids []string
		var jobs []uint64
		kept := 0
		check := func(op int, what string) {
			t.Helper()
			b.mu.Lock()
			defer b.mu.Unlock()
			var used int64
			for job, rec := range b.recent.m {
				used += recentSize(&rec)
				if _, pending := b.over.tasks[job]; pending {
					continue // a newer write not yet committed: the overlay is read first
				}
				want, err := st.Task(job)
				if err != nil || !reflect.DeepEqual(rec, want) {
					t.Fatalf("seed %d op %d (%s): job %d kept as %+v; the store has %+v, %v", seed, op, what, job, rec, want, err)
				}
			}
			if used != b.recent.used || used > b.recent.budget {
				t.Fatalf("seed %d op %d (%s): %d bytes kept, counted %d, budget %d", seed, op, what, used, b.recent.used, b.recent.budget)
			}
			kept = max(kept, len(b.recent.m))
		}
		handed := func(op int, ts []task.Task) {
			t.Helper()
			for _, tk := range ts {
				if !bytes.Equal(tk.Payload, payloads[tk.ID]) {
					t.Fatalf("seed %d op %d: task %s handed out with payload %q; put with %q", seed, op, tk.ID, tk.Payload, payloads[tk.ID])
				}
				held[tk.ID] = tk.Lease
			}
		}
		pick := func(m map[string]string) (string, string, bool) {
			for id, lease := range m {
				return id, lease, true
			}
			return "", "", false
		}
		for op := range 3000 {
			var what string
			switch k := r.IntN(10); {
			case k < 3:
				id := fmt.Sprintf("t%d", op)
				p := bytes.Repeat([]byte{byte('a' + r.IntN(26))}, r.IntN(900))
				var delay time.Duration
				switch r.IntN(4) {
				case 0:
					delay = time.Duration(r.IntN(50)) * time.Millisecond
				case 1:
					delay = time.Hour
				}
				what = "put " + id
				tk, _, err := svc(b).Put(ctx, "q", task.PutRequest{ID: id, Payload: p, Delay: delay, MaxAttempts: 3})
				if err != nil {
					t.Fatal(err)
				}
				payloads[id] = p
				ids = append(ids, id)
				jobs = append(jobs, tk.JobID)
			case k < 5:
				what = "reserve"
				ts, err := svc(b).Reserve(ctx, "q", 1+r.IntN(3), 0)
				if err != nil {
					t.Fatal(err)
				}
				handed(op, ts)
			case k < 6:
				id, lease, ok := pick(held)
				if !ok {
					continue
				}
				what = "ack " + id
				delete(held, id)
				if err := svc(b).Ack(ctx, "q", id, lease); err != nil {
					t.Fatalf("%s: %v", what, err)
				}
			case k < 7:
				id, lease, ok := pick(held)
				if !ok {
					continue
				}
				delete(held, id)
				switch r.IntN(4) {
				case 0:
					what = "release " + id
					_, err = svc(b).Release(ctx, "q", id, lease, time.Duration(r.IntN(20))*time.Millisecond)
				case 1:
					what = "nack " + id
					_, err = svc(b).Nack(ctx, "q", id, lease, 0, "no")
				case 2:
					what = "bury " + id
					_, err = svc(b).Bury(ctx, "q", id, lease, "buried")
				default:
					what = "touch " + id
					held[id] = lease
					_, err = svc(b).Touch(ctx, "q", id, lease)
				}
				if err != nil {
					t.Fatalf("%s: %v", what, err)
				}
			case k < 8:
				if len(ids) == 0 {
					continue
				}
				i := r.IntN(len(ids))
				if r.IntN(2) == 0 {
					what = "kick " + ids[i]
					err = svc(b).Kick(ctx, "q", ids[i])
				} else {
					what = "kick job of " + ids[i] // a delayed one too
					err = svc(b).KickJob(ctx, jobs[i])
				}
				if err != nil && !isNotFoundOrState(err) {
					t.Fatalf("%s: %v", what, err)
				}
			case k < 9:
				if len(ids) == 0 {
					continue
				}
				id := ids[r.IntN(len(ids))]
				what = "delete " + id
				if err := svc(b).Delete(ctx, "q", id); err != nil && !isNotFoundOrState(err) {
					t.Fatalf("%s: %v", what, err)
				}
				delete(held, id)
			default:
				what = "kick dead"
				if _, err := svc(b).KickDead(ctx, "q"); err != nil {
					t.Fatal(err)
				}
			}
			check(op, what)
		}
		if b.recent.hits == 0 || kept == 0 {
			t.Errorf("seed %d: %d hits, at most %d records kept: the test does not reach the cache", seed, b.recent.hits, kept)
		}
		b.Close()
	}
}

func isNotFoundOrState(err error) bool {
	return errors.Is(err, task.ErrNotFound) || errors.Is(err, task.ErrState)
}

// TestRecent_ReadAhead puts a backlog, opens the broker again over its
// store (so that no record is kept), and reserves and acks it in batches
// of 30, as a worker does: the records of most tasks are read ahead
// (kept when reserved), and every task comes with the payload its put
// gave.
func TestRecent_ReadAhead(t *testing.T) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	ctx := context.Background()
	st := memstore.New()
	b, err := Open(st, Config{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	const n = 5000
	for i := range n {
		if _, _, err := svc(b).Put(ctx, "q", task.PutRequest{Payload: fmt.Appendf(nil, `"p%d"`, i)}); err != nil {
			t.Fatal(err)
		}
	}
	b.Close()
	if b, err = Open(st, Config{Logger: quiet}); err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	for done := 0; done < n; {
		ts, err := svc(b).Reserve(ctx, "q", 30, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		for _, tk := range ts {
			if want := fmt.Sprintf(`"p%d"`, tk.JobID-1); string(tk.Payload) != want {
				t.Fatalf("task %d handed out with payload %s, put with %s", tk.JobID, tk.Payload, want)
			}
			if err := svc(b).Ack(ctx, "q", tk.ID, tk.Lease); err != nil {
				t.Fatal(err)
			}
		}
		done += len(ts)
	}
	b.mu.Lock()
	hits, misses := b.recent.hits, b.recent.misses
	b.mu.Unlock()
	if hits < n/2 {
		t.Errorf("%d records kept, %d read when reserved: want most kept", hits, misses)
	}
}
