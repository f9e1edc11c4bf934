package broker_test

import (
	"fmt"
	"testing"

	"github.com/hourglass-go/hourglass/broker"
	"github.com/hourglass-go/hourglass/store/memstore"
	"github.com/hourglass-go/hourglass/task"
)

// BenchmarkBroker_Reserve_Urgent measures a reserve of 32 tasks from a
// queue where one key has a backlog of a higher priority than 10,000
// other keys' tasks, through service.New's front on memstore: each
// reserve's round is that key alone, and the rest of the 32 is a fill of
// its tasks in delivery order (service.KeyCompare's rule), which gathers
// the lanes of that priority only, not the 10,000 others.
func BenchmarkBroker_Reserve_Urgent(b *testing.B) {
	const max, keys = 32, 10_000
	br, err := broker.Open(memstore.New(), broker.Config{Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	defer br.Close()
	put := func(rs []task.PutRequest) {
		for _, r := range br.PutBatch(ctx, "q", rs) {
			if r.Err != nil {
				b.Fatal(r.Err)
			}
		}
	}
	rs := make([]task.PutRequest, 0, 1000)
	for i := range keys {
		rs = append(rs, task.PutRequest{Payload: make([]byte, 200), Key: fmt.Sprint("k", i), Priority: 10})
		if len(rs) == cap(rs) {
			put(rs)
			rs = rs[:0]
		}
	}
	for done := 0; done < b.N*max; done += len(rs) {
		rs = rs[:0]
		for range cap(rs) {
			rs = append(rs, task.PutRequest{Payload: make([]byte, 200), Key: "urgent", Priority: 1})
		}
		put(rs)
	}
	front := svc(br)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if ts, err := front.Reserve(ctx, "q", max, 0); err != nil || len(ts) != max || ts[0].Key != "urgent" {
			b.Fatal(len(ts), err)
		}
	}
}
