package clusterbench

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/hourglass-go/hourglass/cluster"
	"github.com/hourglass-go/hourglass/task"
)

// ackers is the number of goroutines acking deliveries, per node.
const ackers = 16

// lead is how far ahead of its first due time each batch of the due
// stream is put.
const lead = time.Second

// Lateness is what a due stream measured: tasks delivered (of those
// due), how many before their due time, and the lateness (delivered −
// due) of those delivered; and the statements the nodes sent per task
// delivered meanwhile (the stream's puts, the owners' flushes, the
// reservations, the acks, and whatever the nodes did besides).
type Lateness struct {
	Due, Delivered, Early int
	P50, P99, Max         time.Duration
	StatementsPerTask     float64
}

func (l Lateness) String() string {
	return fmt.Sprintf("%d of %d delivered, %d early, p50 %v p99 %v max %v, %.2f statements/task",
		l.Delivered, l.Due, l.Early, l.P50, l.P99, l.Max, l.StatementsPerTask)
}

// sample is one delivered task of a due stream.
type sample struct {
	due  time.Time
	late time.Duration
}

// Lateness runs a due stream on queue: tasks due at rate per second for
// d, each batch of 100 put a second ahead of its due times through the
// nodes in turn, with 4 reservers waiting on every node (max 100, wait
// 1 s) and ackers beside them. Lateness is the time a reserve returned
// minus the task's due time.
func (c *Cluster) Lateness(ctx context.Context, queue string, rate int, d time.Duration) (Lateness, error) {
	s0 := c.Statements()
	samples, dues, err := c.stream(ctx, queue, rate, d, c.live(), 0, nil)
	if err != nil {
		return Lateness{}, err
	}
	l := summarise(samples, len(dues))
	if l.Delivered > 0 {
		l.StatementsPerTask = float64(c.Statements()-s0) / float64(l.Delivered)
	}
	return l, nil
}

// summarise computes the lateness figures of samples.
func summarise(samples []sample, due int) Lateness {
	late := make([]time.Duration, len(samples))
	for i, s := range samples {
		late[i] = s.late
	}
	slices.Sort(late)
	l := Lateness{Due: due, Delivered: len(late)}
	for _, x := range late {
		if x < 0 {
			l.Early++
		}
	}
	if len(late) > 0 {
		l.P50, l.P99, l.Max = late[len(late)/2], late[len(late)*99/100], late[len(late)-1]
	}
	return l
}

// stream puts rate tasks a second due over d through nodes, reserves
// and acks them on nodes, and returns a sample per task delivered and
// the due times of all, waiting up to 10 s plus extra after the last due
// time for stragglers. at, if not nil, is called once, after offset from
// the first due time, on a goroutine of its own.
func (c *Cluster) stream(ctx context.Context, queue string, rate int, d time.Duration, nodes []*cluster.Node,
	offset time.Duration, at func()) ([]sample, []time.Time, error) {
	count := int(d.Seconds() * float64(rate))
	start := time.Now().Add(lead)
	var mu sync.Mutex
	var samples []sample
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// On every node: 4 reservers waiting, and ackers beside them, so that
	// the reservers go back to waiting at once (an ack waits for a WAL
	// flush; a reserver acking its own tasks one by one falls behind
	// thousands a second).
	type acked struct {
		n         *cluster.Node
		id, lease string
	}
	acks := make(chan acked, 100_000)
	var ackWG sync.WaitGroup
	for range ackers * len(nodes) {
		ackWG.Go(func() {
			for a := range acks {
				a.n.AckMany(ctx, []task.Ack{{Queue: queue, ID: a.id, Lease: a.lease}})
			}
		})
	}
	var wg sync.WaitGroup
	defer func() {
		cancel()
		wg.Wait()
		close(acks)
		ackWG.Wait()
	}()
	for _, n := range nodes {
		for range 4 {
			wg.Go(func() {
				for rctx.Err() == nil {
					ts, err := n.ReserveQueues(rctx, []string{queue}, 100, time.Second)
					now := time.Now()
					if err != nil {
						continue
					}
					mu.Lock()
					for _, t := range ts {
						samples = append(samples, sample{t.Due, now.Sub(t.Due)})
					}
					mu.Unlock()
					for _, t := range ts {
						acks <- acked{n, t.ID, t.Lease}
					}
				}
			})
		}
	}
	if at != nil {
		wg.Go(func() {
			select {
			case <-time.After(time.Until(start.Add(offset))):
				at()
			case <-rctx.Done():
			}
		})
	}
	// Put the due tasks in batches of 100, each due at its slot, each
	// batch a lead ahead of its first due time: a steady rate of puts
	// beside the rate falling due.
	step := time.Second / time.Duration(rate)
	dues := make([]time.Time, 0, count)
	for k := 0; k < count; k += 100 {
		first := start.Add(time.Duration(k) * step)
		time.Sleep(time.Until(first.Add(-lead)))
		var reqs []task.PutRequest
		for j := k; j < min(k+100, count); j++ {
			reqs = append(reqs, task.PutRequest{At: start.Add(time.Duration(j) * step)})
			dues = append(dues, reqs[len(reqs)-1].At)
		}
		for _, r := range nodes[k/100%len(nodes)].PutBatch(ctx, queue, reqs) {
			if r.Err != nil {
				return nil, nil, r.Err
			}
		}
	}
	deadline := start.Add(d + 10*time.Second)
	for time.Now().Before(deadline) {
		mu.Lock()
		k := len(samples)
		mu.Unlock()
		if k >= count {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	cancel()
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	return slices.Clone(samples), dues, nil
}
