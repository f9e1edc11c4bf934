package e2e_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"
)

// freeAddr returns a loopback address with a port free at the time of the
// call, for a server's second listener (the harness learns the HTTP one
// from the log).
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

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
func TestBeanstalk_SurvivesKill(t *testing.T) {
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
	if a := s.call("GET", "/v1/queues/orders/tasks/"+ids[0], ""); a.status != 404 {
		t.Fatalf("deleted job over HTTP: %v", a)
	}
}
