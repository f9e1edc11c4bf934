package e2e_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/api"
	"github.com/hourglass-go/hourglass/internal/blackhole"
)

// The black-box tests of where a server may push (issue 39): the cloud
// metadata endpoints refused in every spelling, the server's own API
// never a target, a target's answer echoed in last_error only where the
// API's callers may read it, and a push endpoint that hangs costing
// only its share of the pusher's slots; on both engines.

// TestPushSafety_Refused: start-up logs the rule in force; a policy
// pushing to a metadata endpoint, in any spelling, or to the server's
// own API is 400 naming the rule and changes nothing; a name resolving to the server's own address is
// refused at the dial, its task failed and nothing put into the server.
func TestPushSafety_Refused(t *testing.T) { engines(t, testPushSafetyRefused) }

func testPushSafetyRefused(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	_, port, _ := net.SplitHostPort(s.addr)
	if want := `"msg":"push targets","rule":"any host but the cloud metadata endpoints and this server's own addresses`; !s.logged(want) {
		t.Errorf("start-up did not log the push rule %s", want)
	}
	const before = `{"max_attempts":3}`
	if a := s.call("PUT", "/v1/queues/q/policy", before); a.status != 200 {
		t.Fatalf("PUT policy: %v", a)
	}
	for _, tc := range []struct{ url, want string }{
		{"http://169.254.169.254/latest/meta-data/", "169.254.0.0/16"},
		{"http://[fe80::1]/", "fe80::/10"},
		{"http://[::ffff:169.254.169.254]/", "169.254.0.0/16"},
		{"http://[fd00:ec2::254]/", "fd00:ec2::254"},
		{"http://100.100.100.200/", "100.100.100.200"},
		{"http://[64:ff9b::a9fe:a9fe]/", "169.254.0.0/16"},
		{"http://[64:ff9b:1::a9fe:a9fe]/", "169.254.0.0/16"},
		{"http://[2002:a9fe:a9fe::]/", "169.254.0.0/16"},
		{"http://metadata.google.internal/computeMetadata/v1/", "metadata"},
		{"http://metadata/", "metadata"},
		{"http://metadata.goog/", "metadata"},
		{"http://0.0.0.0:" + port + "/", "0.0.0.0/8"},
		{"http://[::]:" + port + "/", "::/128"},
		{"http://2852039166/", "169.254.0.0/16"},
		{"http://0xa9fea9fe/", "169.254.0.0/16"},
		{"http://0251.0376.0251.0376/", "169.254.0.0/16"},
		{"http://127.0.0.1:" + port + "/v1/queues/own/tasks", "own address"},
		{"http://127.1:" + port + "/v1/queues/own/tasks", "own address"},
		{"http://2130706433:" + port + "/v1/queues/own/tasks", "own address"},
		{"http://0x7f000001:" + port + "/v1/queues/own/tasks", "own address"},
		{"http://0177.0.0.1:" + port + "/v1/queues/own/tasks", "own address"},
		{"http://[::ffff:127.0.0.1]:" + port + "/v1/queues/own/tasks", "own address"},
	} {
		a := s.call("PUT", "/v1/queues/q/policy", fmt.Sprintf(`{"push":{"url":%q}}`, tc.url))
		var e api.Error
		if a.status != 400 || json.Unmarshal(a.body, &e) != nil || !strings.HasPrefix(e.Error, "hourglass: ") || strings.Count(e.Error, "hourglass: ") != 1 ||
			!strings.Contains(e.Error, "push.url") || !strings.Contains(e.Error, tc.want) {
			t.Errorf("PUT push %s: %v; want 400 naming %s", tc.url, a, tc.want)
		}
		if a := s.call("GET", "/v1/queues/q/policy", ""); !strings.HasPrefix(strings.TrimSpace(string(a.body)), strings.TrimSuffix(before, "}")+`,"effective":`) {
			t.Fatalf("policy after a refused PUT: %v, want %s", a, before)
		}
	}

	// localhost is a name: allowed at the PUT, refused once it resolves
	// to the server's own address.
	setPush(t, s, "loop", fmt.Sprintf(`{"push":{"url":"http://localhost:%s/v1/queues/own/tasks"}}`, port))
	s.call("POST", "/v1/queues/loop/tasks", `{"id":"a","payload":{"id":"planted","payload":1},"max_attempts":1}`)
	if last := waitPushed(t, s, "loop", "a", "dead", 10*time.Second); !strings.Contains(last, "own address") {
		t.Errorf("push to the server's own API through a name: last error %q", last)
	}
	if a := s.call("GET", "/v1/queues/own/tasks/planted", ""); a.status != 404 {
		t.Errorf("a push into the server's own API put a task: %v", a)
	}
}

// TestPushSafety_Echo: a target's failed answer is kept in last_error
// (its start, control characters blanked), and a connection's error,
// when --push-allow names the host exactly; only the status, and that
// the connection failed, when the host is reached through a CIDR: the
// API's callers must not read the network's services or scan its ports.
func TestPushSafety_Echo(t *testing.T) { engines(t, testPushSafetyEcho) }

func testPushSafetyEcho(t *testing.T) {
	t.Parallel()
	rc := newReceiver(t, func(n int, w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(500)
		io.WriteString(w, "secret\r\ninside")
	})
	_, port, _ := net.SplitHostPort(rc.srv.Listener.Addr().String())
	closed := freePort(t)
	for _, tc := range []struct{ allow, want, wantClosed string }{
		{"127.0.0.1", "push: HTTP 500: secret  inside", "push: dial tcp 127.0.0.1:" + closed + ": connect: connection refused"},
		{"127.0.0.0/8", "push: HTTP 500", "push: the connection failed"},
	} {
		s := startServer(t, withFlags("--push-allow", tc.allow))
		setPush(t, s, "echo", fmt.Sprintf(`{"push":{"url":"http://127.0.0.1:%s/"}}`, port))
		s.call("POST", "/v1/queues/echo/tasks", `{"id":"a","payload":1,"max_attempts":1}`)
		if last := waitPushed(t, s, "echo", "a", "dead", 10*time.Second); last != tc.want {
			t.Errorf("--push-allow %s: last error %q, want %q", tc.allow, last, tc.want)
		}
		setPush(t, s, "closed", fmt.Sprintf(`{"push":{"url":"http://127.0.0.1:%s/"}}`, closed))
		s.call("POST", "/v1/queues/closed/tasks", `{"id":"a","payload":1,"max_attempts":1}`)
		if last := waitPushed(t, s, "closed", "a", "dead", 10*time.Second); last != tc.wantClosed {
			t.Errorf("--push-allow %s, a closed port: last error %q, want %q", tc.allow, last, tc.wantClosed)
		}
	}
}

// TestPushSafety_HangingEndpoint: a push queue whose endpoint accepts
// and never answers holds only its share of the server's 128 push slots
// (half of them alone), and a second push queue with a healthy endpoint
// gets its 20 tasks pushed beside it, long before the hanging pushes
// time out.
func TestPushSafety_HangingEndpoint(t *testing.T) { engines(t, testPushSafetyHanging) }

func testPushSafetyHanging(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	hang := blackhole.Start(t)
	ok := newReceiver(t, nil)
	setPush(t, s, "hang", fmt.Sprintf(`{"push":{"url":"http://%s/","timeout":"10m"}}`, hang.Addr()))
	setPush(t, s, "ok", fmt.Sprintf(`{"push":{"url":%q}}`, ok.srv.URL))
	var batch []string
	for i := range 200 {
		batch = append(batch, fmt.Sprintf(`{"id":"h%d","payload":1}`, i))
	}
	if a := s.call("POST", "/v1/queues/hang/tasks:batch", `{"tasks":[`+strings.Join(batch, ",")+`]}`); a.status/100 != 2 {
		t.Fatalf("put batch: %v", a)
	}
	// The hanging queue takes most of its share (a queue near its share
	// waits until a quarter of it is free), then no more.
	const share = 128 / 2
	for deadline := time.Now().Add(30 * time.Second); hang.Count() < share*3/4; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the hanging endpoint got %d pushes in 30 s, want most of its share %d", hang.Count(), share)
		}
	}
	time.Sleep(500 * time.Millisecond)
	start := time.Now()
	for i := range 20 {
		if a := s.call("POST", "/v1/queues/ok/tasks", fmt.Sprintf(`{"id":"k%d","payload":1}`, i)); a.status != 201 {
			t.Fatalf("put: %v", a)
		}
	}
	ok.wait(t, 20, 2*time.Minute) // the hanging pushes time out after 10
	t.Logf("20 tasks pushed beside a hanging endpoint in %v", time.Since(start))
	if n := hang.Count(); n > share {
		t.Errorf("the hanging endpoint got %d pushes at once, more than its share %d", n, share)
	}
}
