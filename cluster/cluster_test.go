package cluster_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hourglass-go/hourglass/service"
	"github.com/hourglass-go/hourglass/service/servicetest"
	"github.com/hourglass-go/hourglass/task"
)

// owners reads hourglass_partitions: node → partitions whose lease runs.
func owners(t testing.TB, url string) map[string]int {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT owner, count(*) FROM hourglass_partitions
		WHERE owner IS NOT NULL AND lease_until > clock_timestamp() GROUP BY owner`)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for rows.Next() {
		var o string
		var k int
		if err := rows.Scan(&o, &k); err != nil {
			t.Fatal(err)
		}
		out[o] = k
	}
	return out
}

// TestRebalance: a node alone holds every partition; two joining nodes
// get their shares within a few leases, every partition with exactly one
// owner; a node that leaves has its partitions taken within a lease.
func TestRebalance(t *testing.T) {
	url := server(t).CreateDatabase(t)
	a := startNode(t, url, "a")
	total := a.Partitions()
	if got := len(a.Owned()); got != total {
		t.Fatalf("a alone holds %d of %d partitions", got, total)
	}
	b := startNode(t, url, "b")
	c := startNode(t, url, "c")
	share := (total + 2) / 3
	took := eventually(t, 6*testLease, "three shares", func() bool {
		o := owners(t, url)
		return o["a"]+o["b"]+o["c"] == total && o["a"] >= total-2*share && o["b"] >= total-2*share && o["c"] >= total-2*share
	})
	t.Logf("two nodes joined: balanced %v later (lease %v): %v", took, testLease, owners(t, url))
	seen := map[int]string{}
	for name, n := range map[string]*testNode{"a": a, "b": b, "c": c} {
		for p := range n.Owned() {
			if other, ok := seen[p]; ok {
				t.Fatalf("partition %d held by %s and %s", p, other, name)
			}
			seen[p] = name
		}
	}
	c.Close()
	took = eventually(t, 2*testLease, "c's partitions taken", func() bool {
		o := owners(t, url)
		return o["a"]+o["b"] == total
	})
	t.Logf("c left: its partitions taken %v later", took)
}

// delivery is one reservation seen by a consumer.
type delivery struct {
	id   string
	at   time.Time
	due  time.Time
	node string
}

// TestTakeover: three nodes, producers and consumers on all of them; one
// node is stopped abruptly (no lease released, its connections cut)
// while tasks in its partitions are due. Its partitions are taken over
// within about a lease; every task put is delivered, none early, none
// after it was acked.
func TestTakeover(t *testing.T) {
	url := server(t).CreateDatabase(t)
	nodes := []*testNode{startNode(t, url, "a"), startNode(t, url, "b"), startNode(t, url, "c")}
	total := nodes[0].Partitions()
	eventually(t, 6*testLease, "balanced", func() bool { return len(owners(t, url)) == 3 })
	victim := nodes[2]

	const tasks = 600
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var (
		mu        sync.Mutex
		delivered []delivery
		acked     = map[string]time.Time{}
		violation []string
	)
	var dead atomic.Bool
	var wg sync.WaitGroup
	for i, n := range nodes {
		for range 3 {
			wg.Go(func() {
				for ctx.Err() == nil {
					if n == victim && dead.Load() {
						return
					}
					ts, err := svc(n).Reserve(ctx, "work", 10, 300*time.Millisecond)
					if err != nil {
						if n == victim {
							return
						}
						continue
					}
					now := time.Now()
					for _, tk := range ts {
						mu.Lock()
						delivered = append(delivered, delivery{tk.ID, now, tk.Due, fmt.Sprint(i)})
						if at, ok := acked[tk.ID]; ok {
							violation = append(violation, fmt.Sprintf("%s delivered at %v after its ack at %v", tk.ID, now, at))
						}
						mu.Unlock()
						if err := svc(n).Ack(ctx, "work", tk.ID, tk.Lease); err == nil {
							mu.Lock()
							acked[tk.ID] = time.Now()
							mu.Unlock()
						}
					}
				}
			})
		}
	}

	// Puts spread over the nodes, due between 0.2 s and 3 s from now.
	r := rand.New(rand.NewPCG(1, 2))
	start := time.Now()
	for k := 0; k < tasks; k += 50 {
		var reqs []task.PutRequest
		for j := k; j < k+50; j++ {
			reqs = append(reqs, task.PutRequest{
				ID: fmt.Sprintf("t%d", j), Delay: 200*time.Millisecond + time.Duration(r.Int64N(int64(2800*time.Millisecond))),
				TTR: time.Second,
			})
		}
		for _, res := range nodes[k/50%3].PutBatch(ctx, "work", reqs) {
			if res.Err != nil {
				t.Fatal(res.Err)
			}
		}
	}
	time.Sleep(time.Until(start.Add(time.Second)))
	dead.Store(true)
	victim.crash()
	crashed := time.Now()
	// About one lease; five allow for a loaded machine.
	took := eventually(t, 5*testLease, "victim's partitions taken", func() bool {
		o := owners(t, url)
		return o["a"]+o["b"] == total
	})
	t.Logf("victim crashed: its partitions taken %v later (lease %v)", took, testLease)

	eventually(t, 10*time.Second, "every task acked", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(acked) == tasks
	})
	cancel()
	wg.Wait()
	if len(violation) > 0 {
		t.Fatalf("%d deliveries after an ack, first: %s", len(violation), violation[0])
	}
	var late []time.Duration
	for _, d := range delivered {
		if d.at.Before(d.due) {
			t.Fatalf("%s delivered %v early", d.id, d.due.Sub(d.at))
		}
		if d.due.Before(crashed) || d.due.After(crashed.Add(took+testLease)) {
			late = append(late, d.at.Sub(d.due))
		}
	}
	slices.Sort(late)
	t.Logf("%d deliveries of %d tasks; lateness outside the takeover: p50 %v p99 %v max %v",
		len(delivered), tasks, late[len(late)/2], late[len(late)*99/100], late[len(late)-1])
}

// TestFencing: a node paused past its lease, whose partition another
// took meanwhile, writes nothing when it resumes: the task its wheel
// fired stays as the record has it; it is made ready only once a lease is
// won again, at a new epoch.
func TestFencing(t *testing.T) {
	url := server(t).CreateDatabase(t)
	a := startNode(t, url, "a")
	ctx := context.Background()
	x, _, err := svc(a).Put(ctx, "q", task.PutRequest{ID: "x", Delay: 400 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	p := int(x.JobID % uint64(a.Partitions()))
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)

	a.hooks.Pause()
	var epoch int64
	if err := conn.QueryRow(ctx, `UPDATE hourglass_partitions SET owner = 'thief', epoch = epoch + 1,
		lease_until = clock_timestamp() + interval '1 hour' WHERE partition = $1 RETURNING epoch`, p).Scan(&epoch); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Until(x.Due.Add(200 * time.Millisecond))) // a's wheel fires x meanwhile
	a.hooks.Resume()
	eventually(t, 2*time.Second, "a drops the partition", func() bool {
		_, ok := a.Owned()[p]
		return !ok
	})
	time.Sleep(200 * time.Millisecond)
	var state int16
	var fireAt *int64
	if err := conn.QueryRow(ctx, "SELECT state, fire_at FROM hourglass_tasks WHERE job_id = $1", int64(x.JobID)).Scan(&state, &fireAt); err != nil {
		t.Fatal(err)
	}
	if state != 1 || fireAt == nil {
		t.Fatalf("after a fenced node resumed: state %d fire_at %v; want still delayed (1, set)", state, fireAt)
	}
	if ts, _ := svc(a).Reserve(ctx, "q", 1, 0); len(ts) != 0 {
		t.Fatal("x was delivered through a fenced write")
	}

	// The thief leaves; a wins the lease again at a new epoch and fires x.
	if _, err := conn.Exec(ctx, `UPDATE hourglass_partitions SET owner = NULL, lease_until = '-infinity' WHERE partition = $1`, p); err != nil {
		t.Fatal(err)
	}
	got := servicetest.ReserveOne(t, service.New(a), "q", 3*time.Second)
	if got.ID != "x" {
		t.Fatalf("reserved %s", got.ID)
	}
	if e := a.Owned()[p]; e <= epoch {
		t.Fatalf("a holds partition %d at epoch %d, want above the thief's %d", p, e, epoch)
	}
}

// TestSkew: the nodes' clocks only say when to look. A node that believes
// the database's clock is 2 s ahead fires 2 s early, finds the tasks not
// due by the database's clock and looks again at the right time: none
// early, none late. One that believes it 300 ms behind fires 300 ms late:
// late, never early. The bounds leave room for a loaded machine (a
// median of 114 ms late and a max of 365 ms were seen with the +2 s skew
// under a load average of 16, and an offset measured over slow round
// trips); a node that did not look again would be seconds late.
func TestSkew(t *testing.T) {
	srv := server(t)
	for _, c := range []struct {
		skew             time.Duration
		minLate, maxLate time.Duration
	}{
		{2 * time.Second, 0, 600 * time.Millisecond},
		{-300 * time.Millisecond, 150 * time.Millisecond, 1200 * time.Millisecond},
	} {
		t.Run(fmt.Sprint(c.skew), func(t *testing.T) {
			url := srv.CreateDatabase(t)
			n := startNode(t, url, "skewed")
			n.hooks.Skew(c.skew)
			ctx := context.Background()
			for i := range 20 {
				if _, _, err := svc(n).Put(ctx, "q", task.PutRequest{ID: fmt.Sprint(i), Delay: 300*time.Millisecond + time.Duration(i)*20*time.Millisecond}); err != nil {
					t.Fatal(err)
				}
			}
			var late []time.Duration
			for len(late) < 20 {
				ts, err := svc(n).Reserve(ctx, "q", 20, 3*time.Second)
				if err != nil || len(ts) == 0 {
					t.Fatalf("reserve: %v after %d", err, len(late))
				}
				now := time.Now()
				for _, tk := range ts {
					if now.Before(tk.Due) {
						t.Fatalf("task %s delivered %v early", tk.ID, tk.Due.Sub(now))
					}
					late = append(late, now.Sub(tk.Due))
				}
			}
			sort.Slice(late, func(i, j int) bool { return late[i] < late[j] })
			t.Logf("skew %v: lateness min %v median %v max %v", c.skew, late[0], late[10], late[19])
			if late[0] < c.minLate || late[19] > c.maxLate {
				t.Fatalf("lateness %v..%v, want within %v..%v", late[0], late[19], c.minLate, c.maxLate)
			}
		})
	}
}

// TestScheduleOnce: a schedule fires once per occurrence across three
// nodes, and goes on after the node firing it is stopped abruptly.
func TestScheduleOnce(t *testing.T) {
	url := server(t).CreateDatabase(t)
	nodes := []*testNode{startNode(t, url, "a"), startNode(t, url, "b"), startNode(t, url, "c")}
	eventually(t, 6*testLease, "balanced", func() bool { return len(owners(t, url)) == 3 })
	ctx := context.Background()
	if _, _, err := svc(nodes[0]).SetSchedule(ctx, task.ScheduleSpec{Name: "tick", Cron: "@every 1s", Queue: "cron"}); err != nil {
		t.Fatal(err)
	}
	p := nodes[0].SchedulePartition("tick")
	var owner *testNode
	eventually(t, 2*time.Second, "an owner", func() bool {
		for _, n := range nodes {
			if _, ok := n.Owned()[p]; ok {
				owner = n
				return true
			}
		}
		return false
	})
	seen := map[string]int{}
	var mu sync.Mutex
	collect := func(until time.Time, on *testNode) {
		for time.Now().Before(until) {
			ts, err := svc(on).Reserve(ctx, "cron", 10, 200*time.Millisecond)
			if err != nil {
				t.Error(err)
				return
			}
			for _, tk := range ts {
				mu.Lock()
				seen[tk.ID]++
				mu.Unlock()
				svc(on).Ack(ctx, "cron", tk.ID, tk.Lease)
			}
		}
	}
	survivor := nodes[0]
	if owner == survivor {
		survivor = nodes[1]
	}
	collect(time.Now().Add(2500*time.Millisecond), survivor)
	before := len(seen)
	owner.crash()
	collect(time.Now().Add(3*time.Second), survivor)
	var ids []string
	for id, k := range seen {
		if k != 1 {
			t.Fatalf("occurrence %s delivered %d times", id, k)
		}
		ids = append(ids, id)
	}
	sort.Strings(ids)
	t.Logf("occurrences: %d before the owner's crash, %d in all: %v", before, len(ids), ids)
	if before < 2 || len(ids) < before+2 {
		t.Fatalf("%d occurrences before the crash and %d in all; want ≥ 2 and ≥ 2 more", before, len(ids))
	}
}
