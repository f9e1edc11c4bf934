package servicetest_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/cluster"
	"github.com/hourglass-go/hourglass/internal/pgtest"
	"github.com/hourglass-go/hourglass/service"
	"github.com/hourglass-go/hourglass/store/memstore"
	"github.com/hourglass-go/hourglass/task"
)

// TestDifferentialKeys runs random sequences of keyed puts, reserves and
// cancels on the embedded engine (on memory) and on a cluster node, and
// checks that every reserve hands out the same tasks in the same order
// on both: the order of keys in a round (service.KeyCompare's rule),
// which TestDifferential leaves out by giving each key its own priority.
// Keys tie on priority here (two priorities over six keys, "" among
// them); reserves take 1 to 6 tasks of one queue or of two, in either
// order; cancels leave stale entries behind on the embedded engine.
// Three sequences of 250 steps on queues without a policy, then three
// on limited queues (a per-key concurrency of 2, which a batch meets; a
// queue rate that never runs out and a concurrency of 4), each on
// fresh queues; a failure prints the steps.
func TestDifferentialKeys(t *testing.T) {
	if testing.Short() {
		t.Skip("starts PostgreSQL")
	}
	ctx := context.Background()
	srv := pgtest.Start(t)
	pool := pgtest.Pool(t, srv.CreateDatabase(t), 8, cluster.ConfigurePool)
	node, err := cluster.Open(ctx, pool, cluster.Options{Node: "a", Lease: time.Second, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { node.Close() })
	engines := []service.Service{openBroker(t, memstore.New()), service.New(node)}
	names := []string{"embedded", "cluster"}
	keys := []string{"", "a", "b", "c", "d", "e"}
	for seed := uint64(1); seed <= 6; seed++ {
		rng := rand.New(rand.NewPCG(seed, 41))
		queues := []string{fmt.Sprintf("dk%d-1", seed), fmt.Sprintf("dk%d-2", seed)}
		if seed > 3 {
			for _, s := range engines {
				if _, err := s.SetPolicy(ctx, queues[0], task.Policy{PerKey: &task.PerKey{Concurrency: 2}}); err != nil {
					t.Fatal(err)
				}
				if _, err := s.SetPolicy(ctx, queues[1], task.Policy{Concurrency: 4,
					Rate: &task.Rate{Limit: 1_000_000, Per: time.Second, Burst: 1_000_000}}); err != nil {
					t.Fatal(err)
				}
			}
		}
		var log []string
		var ids []string // "queue/id" of every task put
		fail := func(format string, args ...any) {
			t.Helper()
			t.Fatalf("seed %d, after %s:\n"+format, append([]any{seed, strings.Join(log, "\n")}, args...)...)
		}
		for step := range 250 {
			switch r := rng.IntN(10); {
			case r < 5:
				q := queues[rng.IntN(2)]
				rs := make([]task.PutRequest, 1+rng.IntN(4))
				var desc []string
				for i := range rs {
					id := fmt.Sprintf("t%d", len(ids))
					ids = append(ids, q+"/"+id)
					rs[i] = task.PutRequest{ID: id, Key: keys[rng.IntN(len(keys))], Priority: uint32(1 + rng.IntN(2)), TTR: time.Hour}
					desc = append(desc, fmt.Sprintf("%s(%q p%d)", id, rs[i].Key, rs[i].Priority))
				}
				log = append(log, fmt.Sprintf("%d: put %s %s", step, q, strings.Join(desc, " ")))
				for e, s := range engines {
					for i, res := range s.PutBatch(ctx, q, rs) {
						if res.Err != nil {
							fail("%s: put %s: %v", names[e], rs[i].ID, res.Err)
						}
					}
				}
			case r < 6 && len(ids) > 0:
				q, id, _ := strings.Cut(ids[rng.IntN(len(ids))], "/")
				log = append(log, fmt.Sprintf("%d: cancel %s/%s", step, q, id))
				var errs []error
				for _, s := range engines {
					errs = append(errs, s.Cancel(ctx, q, id))
				}
				for _, err := range errs {
					if err != nil && !errors.Is(err, task.ErrNotFound) || (errs[0] == nil) != (errs[1] == nil) {
						fail("cancel %s/%s: %v on %s, %v on %s", q, id, errs[0], names[0], errs[1], names[1])
					}
				}
			default:
				qs := slices.Clone(queues)
				switch rng.IntN(3) {
				case 0:
					qs = qs[:1]
				case 1:
					qs = qs[1:]
				}
				if len(qs) == 2 && rng.IntN(2) == 0 {
					qs[0], qs[1] = qs[1], qs[0]
				}
				max := 1 + rng.IntN(6)
				var got [2][]string
				for e, s := range engines {
					ts, err := s.ReserveQueues(ctx, qs, max, 0)
					if err != nil {
						fail("%s: reserve %v max %d: %v", names[e], qs, max, err)
					}
					for _, tk := range ts {
						got[e] = append(got[e], fmt.Sprintf("%s/%s(%q p%d)", tk.Queue, tk.ID, tk.Key, tk.Priority))
						if err := s.Ack(ctx, tk.Queue, tk.ID, tk.Lease); err != nil {
							fail("%s: ack %s: %v", names[e], tk.ID, err)
						}
					}
				}
				log = append(log, fmt.Sprintf("%d: reserve %v max %d: %v", step, qs, max, got[0]))
				if !slices.Equal(got[0], got[1]) {
					fail("%s handed out %v\n%s handed out %v", names[0], got[0], names[1], got[1])
				}
			}
		}
	}
}
