package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// The serve scenario's workload, over plain net/http with request bodies
// made in advance, so that the clients, which share the machine with the
// server, spend as little CPU as they can.
const (
	// servePayloadLen is a payload's length in its JSON form: a string of
	// 198 random letters and digits in quotes, different for every task
	// of a body, so that the store's compression (Snappy) finds nothing to
	// shrink and its size on disk is that of real payloads.
	servePayloadLen = 200
	// serveFarDelay keeps the pending tasks pending for the whole run.
	serveFarDelay = "1h"
	// serveBatch is the tasks per tasks:batch request.
	serveBatch = 100
	// serveBodies is how many different request bodies of each kind the
	// clients take turns with: a store block (32 KiB) holds about a
	// hundred tasks, so a payload comes back only in another block.
	serveBodies = 16
)

// serveBodySet holds the request bodies of the far puts.
type serveBodySet struct {
	tasks   [][]byte // one far put each, alone
	batches [][]byte // serveBatch far puts each, as a tasks:batch body
}

// serveBodyset makes the bodies once, from a fixed seed.
var serveBodyset = sync.OnceValue(func() serveBodySet {
	rng := rand.New(rand.NewPCG(1, 2))
	var out serveBodySet
	for range serveBodies * serveBatch {
		out.tasks = append(out.tasks, []byte(serveTaskJSON(servePayload(rng))))
	}
	for i := range serveBodies {
		out.batches = append(out.batches, serveBatchJSON(out.tasks[i*serveBatch:(i+1)*serveBatch]))
	}
	return out
})

// dueBatchJSON returns a tasks:batch body of k tasks with payloads from
// rng, falling due evenly over span from start (the i-th at
// start + i·span/k).
func dueBatchJSON(rng *rand.Rand, start time.Time, span time.Duration, k int) []byte {
	var b strings.Builder
	b.WriteString(`{"tasks":[`)
	for i := range k {
		if i > 0 {
			b.WriteByte(',')
		}
		due := start.Add(time.Duration(i) * span / time.Duration(k))
		fmt.Fprintf(&b, `{"payload":%s,"at":"%s"}`, servePayload(rng), due.UTC().Format(time.RFC3339Nano))
	}
	b.WriteString(`]}`)
	return []byte(b.String())
}

// servePayload returns a random payload of servePayloadLen bytes as JSON.
func servePayload(rng *rand.Rand) string {
	const letters = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, servePayloadLen)
	b[0], b[len(b)-1] = '"', '"'
	for i := 1; i < len(b)-1; i++ {
		b[i] = letters[rng.IntN(len(letters))]
	}
	return string(b)
}

// serveTaskJSON returns a far put of payload (JSON).
func serveTaskJSON(payload string) string {
	return `{"payload":` + payload + `,"delay":"` + serveFarDelay + `"}`
}

// serveBatchJSON returns a tasks:batch body of tasks.
func serveBatchJSON(tasks [][]byte) []byte {
	return append(append([]byte(`{"tasks":[`), bytes.Join(tasks, []byte(","))...), "]}"...)
}

// errBatchItem is returned when a batch answers 200 with a refused item.
var errBatchItem = errors.New("bench: a batch item was refused")

// post sends body to path and reads the whole answer, failing unless
// the status is want.
func (p *serveProcess) post(ctx context.Context, path string, body []byte, want int) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.url(path), bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := p.hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != want {
		return nil, fmt.Errorf("POST %s: %d %s", path, resp.StatusCode, bytes.TrimSpace(answer))
	}
	return answer, nil
}

// putBatch puts a batch body and checks that no item was refused: the
// payloads hold no "error", so the word is only in a refusal.
func (p *serveProcess) putBatch(ctx context.Context, queue string, body []byte) error {
	answer, err := p.post(ctx, "/v1/queues/"+queue+"/tasks:batch", body, http.StatusOK)
	if err != nil {
		return err
	}
	if bytes.Contains(answer, []byte(`"error"`)) {
		return fmt.Errorf("%w: %.300s", errBatchItem, answer)
	}
	return nil
}

// throughput is what a timed load measured.
type throughput struct {
	tasksPerSec   float64
	tasksPerFsync float64
	cpuPerTask    time.Duration // the server's CPU time (user+system) per task
	p50, p99      time.Duration // request latency
}

// Phases of a timed load.
const (
	phaseWarm int32 = iota
	phaseMeasure
	phaseStop
)

// timedPuts runs clients goroutines that each call put over and over,
// each call putting perCall tasks: a warm-up of a fifth of d, then d
// measured. Tasks per fsync come from the server's
// hourglass_store_tasks_per_commit histogram over the measured part.
func (p *serveProcess) timedPuts(put func(context.Context) error, perCall, clients int, d time.Duration) (throughput, error) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var (
		phase    atomic.Int32
		done     atomic.Int64
		firstErr error
		errOnce  sync.Once
		wg       sync.WaitGroup
	)
	lat := make([][]time.Duration, clients)
	for i := range clients {
		wg.Go(func() {
			for phase.Load() != phaseStop {
				t0 := time.Now()
				if err := put(ctx); err != nil {
					if phase.Load() != phaseStop {
						errOnce.Do(func() { firstErr = err; cancel() })
					}
					return
				}
				if phase.Load() == phaseMeasure {
					done.Add(int64(perCall))
					lat[i] = append(lat[i], time.Since(t0))
				}
			}
		})
	}
	names := []string{"hourglass_store_tasks_per_commit_sum", "hourglass_store_tasks_per_commit_count", "process_cpu_seconds_total"}
	var m0, m1 map[string]float64
	var t0, t1 time.Time
	var err error
	sleep(ctx, d/5)
	if m0, err = p.metrics(names...); err == nil {
		t0 = time.Now()
		phase.Store(phaseMeasure)
		sleep(ctx, d)
		phase.Store(phaseStop)
		t1 = time.Now()
		m1, err = p.metrics(names...)
	}
	phase.Store(phaseStop)
	wg.Wait()
	if firstErr != nil {
		return throughput{}, p.withState(firstErr)
	}
	if err != nil {
		return throughput{}, p.withState(err)
	}
	all := slices.Concat(lat...)
	slices.Sort(all)
	commits := m1[names[1]] - m0[names[1]]
	return throughput{
		tasksPerSec:   float64(done.Load()) / t1.Sub(t0).Seconds(),
		tasksPerFsync: (m1[names[0]] - m0[names[0]]) / max(commits, 1),
		cpuPerTask:    cpuPer(m1[names[2]]-m0[names[2]], done.Load()),
		p50:           durationAt(all, 0.50),
		p99:           durationAt(all, 0.99),
	}, nil
}

// cpuPer returns seconds of CPU time shared out over n tasks.
func cpuPer(seconds float64, n int64) time.Duration {
	return time.Duration(seconds / float64(max(n, 1)) * float64(time.Second))
}

// sleep waits for d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-time.After(d):
	case <-ctx.Done():
	}
}

// withState adds to err that the server has exited, if it has.
func (p *serveProcess) withState(err error) error {
	if e := p.alive(); e != nil {
		return fmt.Errorf("%w; %w", err, e)
	}
	return err
}

// serveFillers is how many clients put batches concurrently to fill the
// store.
const serveFillers = 8

// fill puts n far tasks into queue "pending" in batches of serveBatch from
// serveFillers clients, within timeout, and returns the rate.
func (p *serveProcess) fill(n int, timeout time.Duration) (float64, error) {
	return p.fillQueue("pending", n, serveBodyset(), serveFillers, timeout)
}

// fillQueue puts n tasks into queue by fillers clients at once, each
// taking the next batch of bodies' size, in turns through bodies.batches
// (the last batch cut from bodies.tasks), within timeout, and returns the
// rate. The first put refused or not answered stops the fill and is
// returned, with the server's state.
func (p *serveProcess) fillQueue(queue string, n int, bodies serveBodySet, fillers int, timeout time.Duration) (float64, error) {
	if n <= 0 {
		return 0, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	batch := len(bodies.tasks) / len(bodies.batches)
	var next atomic.Int64
	var firstErr error
	var errOnce sync.Once
	var wg sync.WaitGroup
	start := time.Now()
	for range fillers {
		wg.Go(func() {
			for {
				from := int(next.Add(int64(batch))) - batch
				if from >= n {
					return
				}
				body := bodies.batches[from/batch%len(bodies.batches)]
				if k := n - from; k < batch {
					body = serveBatchJSON(bodies.tasks[:k])
				}
				if err := p.putBatch(ctx, queue, body); err != nil {
					errOnce.Do(func() { firstErr = err; cancel() })
					return
				}
			}
		})
	}
	wg.Wait()
	if firstErr != nil {
		if ctx.Err() == context.DeadlineExceeded {
			return 0, fmt.Errorf("putting %d tasks took more than %v", n, timeout)
		}
		return 0, p.withState(firstErr)
	}
	return float64(n) / time.Since(start).Seconds(), nil
}

// delivery is what the lateness load measured.
type delivery struct {
	total     int             // tasks put
	late      []time.Duration // answer received minus due, sorted; one per task delivered
	early     int             // answers received before a task's due time
	perSec    float64         // deliveries per second, first to last
	putsAfter int             // tasks whose put was answered after their due time
	putsLost  int             // tasks whose put had no answer by the deadline
	unacked   int             // tasks delivered but not acked by the acks' deadline
}

// Shape of the lateness load.
const (
	serveReservers  = 4   // long-polling reservers
	serveReserveMax = 100 // max of each reserve
	serveAckers     = 64  // goroutines sending acks, each on its connection
	// serveLead is how long before its due time a task is put: far more
	// than a batch put takes, so that the put's own latency is not
	// counted as lateness.
	serveLead = 500 * time.Millisecond
	// serveStreamBatch tasks are put per request, their due times spread
	// evenly over the interval the batch covers.
	serveStreamBatch = 100
	// serveDrain bounds the wait for the last deliveries and acks.
	serveDrain = 15 * time.Second
)

// reserved is a task as reserve answers it, the fields the load reads.
type reserved struct {
	ID    string    `json:"id"`
	Lease string    `json:"lease"`
	Due   time.Time `json:"due"`
}

// lateness puts a stream of tasks into queue "due", rate per second for
// d, each put serveLead before its due time, while serveReservers
// goroutines long-poll reserve (max serveReserveMax) and hand every task
// to serveAckers goroutines that ack it. Lateness is the time the
// reserve's answer was read minus the task's due time.
//
// A server that falls behind is measured, not failed: deliveries stop
// being awaited serveDrain after the last due time, acks serveDrain after
// that, and the result counts what did not happen by then. Only a
// refused request or a broken connection is an error.
func (p *serveProcess) lateness(rate int, d time.Duration) (delivery, error) {
	total := max(int(float64(rate)*d.Seconds()), 1)
	deadline := time.Now().Add(serveLead + d + serveDrain)
	// ctx bounds the stream and the reserves, actx the acks.
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	actx, acancel := context.WithDeadline(context.Background(), deadline.Add(serveDrain))
	defer acancel()
	var (
		firstErr  error
		errOnce   sync.Once
		delivered atomic.Int64
		acked     atomic.Int64
		putsAfter atomic.Int64
		putsLost  atomic.Int64
	)
	fail := func(err error) { errOnce.Do(func() { firstErr = err; cancel(); acancel() }) }
	// allIn is closed, and the reserves still waiting cancelled, once
	// every task is delivered.
	allIn := make(chan struct{})
	rctx, rcancel := context.WithCancel(ctx)
	defer rcancel()

	// Acks, each on its own connection: ackers dial theirs before the
	// stream starts.
	acks := make(chan reserved, total)
	var ackers sync.WaitGroup
	for range serveAckers {
		ackers.Go(func() {
			rc := newRawConn(p.addr)
			defer rc.close()
			rc.dial(actx) // before the stream starts; post dials again if this failed
			var body []byte
			for t := range acks {
				body = append(append(append(body[:0], `{"lease":"`...), t.Lease...), `"}`...)
				if _, err := rc.post(actx, "/v1/queues/due/tasks/"+t.ID+"/ack", body, http.StatusNoContent); err != nil {
					if actx.Err() == nil {
						fail(fmt.Errorf("ack: %w", err))
					}
					return
				}
				acked.Add(1)
			}
		})
	}

	// Reservers, waiting before the first task is put.
	lates := make([][]time.Duration, serveReservers)
	var first, last atomic.Int64 // unix ns of the first and last delivery
	var reservers sync.WaitGroup
	reserveBody := []byte(fmt.Sprintf(`{"max":%d,"wait":"1s"}`, serveReserveMax))
	for i := range serveReservers {
		reservers.Go(func() {
			rc := newRawConn(p.addr)
			defer rc.close()
			for rctx.Err() == nil {
				answer, err := rc.post(rctx, "/v1/queues/due/reserve", reserveBody, http.StatusOK)
				got := time.Now()
				if err != nil {
					if rctx.Err() == nil {
						fail(fmt.Errorf("reserve: %w", err))
					}
					return
				}
				var r struct{ Tasks []reserved }
				if err := json.Unmarshal(answer, &r); err != nil {
					fail(fmt.Errorf("reserve: %w", err))
					return
				}
				for _, t := range r.Tasks {
					lates[i] = append(lates[i], got.Sub(t.Due))
					acks <- t
				}
				if n := len(r.Tasks); n > 0 {
					first.CompareAndSwap(0, got.UnixNano())
					last.Store(got.UnixNano())
					if all := delivered.Add(int64(n)); all >= int64(total) && all-int64(n) < int64(total) {
						close(allIn)
						rcancel()
					}
				}
			}
		})
	}

	// The stream: batch k covers due times [start+k·span, start+(k+1)·span)
	// and is put serveLead before the first of them, by a goroutine of its
	// own so that a slow put does not hold back the next.
	span := time.Duration(float64(serveStreamBatch) / float64(rate) * float64(time.Second))
	start := time.Now().Add(serveLead)
	rng := rand.New(rand.NewPCG(3, 4))
	var puts sync.WaitGroup
	for from := 0; from < total && ctx.Err() == nil; from += serveStreamBatch {
		k := min(serveStreamBatch, total-from)
		batchStart := start.Add(time.Duration(from/serveStreamBatch) * span)
		sleep(ctx, time.Until(batchStart.Add(-serveLead)))
		body := dueBatchJSON(rng, batchStart, span, k)
		puts.Go(func() {
			if err := p.putBatch(ctx, "due", body); err != nil {
				if ctx.Err() == nil {
					fail(fmt.Errorf("stream put: %w", err))
				}
				putsLost.Add(int64(k))
				return
			}
			if time.Now().After(batchStart) {
				putsAfter.Add(int64(k))
			}
		})
	}
	puts.Wait()

	select {
	case <-allIn:
	case <-ctx.Done():
	}
	reservers.Wait()
	close(acks)
	ackers.Wait()
	if firstErr != nil {
		return delivery{}, p.withState(firstErr)
	}
	out := delivery{
		total:     total,
		late:      slices.Concat(lates...),
		putsAfter: int(putsAfter.Load()),
		putsLost:  int(putsLost.Load()),
		unacked:   int(delivered.Load() - acked.Load()),
	}
	slices.Sort(out.late)
	for _, l := range out.late {
		if l < 0 {
			out.early++
		}
	}
	if f, l := first.Load(), last.Load(); l > f {
		out.perSec = float64(len(out.late)) / (float64(l-f) / 1e9)
	}
	return out, nil
}

// durationAt returns the p-th percentile of sorted as [percentile] does
// (nearest rank), or 0 if it is empty.
func durationAt(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(p*float64(len(sorted))+0.5) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}
