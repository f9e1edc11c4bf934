package servicetest

import (
	"context"
	"reflect"
	"testing"

	"github.com/hourglass-go/hourglass/service"
	"github.com/hourglass-go/hourglass/task"
)

// webhookIdentity: what a push's webhook-id is made of (pusher: "msg_",
// the job id, the creation time) holds on every engine: a task keeps its
// job id and creation time from its put through every attempt; a task put
// again under the same id, after the first is gone or replacing it, has a
// job id never used before; and a push endpoint's secret and next secret
// (a key being rotated) are kept as set.
func webhookIdentity(t *testing.T, b service.Service) {
	ctx := context.Background()
	end := task.Push{URL: "http://127.0.0.1:9/hook", Secret: "whsec_YQ==", NextSecret: "raw next"}
	set, err := b.SetPolicy(ctx, "w", task.Policy{Push: &end})
	must(t, "set a push policy", err)
	got, err := b.Policy(ctx, "w")
	must(t, "read the policy", err)
	for _, p := range []task.Policy{set, got} {
		if p.Push == nil || !reflect.DeepEqual(*p.Push, end) {
			t.Errorf("push endpoint %+v, want %+v", p.Push, end)
		}
	}

	x, _, err := b.Put(ctx, "w", task.PutRequest{ID: "a", Payload: []byte(`1`)})
	must(t, "put a", err)
	used := map[uint64]bool{x.JobID: true}
	for i := range 2 {
		ts, err := b.Reserve(ctx, "w", 1, 0)
		must(t, "reserve a", err)
		if len(ts) != 1 || ts[0].JobID != x.JobID || !ts[0].Created.Equal(x.Created) {
			t.Fatalf("attempt %d: reserved %+v, want job %d created %v", i+1, ts, x.JobID, x.Created)
		}
		if i == 0 {
			_, err = b.Nack(ctx, "w", "a", ts[0].Lease, 0, "again")
			must(t, "nack a", err)
		} else {
			must(t, "ack a", b.Ack(ctx, "w", "a", ts[0].Lease))
		}
	}
	again, _, err := b.Put(ctx, "w", task.PutRequest{ID: "a", Payload: []byte(`2`)})
	must(t, "put a again", err)
	if used[again.JobID] {
		t.Errorf("a put again after its ack has job %d, used before", again.JobID)
	}
	used[again.JobID] = true
	replaced, _, err := b.Put(ctx, "w", task.PutRequest{ID: "a", Payload: []byte(`3`), Replace: true})
	must(t, "replace a", err)
	if used[replaced.JobID] {
		t.Errorf("a replaced has job %d, used before", replaced.JobID)
	}
}
