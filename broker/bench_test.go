package broker_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/broker"
	"github.com/hourglass-go/hourglass/store/memstore"
	"github.com/hourglass-go/hourglass/task"
)

// BenchmarkBroker_Put measures the broker's own cost per put (memstore:
// no disk), through service.New's front (a batch of one), from parallel
// goroutines, delayed an hour.
func BenchmarkBroker_Put(b *testing.B) {
	br, err := broker.Open(memstore.New(), broker.Config{Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	defer br.Close()
	s := svc(br)
	payload := make([]byte, 200)
	b.SetParallelism(32)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, _, err := s.Put(ctx, "q", task.PutRequest{Payload: payload, Delay: time.Hour}); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkBroker_PutBatch measures puts in batches of 100.
func BenchmarkBroker_PutBatch(b *testing.B) {
	br, err := broker.Open(memstore.New(), broker.Config{Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	defer br.Close()
	rs := make([]task.PutRequest, 100)
	for i := range rs {
		rs[i] = task.PutRequest{Payload: make([]byte, 200), Delay: time.Hour}
	}
	b.ResetTimer()
	for b.Loop() {
		for _, r := range br.PutBatch(ctx, "q", rs) {
			if r.Err != nil {
				b.Fatal(r.Err)
			}
		}
	}
	b.ReportMetric(float64(b.N*len(rs))/b.Elapsed().Seconds(), "tasks/s")
}

// BenchmarkBroker_PutReserveAck measures one task's whole life, through
// service.New's front as a client reaches it.
func BenchmarkBroker_PutReserveAck(b *testing.B) {
	eng, err := broker.Open(memstore.New(), broker.Config{Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	defer eng.Close()
	br := svc(eng)
	i := 0
	for b.Loop() {
		i++
		id := fmt.Sprint(i)
		if _, _, err := br.Put(ctx, "q", task.PutRequest{ID: id}); err != nil {
			b.Fatal(err)
		}
		ts, err := br.Reserve(ctx, "q", 1, 0)
		if err != nil || len(ts) != 1 {
			b.Fatal(ts, err)
		}
		if err := br.Ack(ctx, "q", id, ts[0].Lease); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkBroker_ReserveWatch_1000 measures a put handed to a reserver
// waiting on 1,000 queues (a beanstalkd connection watching 1,000
// tubes, task.MaxWatch): the put, the wake, the reserver's look over
// its queues and its wait again, and the ack.
func BenchmarkBroker_ReserveWatch_1000(b *testing.B) {
	br, err := broker.Open(memstore.New(), broker.Config{Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	defer br.Close()
	names := make([]string, task.MaxWatch)
	for i := range names {
		names[i] = fmt.Sprintf("w%d", i)
	}
	got := make(chan task.Task)
	stop := make(chan struct{})
	go func() {
		for {
			t, ok, err := svc(br).ReserveAny(ctx, names, time.Minute)
			if err != nil {
				close(got)
				return
			}
			if ok {
				select {
				case got <- t:
				case <-stop:
					return
				}
			}
		}
	}()
	defer close(stop)
	i := 0
	for b.Loop() {
		i++
		q := names[i%len(names)]
		if _, _, err := svc(br).Put(ctx, q, task.PutRequest{ID: "1"}); err != nil {
			b.Fatal(err)
		}
		t, ok := <-got
		if !ok {
			b.Fatal("reserver stopped")
		}
		if err := svc(br).Ack(ctx, q, "1", t.Lease); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkBroker_ReserveAck_Backlog measures a reserve of one task and
// its ack from a queue of 100,000 ready tasks (memstore), refilled as it
// drains, every task of one key: the ready heap's cost when keys play
// no part. The Keys_100 variant spreads them over 100 keys.
func BenchmarkBroker_ReserveAck_Backlog(b *testing.B) {
	for _, keys := range []int{1, 100} {
		b.Run(fmt.Sprintf("Keys_%d", keys), func(b *testing.B) {
			br, err := broker.Open(memstore.New(), broker.Config{Logger: quiet})
			if err != nil {
				b.Fatal(err)
			}
			defer br.Close()
			const backlog = 100_000
			n := 0
			refill := func(k int) {
				rs := make([]task.PutRequest, 0, task.MaxBatch)
				for range k {
					n++
					r := task.PutRequest{Priority: uint32(n % 3)}
					if keys > 1 {
						r.Key = fmt.Sprintf("k%d", n%keys)
					}
					rs = append(rs, r)
					if len(rs) == cap(rs) {
						for _, res := range br.PutBatch(ctx, "q", rs) {
							if res.Err != nil {
								b.Fatal(res.Err)
							}
						}
						rs = rs[:0]
					}
				}
			}
			refill(backlog)
			left := backlog
			b.ResetTimer()
			for b.Loop() {
				if left == 0 {
					b.StopTimer()
					refill(backlog)
					left = backlog
					b.StartTimer()
				}
				ts, err := svc(br).Reserve(ctx, "q", 1, 0)
				if err != nil || len(ts) != 1 {
					b.Fatal(ts, err)
				}
				left--
				if err := svc(br).Ack(ctx, "q", ts[0].ID, ts[0].Lease); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkBroker_Reserve measures one reserve of one ready task,
// through service.New's front (memstore: no disk; the reservation is not waited for, but the CPU
// time reported, cpu-ns/op, includes committing it), in a queue
// without a rate limit and in one with a rate it never meets, whose
// bucket each reserve writes into the group of its reservation.
func BenchmarkBroker_Reserve(b *testing.B) {
	for _, c := range []struct {
		name   string
		rate   *task.Rate
		keys   int        // tasks put over this many keys, in turn; 0: none
		perKey *task.Rate // a per-key rate (keyrate.go)
	}{
		{"rate=none", nil, 0, nil},
		{"rate=unmet", &task.Rate{Limit: task.MaxRateLimit, Per: time.Millisecond}, 0, nil},
		{"keys=10000/per_key_rate=none", nil, 10_000, nil},
		// A burst no key spends: a bucket a key, taken at each reserve.
		{"keys=10000/per_key_rate=unmet", nil, 10_000, &task.Rate{Limit: 1, Per: time.Hour, Burst: task.MaxRateLimit}},
	} {
		b.Run(c.name, func(b *testing.B) {
			br, err := broker.Open(memstore.New(), broker.Config{Logger: quiet})
			if err != nil {
				b.Fatal(err)
			}
			defer br.Close()
			if c.rate != nil || c.perKey != nil {
				p := task.Policy{Rate: c.rate}
				if c.perKey != nil {
					p.PerKey = &task.PerKey{Rate: c.perKey}
				}
				if _, err := svc(br).SetPolicy(ctx, "q", p); err != nil {
					b.Fatal(err)
				}
			}
			rs := make([]task.PutRequest, 1000)
			for done := 0; done < b.N; done += len(rs) {
				for i := range rs {
					rs[i] = task.PutRequest{Payload: make([]byte, 200)}
					if c.keys > 0 {
						rs[i].Key = fmt.Sprint("k", (done+i)%c.keys)
					}
				}
				for _, r := range br.PutBatch(ctx, "q", rs) {
					if r.Err != nil {
						b.Fatal(r.Err)
					}
				}
			}
			b.ResetTimer()
			cpu := reportCPU(b)
			front := svc(br)
			for range b.N {
				if ts, err := front.Reserve(ctx, "q", 1, 0); err != nil || len(ts) != 1 {
					b.Fatal(ts, err)
				}
			}
			if _, err := br.Policy(ctx, "q"); err != nil { // the reservations committed
				b.Fatal(err)
			}
			cpu()
		})
	}
}

// BenchmarkBroker_Reserve_Many measures a reserve of 32 ready tasks
// (package worker's reserves in the keys scenario carry about 31),
// through service.New's front on memstore, from tasks without a key and
// from tasks over 10,000 keys; an op is one reserve.
func BenchmarkBroker_Reserve_Many(b *testing.B) {
	const max = 32
	for _, keys := range []int{0, 10_000} {
		b.Run(fmt.Sprint("keys=", keys), func(b *testing.B) {
			br, err := broker.Open(memstore.New(), broker.Config{Logger: quiet})
			if err != nil {
				b.Fatal(err)
			}
			defer br.Close()
			rs := make([]task.PutRequest, 1000)
			for done := 0; done < b.N*max; done += len(rs) {
				for i := range rs {
					rs[i] = task.PutRequest{Payload: make([]byte, 200)}
					if keys > 0 {
						rs[i].Key = fmt.Sprint("k", (done+i)%keys)
					}
				}
				for _, r := range br.PutBatch(ctx, "q", rs) {
					if r.Err != nil {
						b.Fatal(r.Err)
					}
				}
			}
			front := svc(br)
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if ts, err := front.Reserve(ctx, "q", max, 0); err != nil || len(ts) != max {
					b.Fatal(len(ts), err)
				}
			}
		})
	}
}
