package beanstalk_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	gobeanstalk "github.com/beanstalkd/go-beanstalk"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/hourglass-go/hourglass/api"
	"github.com/hourglass-go/hourglass/beanstalk"
	hgclient "github.com/hourglass-go/hourglass/client"
	"github.com/hourglass-go/hourglass/cluster"
	"github.com/hourglass-go/hourglass/httpapi"
	"github.com/hourglass-go/hourglass/service"
)

var _ service.Engine = (*cluster.Node)(nil)

// twoNodes serves the protocol from two nodes of one cluster, on one
// database, and HTTP from each: what one node does, the other sees.
type twoNodes struct {
	a, b         *testServer
	httpA, httpB *hgclient.Client
}

func startTwoNodes(t *testing.T) *twoNodes {
	t.Helper()
	url := clusterDB(t)
	var tn twoNodes
	var https []*hgclient.Client
	for _, name := range []string{"a", "b"} {
		n, _ := openNode(t, url, name)
		ts := serve(t, n, beanstalk.Options{})
		hs := httpapi.New(httpapi.Options{Gatherer: prometheus.NewRegistry(), Logger: quiet})
		hs.SetService(ts.b)
		web := httptest.NewServer(hs)
		t.Cleanup(web.Close)
		c, err := hgclient.New(web.URL, hgclient.Options{})
		if err != nil {
			t.Fatal(err)
		}
		https = append(https, c)
		if name == "a" {
			tn.a = ts
		} else {
			tn.b = ts
		}
	}
	tn.httpA, tn.httpB = https[0], https[1]
	return &tn
}

// TestCluster_TwoNodes drives two nodes of a cluster with go-beanstalk
// and the HTTP client: a job put on one node is reserved, released,
// buried, kicked, timed out and deleted through the other, a pause holds
// on both, both report the same counts, and a job is the same task over
// either protocol on either node.
func TestCluster_TwoNodes(t *testing.T) {
	t.Parallel()
	tn := startTwoNodes(t)
	ctx := context.Background()

	t.Run("PutReserveDelete", func(t *testing.T) {
		ca, cb := goClient(t, tn.a.addr), goClient(t, tn.b.addr)
		id, err := gobeanstalk.NewTube(ca, "prd").Put([]byte("hello"), 1, 0, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		ws := gobeanstalk.NewTubeSet(cb, "prd")
		got, body, err := ws.Reserve(time.Second)
		if err != nil || got != id || string(body) != "hello" {
			t.Fatalf("Reserve on b = %d, %q, %v; want %d, hello", got, body, err, id)
		}
		if err := ca.Delete(id); !is(err, gobeanstalk.ErrNotFound) {
			t.Fatalf("Delete on a of a job b holds: %v, want not found", err)
		}
		if err := cb.Delete(id); err != nil {
			t.Fatal(err)
		}
		if _, err := ca.Peek(id); !is(err, gobeanstalk.ErrNotFound) {
			t.Fatalf("Peek on a after the delete on b: %v, want not found", err)
		}
	})

	t.Run("Delay", func(t *testing.T) {
		ca, cb := goClient(t, tn.a.addr), goClient(t, tn.b.addr)
		start := time.Now()
		id, err := gobeanstalk.NewTube(ca, "delay").Put([]byte("later"), 0, time.Second, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		ws := gobeanstalk.NewTubeSet(cb, "delay")
		if _, _, err := ws.Reserve(0); !is(err, gobeanstalk.ErrTimeout) {
			t.Fatalf("Reserve before the delay: %v, want timeout", err)
		}
		got, _, err := ws.Reserve(5 * time.Second)
		if err != nil || got != id {
			t.Fatalf("Reserve = %d, %v; want %d", got, err, id)
		}
		if since := time.Since(start); since < time.Second {
			t.Fatalf("reserved %v after the put, before the delay of 1s", since)
		}
		if err := cb.Delete(id); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("ReleaseBuryKick", func(t *testing.T) {
		ca, cb := goClient(t, tn.a.addr), goClient(t, tn.b.addr)
		tube := gobeanstalk.NewTube(ca, "rbk")
		id, err := tube.Put([]byte("x"), 5, 0, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		wb, wa := gobeanstalk.NewTubeSet(cb, "rbk"), gobeanstalk.NewTubeSet(ca, "rbk")
		if got, _, err := wb.Reserve(time.Second); err != nil || got != id {
			t.Fatalf("Reserve on b = %d, %v", got, err)
		}
		if err := cb.Release(id, 3, time.Second); err != nil {
			t.Fatal(err)
		}
		if _, _, err := wa.Reserve(0); !is(err, gobeanstalk.ErrTimeout) {
			t.Fatalf("Reserve on a during the release's delay: %v, want timeout", err)
		}
		if got, _, err := wa.Reserve(5 * time.Second); err != nil || got != id {
			t.Fatalf("Reserve on a after the release = %d, %v", got, err)
		}
		if err := ca.Bury(id, 9); err != nil {
			t.Fatal(err)
		}
		if got, _, err := gobeanstalk.NewTube(cb, "rbk").PeekBuried(); err != nil || got != id {
			t.Fatalf("PeekBuried on b = %d, %v", got, err)
		}
		st, err := cb.StatsJob(id)
		if err != nil || st["state"] != "buried" || st["pri"] != "9" || st["releases"] != "1" || st["buries"] != "1" || st["reserves"] != "2" {
			t.Fatalf("StatsJob on b: %v, %v", st, err)
		}
		if n, err := gobeanstalk.NewTube(cb, "rbk").Kick(10); err != nil || n != 1 {
			t.Fatalf("Kick on b = %d, %v", n, err)
		}
		if got, _, err := wa.Reserve(time.Second); err != nil || got != id {
			t.Fatalf("Reserve on a after the kick = %d, %v", got, err)
		}
		if err := ca.Delete(id); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("TTR", func(t *testing.T) {
		ca, cb := goClient(t, tn.a.addr), goClient(t, tn.b.addr)
		id, err := gobeanstalk.NewTube(ca, "ttr").Put([]byte("t"), 0, 0, 2*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		wa, wb := gobeanstalk.NewTubeSet(ca, "ttr"), gobeanstalk.NewTubeSet(cb, "ttr")
		if got, _, err := wa.Reserve(time.Second); err != nil || got != id {
			t.Fatalf("Reserve on a = %d, %v", got, err)
		}
		if err := ca.Touch(id); err != nil {
			t.Fatal(err)
		}
		// a lets the lease run out; b gets the job then.
		got, _, err := wb.Reserve(10 * time.Second)
		if err != nil || got != id {
			t.Fatalf("Reserve on b after the TTR = %d, %v", got, err)
		}
		st, err := ca.StatsJob(id)
		if err != nil || st["timeouts"] != "1" || st["state"] != "reserved" {
			t.Fatalf("StatsJob on a: %v, %v", st, err)
		}
		if err := ca.Delete(id); !is(err, gobeanstalk.ErrNotFound) {
			t.Fatalf("Delete on a of the job it lost: %v, want not found", err)
		}
		if err := cb.Delete(id); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("PauseAndStats", func(t *testing.T) {
		ca, cb := goClient(t, tn.a.addr), goClient(t, tn.b.addr)
		tube := gobeanstalk.NewTube(ca, "stats")
		var ids []uint64
		for i, delay := range []time.Duration{0, 0, time.Hour} {
			id, err := tube.Put([]byte(strconv.Itoa(i)), uint32(i), delay, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, id)
		}
		paused := time.Now()
		if err := gobeanstalk.NewTube(cb, "stats").Pause(time.Second); err != nil {
			t.Fatal(err)
		}
		wa := gobeanstalk.NewTubeSet(ca, "stats")
		if _, _, err := wa.Reserve(0); !is(err, gobeanstalk.ErrTimeout) {
			t.Fatalf("Reserve on a of a tube paused on b: %v, want timeout", err)
		}
		for _, c := range []*gobeanstalk.Conn{ca, cb} {
			st, err := gobeanstalk.NewTube(c, "stats").Stats()
			if err != nil || st["current-jobs-ready"] != "2" || st["current-jobs-delayed"] != "1" ||
				st["current-jobs-urgent"] != "2" || st["cmd-pause-tube"] != "1" {
				t.Fatalf("stats-tube: %v, %v", st, err)
			}
		}
		got, _, err := wa.Reserve(5 * time.Second)
		if err != nil || got != ids[0] {
			t.Fatalf("Reserve on a after the pause = %d, %v; want %d", got, err, ids[0])
		}
		if since := time.Since(paused); since < time.Second {
			t.Fatalf("reserved %v after the pause of 1s began", since)
		}
		st, err := cb.Stats()
		if err != nil || st["current-jobs-reserved"] == "0" || st["current-jobs-delayed"] == "0" {
			t.Fatalf("stats on b: %v, %v", st, err)
		}
		for _, id := range ids {
			if err := cb.Delete(id); err != nil && id != ids[0] {
				t.Fatalf("Delete %d on b: %v", id, err)
			}
		}
		if err := ca.Delete(ids[0]); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("BeanstalkToHTTP", func(t *testing.T) {
		ca := goClient(t, tn.a.addr)
		id, err := gobeanstalk.NewTube(ca, "cross").Put([]byte(`{"n":1}`), 0, 0, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		ts, err := tn.httpB.Reserve(ctx, "cross", 1, time.Second)
		if err != nil || len(ts) != 1 || ts[0].JobID != id || ts[0].ID != strconv.FormatUint(id, 10) || string(ts[0].Payload) != `{"n":1}` {
			t.Fatalf("reserve over HTTP on b = %+v, %v; want job %d", ts, err, id)
		}
		if err := tn.httpB.Ack(ctx, "cross", ts[0].ID, ts[0].Lease); err != nil {
			t.Fatal(err)
		}
		if _, err := ca.Peek(id); !is(err, gobeanstalk.ErrNotFound) {
			t.Fatalf("Peek on a after the ack on b: %v, want not found", err)
		}
	})

	t.Run("HTTPToBeanstalk", func(t *testing.T) {
		put, _, err := tn.httpA.Put(ctx, "cross2", api.PutRequest{ID: "h1", Payload: json.RawMessage(`"hi"`)})
		if err != nil {
			t.Fatal(err)
		}
		cb := goClient(t, tn.b.addr)
		got, body, err := gobeanstalk.NewTubeSet(cb, "cross2").Reserve(time.Second)
		if err != nil || got != put.JobID || string(body) != `"hi"` {
			t.Fatalf("Reserve on b = %d, %q, %v; want %d", got, body, err, put.JobID)
		}
		if err := cb.Delete(got); err != nil {
			t.Fatal(err)
		}
		if tk, err := tn.httpA.Get(ctx, "cross2", "h1"); err == nil && tk.State != api.StateFinished {
			t.Fatalf("the task deleted over beanstalkd on b is still there over HTTP on a: %+v", tk)
		}
	})
}
