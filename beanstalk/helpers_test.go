package beanstalk_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/beanstalk"
	"github.com/hourglass-go/hourglass/broker"
	"github.com/hourglass-go/hourglass/cluster"
	"github.com/hourglass-go/hourglass/internal/pgtest"
	"github.com/hourglass-go/hourglass/service"
	"github.com/hourglass-go/hourglass/store/memstore"
	"github.com/hourglass-go/hourglass/store/pebblestore"
	"github.com/jackc/pgx/v5/pgxpool"
)

// testBroker is what a test calls on the engine under its server: the
// service, and Close.
type testBroker interface {
	service.Service
	Close() error
}

// engine is an engine that closes: *broker.Broker and *cluster.Node.
type engine interface {
	service.Engine
	Close() error
}

// serviceOf is the testBroker of e: service.New over e, closing e.
type serviceOf struct {
	service.Service
	e engine
}

func (s serviceOf) Close() error { return s.e.Close() }

// wrap returns the testBroker of e.
func wrap(e engine) testBroker { return serviceOf{service.New(e), e} }

// testServer is a Server on a loopback port over a fresh broker.
type testServer struct {
	addr string
	b    testBroker
	srv  *beanstalk.Server
}

// backend is one implementation of [service.Service] that the suites
// run over: the tests that drive the server as clients do (the
// differential test, go-beanstalk, beaneater, the cross-protocol test)
// run once per backend, in subtests named after it.
type backend struct {
	name  string
	start func(t testing.TB, opts beanstalk.Options) *testServer
}

// backends are the single-node broker over Pebble and a cluster node
// over PostgreSQL (a fresh database per test, on a server the package's
// tests share; see clusterDB).
var backends = []backend{
	{"broker", startPebble},
	{"cluster", startCluster},
}

// eachBackend runs f in a parallel subtest per backend.
func eachBackend(t *testing.T, f func(t *testing.T, start func(testing.TB, beanstalk.Options) *testServer)) {
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			t.Parallel()
			f(t, be.start)
		})
	}
}

// start serves a new broker over memstore on 127.0.0.1:0 until the test
// ends; Shutdown, then the broker's Close, run at cleanup.
func start(t testing.TB, opts beanstalk.Options) *testServer {
	t.Helper()
	b, err := broker.Open(memstore.New(), broker.Config{})
	if err != nil {
		t.Fatal(err)
	}
	return serve(t, b, opts)
}

// startPebble is start over a Pebble store in a temporary directory.
func startPebble(t testing.TB, opts beanstalk.Options) *testServer {
	t.Helper()
	st, err := pebblestore.Open(t.TempDir(), pebblestore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := broker.Open(st, broker.Config{})
	if err != nil {
		st.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return serve(t, b, opts)
}

// startCluster is start over a node of a cluster on a fresh database.
func startCluster(t testing.TB, opts beanstalk.Options) *testServer {
	t.Helper()
	n, _ := openNode(t, clusterDB(t), "a")
	return serve(t, n, opts)
}

// openNode opens node name on the database at url, on a pool of its own,
// as a process of its own would; the node and its pool are closed when
// the test ends.
func openNode(t testing.TB, url, name string) (*cluster.Node, *pgxpool.Pool) {
	t.Helper()
	pool := pgtest.Pool(t, url, 8, cluster.ConfigurePool)
	n, err := cluster.Open(context.Background(), pool, cluster.Options{Node: name, Lease: time.Second, Logger: quiet})
	if err != nil {
		t.Fatalf("cluster.Open(%s): %v", name, err)
	}
	t.Cleanup(func() { n.Close() })
	return n, pool
}

// quiet discards the logs of nodes and HTTP servers.
var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// pg is the PostgreSQL server the package's tests share, started by the
// first test that needs one and stopped by TestMain.
var pg struct {
	once sync.Once
	srv  *pgtest.Server
	err  error
}

// clusterDB returns the URL of a new database on the shared server, or
// skips t where PostgreSQL is not installed.
func clusterDB(t testing.TB) string {
	t.Helper()
	pg.once.Do(func() { pg.srv, pg.err = pgtest.Launch(pgtest.Set("max_connections", "400")) })
	if errors.Is(pg.err, pgtest.ErrNoBinaries) {
		t.Skip(pg.err)
	}
	if pg.err != nil {
		t.Fatal(pg.err)
	}
	return pg.srv.CreateDatabase(t)
}

func TestMain(m *testing.M) {
	code := m.Run()
	if pg.srv != nil {
		pg.srv.Close()
	}
	os.Exit(code)
}

func serve(t testing.TB, e engine, opts beanstalk.Options) *testServer {
	b := wrap(e)
	srv, addr, served := listen(t, b, opts)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		if err := <-served; !errors.Is(err, beanstalk.ErrServerClosed) {
			t.Errorf("Serve returned %v, want ErrServerClosed", err)
		}
		if err := b.Close(); err != nil {
			t.Errorf("broker Close: %v", err)
		}
	})
	return &testServer{addr: addr, b: b, srv: srv}
}

// listen serves b on 127.0.0.1:0 and returns the server, its address and
// what Serve returns, once it does.
func listen(t testing.TB, b testBroker, opts beanstalk.Options) (*beanstalk.Server, string, <-chan error) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Close()
		t.Fatal(err)
	}
	srv := beanstalk.NewServer(b, opts)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()
	return srv, l.Addr().String(), served
}

// unmanaged serves a new broker over memstore for tests that shut the
// server down themselves; only the broker is closed at cleanup.
func unmanaged(t testing.TB) (*broker.Broker, *beanstalk.Server, string, <-chan error) {
	t.Helper()
	b := openMem(t)
	srv, addr, served := listen(t, wrap(b), beanstalk.Options{})
	return b, srv, addr, served
}

// openMem opens a broker over memstore, closed when the test ends
// (after the cleanups registered later: a server's shutdown).
func openMem(t testing.TB) *broker.Broker {
	t.Helper()
	b, err := broker.Open(memstore.New(), broker.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// client speaks the protocol raw, for tests that check replies byte for
// byte.
type client struct {
	t  testing.TB
	nc net.Conn
	r  *bufio.Reader
}

func dial(t testing.TB, addr string) *client {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	return &client{t: t, nc: nc, r: bufio.NewReader(nc)}
}

// send writes raw bytes.
func (c *client) send(s string) {
	c.t.Helper()
	c.nc.SetWriteDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c.nc, s); err != nil {
		c.t.Fatalf("send %q: %v", trim(s), err)
	}
}

// read reads one reply within d: its line and, for replies that carry
// data (RESERVED, FOUND, OK), the data and its CR-LF. A closed connection
// reads as "<closed>", a reply that does not come in time as
// "<timeout>".
func (c *client) read(d time.Duration) string {
	c.t.Helper()
	s, err := readReply(c.nc, c.r, d)
	if err != nil {
		c.t.Fatalf("read: %v", err)
	}
	return s
}

func readReply(nc net.Conn, r *bufio.Reader, d time.Duration) (string, error) {
	nc.SetReadDeadline(time.Now().Add(d))
	defer nc.SetReadDeadline(time.Time{})
	line, err := r.ReadString('\n')
	if err != nil {
		var ne net.Error
		switch {
		case errors.As(err, &ne) && ne.Timeout():
			return "<timeout>", nil
		case errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) || strings.Contains(err.Error(), "reset"):
			return "<closed>", nil
		}
		return "", err
	}
	f := strings.Fields(line)
	n := -1
	switch {
	case len(f) == 3 && (f[0] == "RESERVED" || f[0] == "FOUND"):
		n, _ = strconv.Atoi(f[2])
	case len(f) == 2 && f[0] == "OK":
		n, _ = strconv.Atoi(f[1])
	}
	if n < 0 {
		return line, nil
	}
	data := make([]byte, n+2)
	if _, err := io.ReadFull(r, data); err != nil {
		return "", fmt.Errorf("reading %d bytes after %q: %w", n, trim(line), err)
	}
	return line + string(data), nil
}

// do sends a command line (CR-LF added) and returns the reply.
func (c *client) do(line string) string {
	c.t.Helper()
	c.send(line + "\r\n")
	return c.read(5 * time.Second)
}

// must is do, failing unless the reply is want (CR-LF added).
func (c *client) must(line, want string) {
	c.t.Helper()
	if got := c.do(line); got != want+"\r\n" {
		c.t.Fatalf("%s: got %q, want %q", trim(line), got, want)
	}
}

// put puts body into the used tube and returns the job id.
func (c *client) put(pri, delay, ttr int, body string) uint64 {
	c.t.Helper()
	c.send(fmt.Sprintf("put %d %d %d %d\r\n%s\r\n", pri, delay, ttr, len(body), body))
	got := c.read(5 * time.Second)
	var id uint64
	if _, err := fmt.Sscanf(got, "INSERTED %d\r\n", &id); err != nil {
		c.t.Fatalf("put: got %q", got)
	}
	return id
}

// yamlField returns the value of key in a YAML reply.
func yamlField(reply, key string) string {
	for _, l := range strings.Split(reply, "\n") {
		if k, v, ok := strings.Cut(l, ": "); ok && k == key {
			return strings.Trim(strings.TrimSpace(v), `"`)
		}
	}
	return ""
}

// trim shortens s for messages.
func trim(s string) string {
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}

// lookPath finds a program, or skips the test saying what to install.
func lookPath(t *testing.T, prog, pkg string) string {
	t.Helper()
	p, err := exec.LookPath(prog)
	if err != nil {
		t.Skipf("%s is not on PATH: install the Debian package %s to run this test", prog, pkg)
	}
	return p
}
