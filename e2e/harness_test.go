package e2e_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/api"
	"github.com/hourglass-go/hourglass/client"
	"github.com/hourglass-go/hourglass/internal/apitest"
)

// The harness: TestMain builds `hourglass` once into a temporary
// directory, and a [server] runs it as `hourglass serve` on a loopback
// port, restarting it on the same --data directory as often as a test
// wants. The first start listens on 127.0.0.1:0 and reads the port the
// server took from its "listening" log line (no window in which another
// process could take a port picked in advance); restarts reuse that port,
// so that clients keep their URL across kills.

// Bounds of the harness: how long a server may take to listen, to be
// ready (recovery included), and to exit after SIGTERM (the 15 s)
// or SIGKILL.
const (
	listenTimeout = 10 * time.Second
	readyTimeout  = 30 * time.Second
	stopTimeout   = 15 * time.Second
	killTimeout   = 10 * time.Second
	// logTail bounds how much of each run's log a failing test prints.
	logTail = 16 << 10
)

// server is one `hourglass serve` over one --data directory, run as a
// process at a time: started, stopped, killed and restarted by the test
// goroutine only. Its clients (client, call) are safe for concurrent use
// and keep working across restarts, since the address stays.
type server struct {
	t    testing.TB
	data string // --data; "" with postgres
	// postgres, when set, runs the server as node node of a cluster on
	// that database (--postgres URL --node NAME) instead of over data.
	postgres, node string
	flags          []string // beyond --data, --http and --log-format
	env            []string // beyond the test's environment, without HOURGLASS_TOKEN
	token          string   // what the clients send; the server's comes from flags or env
	addr           string   // HOST:PORT, set by the first start

	transport *http.Transport
	hc        *http.Client

	proc *process   // the running process, or nil
	runs []*process // every process started, oldest first
}

// process is one run of the server.
type process struct {
	cmd     *exec.Cmd
	log     *logBuffer
	started time.Time
	ready   time.Time // when /readyz first answered 200
	// recovering holds what the server answered before it was ready:
	// each /readyz answer other than 200 (up to 100), and, after the first
	// of them, one GET /healthz and one GET /v1/queues.
	recovering []recoveringAnswer
	done       chan struct{} // closed once Wait returned
	err        error         // Wait's error, once done is closed
}

// serverOption changes a server before its first start.
type serverOption func(*server)

// withFlags adds flags to `hourglass serve`.
func withFlags(flags ...string) serverOption {
	return func(s *server) { s.flags = append(s.flags, flags...) }
}

// withPostgres runs the server as node name of a cluster on the
// PostgreSQL database at url, instead of over a --data directory.
func withPostgres(url, name string) serverOption {
	return func(s *server) { s.postgres, s.node, s.data = url, name, "" }
}

// withToken starts the server with --token T and makes its clients send
// it.
func withToken(token string) serverOption {
	return func(s *server) {
		s.flags = append(s.flags, "--token", token)
		s.token = token
	}
}

// withEnv adds variables ("K=V") to the server's environment.
func withEnv(kv ...string) serverOption {
	return func(s *server) { s.env = append(s.env, kv...) }
}

// withClientToken makes the clients send token, whatever the server has.
func withClientToken(token string) serverOption {
	return func(s *server) { s.token = token }
}

// newServer returns a server over a new temporary --data directory, not
// yet started. Cleanup kills whatever still runs, and prints the logs of
// every run if the test failed.
func newServer(t testing.TB, opts ...serverOption) *server {
	t.Helper()
	s := &server{t: t, data: filepath.Join(t.TempDir(), "data")}
	for _, o := range opts {
		o(s)
	}
	onEngine(t, s)
	s.transport = &http.Transport{MaxIdleConnsPerHost: 64, ResponseHeaderTimeout: 0}
	// Every exchange of the clients is checked against api/openapi.yaml.
	s.hc = &http.Client{Transport: apitest.New(t).Transport(s.transport)}
	t.Cleanup(func() {
		if s.proc != nil {
			s.signal(syscall.SIGKILL)
			s.wait(killTimeout)
		}
		s.transport.CloseIdleConnections()
		if t.Failed() {
			for i, p := range s.runs {
				log := p.log.String()
				if len(log) > logTail {
					log = "...\n" + log[len(log)-logTail:]
				}
				t.Logf("server run %d of %d (%s), stderr:\n%s", i+1, len(s.runs), p.state(), log)
			}
		}
	})
	return s
}

// startServer returns a server that is ready (its /readyz answers 200).
func startServer(t testing.TB, opts ...serverOption) *server {
	t.Helper()
	s := newServer(t, opts...)
	s.start()
	return s
}

// url returns the server's base URL.
func (s *server) url() string { return "http://" + s.addr }

// client returns a client of the server that sends its token.
func (s *server) client() *client.Client {
	c, err := client.New(s.url(), client.Options{Token: s.token, HTTPClient: s.hc})
	if err != nil {
		s.t.Fatalf("client.New: %v", err)
	}
	return c
}

// start starts the server and waits until it is ready; it fails the test
// if it exits or takes too long.
func (s *server) start() {
	s.t.Helper()
	p := s.launch()
	s.waitReady(p)
}

// launch starts a process and waits until it listens. A restart that
// finds its port still taken (by a process that is only just gone) is
// tried again, a bounded number of times.
func (s *server) launch() *process {
	s.t.Helper()
	if s.proc != nil {
		s.t.Fatalf("start: the server is running")
	}
	for attempt := 0; ; attempt++ {
		p := s.spawn()
		select {
		case <-p.log.listening:
			if s.addr == "" {
				s.addr = p.log.addr()
			}
			return p
		case <-p.done:
			s.proc = nil
			if s.addr != "" && attempt < 20 && strings.Contains(p.log.String(), "address already in use") {
				time.Sleep(100 * time.Millisecond)
				continue
			}
			s.t.Fatalf("server exited before listening: %s\n%s", p.state(), p.log)
		case <-time.After(listenTimeout):
			s.t.Fatalf("server did not listen within %v:\n%s", listenTimeout, p.log)
		}
	}
}

// spawn starts one process of `hourglass serve` over s.data (or as a
// node on s.postgres).
func (s *server) spawn() *process {
	s.t.Helper()
	addr := s.addr
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	store := []string{"--data", s.data}
	if s.postgres != "" {
		store = []string{"--postgres", s.postgres, "--node", s.node}
	}
	args := append(append([]string{"serve"}, store...), "--http", addr, "--log-format", "json")
	args = append(args, s.flags...)
	p := &process{cmd: exec.Command(hourglassBin, args...), log: newLogBuffer(), done: make(chan struct{})}
	p.cmd.Env = append(environ(), s.env...)
	p.cmd.Stdout = p.log
	p.cmd.Stderr = p.log
	if err := p.cmd.Start(); err != nil {
		s.t.Fatalf("starting %s: %v", hourglassBin, err)
	}
	p.started = time.Now()
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	s.proc = p
	s.runs = append(s.runs, p)
	return p
}

// waitReady polls /readyz until it answers 200, failing the test if p
// exits first or it takes longer than readyTimeout. It keeps what the
// server answered before (process.recovering).
func (s *server) waitReady(p *process) {
	s.t.Helper()
	deadline := time.Now().Add(readyTimeout)
	auth := ""
	if s.token != "" {
		auth = "Bearer " + s.token
	}
	for {
		a, err := s.try("GET", "/readyz", "", "")
		if err == nil && a.status == http.StatusOK {
			p.ready = time.Now()
			return
		}
		if err == nil && len(p.recovering) < 100 {
			p.recovering = append(p.recovering, recoveringAnswer{"/readyz", a})
			if len(p.recovering) == 1 {
				for _, path := range []string{"/healthz", "/v1/queues"} {
					if b, err := s.try("GET", path, "", auth); err == nil {
						p.recovering = append(p.recovering, recoveringAnswer{path, b})
					}
				}
			}
		}
		select {
		case <-p.done:
			s.proc = nil
			s.t.Fatalf("server exited before it was ready: %s\n%s", p.state(), p.log)
		default:
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("server not ready within %v (last: %v, %v):\n%s", readyTimeout, a, err, p.log)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// recoveringAnswer is an answer of a server that was not ready yet.
type recoveringAnswer struct {
	path string
	answer
}

// stop sends SIGTERM and checks that the process exits with status 0
// within stopTimeout; it returns how long the exit took.
func (s *server) stop() time.Duration {
	s.t.Helper()
	p := s.proc
	start := time.Now()
	s.signal(syscall.SIGTERM)
	if !s.wait(stopTimeout) {
		s.t.Errorf("server did not exit within %v of SIGTERM; killed it", stopTimeout)
		s.signal(syscall.SIGKILL)
		s.wait(killTimeout)
	} else if p.err != nil {
		s.t.Errorf("server exited with %v after SIGTERM, want status 0:\n%s", p.err, p.log)
	}
	s.checkRaces(p)
	return time.Since(start)
}

// kill sends SIGKILL and waits for the process to be gone.
func (s *server) kill() {
	s.t.Helper()
	p := s.proc
	s.signal(syscall.SIGKILL)
	if !s.wait(killTimeout) {
		s.t.Fatalf("server still running %v after SIGKILL", killTimeout)
	}
	s.checkRaces(p)
}

// signal sends sig to the running process.
func (s *server) signal(sig syscall.Signal) {
	s.t.Helper()
	if s.proc == nil {
		s.t.Fatalf("signal %v: the server is not running", sig)
	}
	if err := s.proc.cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		s.t.Fatalf("signal %v: %v", sig, err)
	}
}

// wait waits up to d for the running process to exit, and reports
// whether it did.
func (s *server) wait(d time.Duration) bool {
	select {
	case <-s.proc.done:
		s.proc = nil
		return true
	case <-time.After(d):
		return false
	}
}

// exited waits up to d for a process that is expected to exit by itself
// (a refused start) and returns its exit code, or -1 if it is still
// running (then it is killed).
func (s *server) exited(d time.Duration) int {
	s.t.Helper()
	p := s.proc
	if !s.wait(d) {
		s.signal(syscall.SIGKILL)
		s.wait(killTimeout)
		return -1
	}
	return p.cmd.ProcessState.ExitCode()
}

// checkRaces fails the test if p's log holds a race detector report.
func (s *server) checkRaces(p *process) {
	s.t.Helper()
	if log := p.log.String(); strings.Contains(log, "WARNING: DATA RACE") {
		s.t.Errorf("the server reported a data race:\n%s", log)
	}
}

// state describes how a process ended, or that it runs.
func (p *process) state() string {
	select {
	case <-p.done:
		if p.err == nil {
			return "exit status 0"
		}
		return p.err.Error()
	default:
		return "running"
	}
}

// logText returns the current process's log, or the last one's.
func (s *server) logText() string {
	if len(s.runs) == 0 {
		return ""
	}
	return s.runs[len(s.runs)-1].log.String()
}

// logWait bounds how long a test waits for a line of a running server's
// log: the server writes it to a pipe that the harness reads on its own
// goroutine, so a line written before an answer may reach the harness
// after it.
const logWait = 5 * time.Second

// logged reports whether the current (or last) run's log holds substr,
// waiting up to logWait for it.
func (s *server) logged(substr string) bool {
	deadline := time.Now().Add(logWait)
	for !strings.Contains(s.logText(), substr) {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
	return true
}

// logTime returns the time of the current (or last) run's first log
// entry with the message msg, waiting up to logWait for it and failing
// the test if there is none.
func (s *server) logTime(msg string) time.Time {
	s.t.Helper()
	deadline := time.Now().Add(logWait)
	for len(s.runs) > 0 {
		for _, e := range s.runs[len(s.runs)-1].log.entries() {
			if e["msg"] != msg {
				continue
			}
			if ts, ok := e["time"].(string); ok {
				if tm, err := time.Parse(time.RFC3339Nano, ts); err == nil {
					return tm
				}
			}
		}
		if time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	s.t.Fatalf("no log entry %q", msg)
	return time.Time{}
}

// answer is a raw HTTP answer.
type answer struct {
	status int
	header http.Header
	body   []byte
}

// String shows the answer in failure messages.
func (a answer) String() string { return fmt.Sprintf("%d %s", a.status, bytes.TrimSpace(a.body)) }

// call sends a raw request with the server's token (if any) and returns
// the answer; body "" sends none.
func (s *server) call(method, path, body string) answer {
	s.t.Helper()
	auth := ""
	if s.token != "" {
		auth = "Bearer " + s.token
	}
	return s.callAuth(method, path, body, auth)
}

// callAuth is call with the Authorization header auth ("" for none).
func (s *server) callAuth(method, path, body, auth string) answer {
	s.t.Helper()
	a, err := s.try(method, path, body, auth)
	if err != nil {
		s.t.Fatalf("%s %s: %v", method, path, err)
	}
	return a
}

// try sends a raw request and returns the answer or the transport's
// error. It is safe for concurrent use.
func (s *server) try(method, path, body, auth string) (answer, error) {
	return s.exchange(s.hc, method, path, body, func(req *http.Request) {
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
	})
}

// exchange sends a request for path of s over hc, within 30 s, with body
// ("" for none) and what set adds to it, and returns the answer, read
// whole, or the error. It is safe for concurrent use.
func (s *server) exchange(hc *http.Client, method, path, body string, set func(*http.Request)) (answer, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, s.url()+path, rd)
	if err != nil {
		return answer{}, err
	}
	set(req)
	resp, err := hc.Do(req)
	if err != nil {
		return answer{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return answer{}, err
	}
	return answer{resp.StatusCode, resp.Header, b}, nil
}

// cli runs the binary with args, a client subcommand, against s (its
// --server), and returns its standard output, standard error and exit
// code.
func (s *server) cli(args ...string) (stdout, stderr string, code int) {
	s.t.Helper()
	return runCLI(s.t, nil, append(args, "--server", s.url())...)
}

// taskOf decodes out, a subcommand's output, as one task, failing t if
// it is not one.
func taskOf(t testing.TB, out string) api.Task {
	t.Helper()
	var tk api.Task
	if err := json.Unmarshal([]byte(out), &tk); err != nil {
		t.Fatalf("not a task: %q", out)
	}
	return tk
}

// freeAddr returns a loopback address, HOST:PORT, that was free a moment
// ago: for a server's second listener (the harness learns the HTTP one
// from the log), or a port nothing listens on.
func freeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// freePort is freeAddr's port.
func freePort(t testing.TB) string {
	t.Helper()
	_, port, _ := net.SplitHostPort(freeAddr(t))
	return port
}
