package e2e_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/internal/tcpproxy"
)

// TestDBCut_LostReserve: a reserve on cluster node n1 whose answer its
// database link loses after PostgreSQL committed it (the proxy forwards
// n1's bytes and drops the database's) answers 503 within --db-timeout,
// and the task it leased, with a TTR of 10 minutes, is ready again at
// once: n2 reserves it within seconds. The node gives it back once the
// link passes (hourglass_cluster_lost_reserves_given_back_total). A
// reserve's connection new to n1 reads its backend before the statement,
// so the muted link may cut that read instead, leasing nothing: the test
// tries up to five times for a lease given back, and every task must come
// back to n2 in time whatever happened.
func TestDBCut_LostReserve(t *testing.T) {
	url, proxied, proxy := proxiedDatabase(t)
	flags := withFlags("--lease", "10s", "--db-timeout", "1s")
	n1 := startServer(t, withPostgres(proxied, "n1"), flags)
	n2 := startServer(t, withPostgres(url, "n2"), flags)
	for i := range 5 {
		id := fmt.Sprintf("t%d", i)
		if a := n2.call("POST", "/v1/queues/q/tasks", `{"id":"`+id+`","ttr":"10m"}`); a.status != http.StatusCreated {
			t.Fatalf("put %s: %v", id, a)
		}
		// A reserve of another queue first, so that the connection the
		// next one takes knows its backend.
		if a := n1.call("POST", "/v1/queues/warm/reserve", `{"max":1}`); a.status != http.StatusOK {
			t.Fatalf("reserve of an empty queue: %v", a)
		}
		proxy.Set(tcpproxy.Mute)
		start := time.Now()
		a, err := n1.try("POST", "/v1/queues/q/reserve", `{"max":1}`, "")
		took := time.Since(start)
		proxy.Set(tcpproxy.Pass)
		if err != nil || a.status != http.StatusServiceUnavailable {
			t.Fatalf("reserve on n1 with its answers dropped: %v %v, want 503", a, err)
		}
		t.Logf("reserve %d on the muted link: %d after %v", i, a.status, took.Round(time.Millisecond))
		back := time.Now()
		for {
			r := n2.call("POST", "/v1/queues/q/reserve", `{"max":1,"wait":"1s"}`)
			var got struct {
				Tasks []struct{ ID, Lease string }
			}
			if err := json.Unmarshal(r.body, &got); r.status != http.StatusOK || err != nil {
				t.Fatalf("reserve on n2: %v", r)
			}
			if len(got.Tasks) == 1 {
				if got.Tasks[0].ID != id {
					t.Fatalf("n2 reserved %s, want %s", got.Tasks[0].ID, id)
				}
				if a := n2.call("POST", "/v1/queues/q/tasks/"+id+"/ack", `{"lease":"`+got.Tasks[0].Lease+`"}`); a.status/100 != 2 {
					t.Fatalf("ack %s: %v", id, a)
				}
				break
			}
			if time.Since(back) > 20*time.Second {
				t.Fatalf("task %s of the lost reserve not ready again within 20 s (its TTR is 10 min)", id)
			}
		}
		t.Logf("task %s reserved on n2 %v after n1's link passed again", id, time.Since(back).Round(time.Millisecond))
		if metricValue(t, n1, "hourglass_cluster_lost_reserves_given_back_total") >= 1 {
			return
		}
	}
	t.Fatal("no reserve on n1 leased its task before the link dropped its answer, in five tries")
}
