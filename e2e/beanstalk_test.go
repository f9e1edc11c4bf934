package e2e_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/internal/pgtest"
)

// bsConn is a beanstalkd protocol connection for the test.
type bsConn struct {
	t *testing.T
	c net.Conn
	r *bufio.Reader
}

func dialBeanstalk(t *testing.T, addr string) *bsConn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &bsConn{t: t, c: c, r: bufio.NewReader(c)}
}

// cmd sends line (and body, if not nil) and returns the reply line and,
// for replies that carry one, the body.
func (b *bsConn) cmd(line string, body []byte) (string, []byte) {
	b.t.Helper()
	b.c.SetDeadline(time.Now().Add(10 * time.Second))
	msg := line + "\r\n"
	if body != nil {
		msg += string(body) + "\r\n"
	}
	if _, err := b.c.Write([]byte(msg)); err != nil {
		b.t.Fatalf("%s: %v", line, err)
	}
	reply, err := b.r.ReadString('\n')
	if err != nil {
		b.t.Fatalf("%s: %v", line, err)
	}
	reply = strings.TrimSuffix(reply, "\r\n")
	f := strings.Fields(reply)
	if len(f) >= 2 && (f[0] == "RESERVED" || f[0] == "FOUND" || f[0] == "OK") {
		n, _ := strconv.Atoi(f[len(f)-1])
		data := make([]byte, n+2)
		if _, err := io.ReadFull(b.r, data); err != nil {
			b.t.Fatalf("%s: body: %v", line, err)
		}
		return reply, data[:n]
	}
	return reply, nil
}

// TestBeanstalk_SurvivesKill puts jobs over the beanstalkd protocol, kills
// the server with SIGKILL, restarts it, and finds every job that was
// answered INSERTED: over the protocol and over HTTP by its job id.
func TestBeanstalk_SurvivesKill(t *testing.T) { engines(t, testBeanstalk_SurvivesKill) }

func testBeanstalk_SurvivesKill(t *testing.T) {
	t.Parallel()
	baddr := freeAddr(t)
	s := startServer(t, withFlags("--beanstalk", baddr))
	c := dialBeanstalk(t, baddr)
	if r, _ := c.cmd("use orders", nil); r != "USING orders" {
		t.Fatalf("use: %q", r)
	}
	var ids []string
	for i := range 50 {
		delay := 0
		if i%2 == 1 {
			delay = 3600
		}
		r, _ := c.cmd(fmt.Sprintf("put %d %d 60 %d", i, delay, len(fmt.Sprint("job-", i))), []byte(fmt.Sprint("job-", i)))
		id, ok := strings.CutPrefix(r, "INSERTED ")
		if !ok {
			t.Fatalf("put %d: %q", i, r)
		}
		ids = append(ids, id)
	}
	s.kill()
	s.start()
	c = dialBeanstalk(t, baddr)
	for i, id := range ids {
		r, body := c.cmd("peek "+id, nil)
		if r != "FOUND "+id+" "+strconv.Itoa(len(body)) || string(body) != fmt.Sprint("job-", i) {
			t.Fatalf("job %s after SIGKILL: %q %q", id, r, body)
		}
		if a := s.call("GET", "/v1/queues/orders/tasks/"+id, ""); a.status != 200 || !strings.Contains(string(a.body), `"job_id":`+id) {
			t.Fatalf("job %s over HTTP: %v", id, a)
		}
	}
	c.cmd("watch orders", nil)
	r, body := c.cmd("reserve-with-timeout 0", nil)
	if r != "RESERVED "+ids[0]+" 5" || string(body) != "job-0" {
		t.Fatalf("reserve after restart: %q %q", r, body)
	}
	if r, _ := c.cmd("delete "+ids[0], nil); r != "DELETED" {
		t.Fatalf("delete: %q", r)
	}
	if a := s.call("GET", "/v1/queues/orders/tasks/"+ids[0], ""); a.status != 200 || !strings.Contains(string(a.body), `"state":"finished"`) {
		t.Fatalf("deleted job over HTTP: %v; want its finished record", a)
	}
}

// TestBeanstalk_Cluster runs two nodes of a cluster on one PostgreSQL
// database, each `hourglass serve --postgres URL --beanstalk ADDR`: a job
// put over the protocol on one node is there on the other as soon as it
// is INSERTED, and is reserved and acked over HTTP there; a task put over
// HTTP on one is reserved and deleted over the protocol on the other; and
// the job a node held when it was killed with SIGKILL is handed out by
// the other once its TTR runs out.
func TestBeanstalk_Cluster(t *testing.T) {
	t.Parallel()
	url := pgtest.Start(t).CreateDatabase(t)
	baddrA, baddrB := freeAddr(t), freeAddr(t)
	a := startServer(t, withPostgres(url, "a"), withFlags("--beanstalk", baddrA, "--lease", "1s"))
	b := startServer(t, withPostgres(url, "b"), withFlags("--beanstalk", baddrB, "--lease", "1s"))
	ca, cb := dialBeanstalk(t, baddrA), dialBeanstalk(t, baddrB)
	for _, c := range []*bsConn{ca, cb} {
		if r, _ := c.cmd("use jobs", nil); r != "USING jobs" {
			t.Fatalf("use: %q", r)
		}
		if r, _ := c.cmd("watch jobs", nil); r != "WATCHING 2" {
			t.Fatalf("watch: %q", r)
		}
	}

	// Put on a; INSERTED means committed: b finds it at once.
	r, _ := ca.cmd("put 0 0 60 7", []byte(`{"n":1}`))
	id, ok := strings.CutPrefix(r, "INSERTED ")
	if !ok {
		t.Fatalf("put on a: %q", r)
	}
	if r, body := cb.cmd("peek "+id, nil); r != "FOUND "+id+" 7" || string(body) != `{"n":1}` {
		t.Fatalf("peek on b right after INSERTED on a: %q %q", r, body)
	}
	// Reserved and acked over HTTP on b.
	ts, err := b.client().Reserve(context.Background(), "jobs", 1, time.Second)
	if err != nil || len(ts) != 1 || strconv.FormatUint(ts[0].JobID, 10) != id || ts[0].ID != id {
		t.Fatalf("reserve over HTTP on b: %+v, %v; want job %s", ts, err, id)
	}
	if err := b.client().Ack(context.Background(), "jobs", ts[0].ID, ts[0].Lease); err != nil {
		t.Fatal(err)
	}
	if r, _ := ca.cmd("peek "+id, nil); r != "NOT_FOUND" {
		t.Fatalf("peek on a after the ack on b: %q", r)
	}

	// Put over HTTP on b, reserved and deleted over the protocol on a.
	if a := b.call("POST", "/v1/queues/jobs/tasks", `{"id":"h1","payload":"hi"}`); a.status != 201 {
		t.Fatalf("put over HTTP on b: %v", a)
	}
	r, body := ca.cmd("reserve-with-timeout 5", nil)
	hid, _, _ := strings.Cut(strings.TrimPrefix(r, "RESERVED "), " ")
	if !strings.HasPrefix(r, "RESERVED ") || string(body) != `"hi"` {
		t.Fatalf("reserve on a: %q %q", r, body)
	}
	if r, _ := ca.cmd("delete "+hid, nil); r != "DELETED" {
		t.Fatalf("delete on a: %q", r)
	}
	if a := a.call("GET", "/v1/queues/jobs/tasks/h1", ""); a.status != 200 || !strings.Contains(string(a.body), `"state":"finished"`) {
		t.Fatalf("task deleted over the protocol, over HTTP: %v; want its finished record", a)
	}

	// a holds a job with a TTR of 2 s and is killed: b gets it once the
	// lease runs out (and a's partitions are taken over).
	r, _ = cb.cmd("put 0 0 2 1", []byte("k"))
	kid, ok := strings.CutPrefix(r, "INSERTED ")
	if !ok {
		t.Fatalf("put on b: %q", r)
	}
	if r, _ := ca.cmd("reserve-with-timeout 5", nil); r != "RESERVED "+kid+" 1" {
		t.Fatalf("reserve on a: %q", r)
	}
	a.kill()
	start := time.Now()
	r, _ = cb.cmd("reserve-with-timeout 9", nil)
	if r != "RESERVED "+kid+" 1" {
		t.Fatalf("reserve on b after a was killed: %q (after %v)", r, time.Since(start))
	}
	if r, _ := cb.cmd("stats-job "+kid, nil); !strings.Contains(r, "OK") {
		t.Fatalf("stats-job: %q", r)
	}
	if r, _ := cb.cmd("delete "+kid, nil); r != "DELETED" {
		t.Fatalf("delete on b: %q", r)
	}
	t.Logf("the job a held was handed out by b %v after a's SIGKILL", time.Since(start).Round(time.Millisecond))
}
