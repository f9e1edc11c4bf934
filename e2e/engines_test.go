package e2e_test

import (
	"errors"
	"net"
	neturl "net/url"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/hourglass-go/hourglass/internal/pgtest"
	"github.com/hourglass-go/hourglass/internal/tcpproxy"
)

// Every test of the service's behaviour runs on both engines: the
// embedded store (`hourglass serve --data DIR`) and a node of a cluster
// on PostgreSQL (`hourglass serve --postgres URL`), with the same test
// code. A test calls engines(t, body); body runs as the subtests
// "embedded" and "cluster", and every server it starts (newServer,
// startServer) is of its subtest's engine: a cluster node on a database
// of its own, on one PostgreSQL server that the package shares. So a
// route that works on one engine and not the other fails a test. Tests of
// what only one engine has (the embedded store's files: WAL damage, a
// full disk) call neither and run on the embedded store; tests of several
// nodes start them with withPostgres.

// engine is what a server stores its tasks in.
type engine string

const (
	embeddedEngine engine = "embedded"
	clusterEngine  engine = "cluster"
)

// engines runs body as one subtest per engine.
func engines(t *testing.T, body func(t *testing.T)) {
	for _, e := range []engine{embeddedEngine, clusterEngine} {
		t.Run(string(e), body)
	}
}

// engineOf returns the engine of the subtest t runs in (the embedded
// store outside engines).
func engineOf(t testing.TB) engine {
	parts := strings.Split(t.Name(), "/")
	if len(parts) > 1 && engine(parts[1]) == clusterEngine {
		return clusterEngine
	}
	return embeddedEngine
}

// clusterLease is the partition lease of the nodes the tests start: a
// node restarted under its name waits for its old heartbeat to run out
// (up to one lease) before it joins, and a node whose lease loop is held
// up for longer than a lease (a -race build on a loaded machine) loses
// its partitions for a moment. 2 s keeps restarts quick and rides out
// the load of a full test run.
const clusterLease = "2s"

// shared is the PostgreSQL server the package's cluster nodes share,
// started by the first test that needs one and stopped by TestMain.
var shared struct {
	once sync.Once
	srv  *pgtest.Server
	err  error
}

// sharedPostgres returns the package's PostgreSQL server, starting it on
// first use; it skips t, saying why, where PostgreSQL is not installed.
func sharedPostgres(t testing.TB) *pgtest.Server {
	t.Helper()
	shared.once.Do(func() { shared.srv, shared.err = pgtest.Launch() })
	if errors.Is(shared.err, pgtest.ErrNoBinaries) {
		t.Skip(shared.err)
	}
	if shared.err != nil {
		t.Fatalf("pgtest: %v", shared.err)
	}
	return shared.srv
}

// proxiedDatabase creates a database on the shared server and a proxy
// to the server (internal/tcpproxy, in Pass mode, closed when the test
// ends), and returns the database's URL, its URL through the proxy, and
// the proxy, with which a test cuts a node off from its database.
func proxiedDatabase(t testing.TB) (url, proxied string, proxy *tcpproxy.Proxy) {
	t.Helper()
	pg := sharedPostgres(t)
	url = pg.CreateDatabase(t)
	proxy, err := tcpproxy.Start(net.JoinHostPort("127.0.0.1", strconv.Itoa(pg.Port)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proxy.Close() })
	u, err := neturl.Parse(url)
	if err != nil {
		t.Fatal(err)
	}
	u.Host = proxy.Addr()
	return url, u.String(), proxy
}

// closeSharedPostgres stops the shared server, if one was started.
func closeSharedPostgres() {
	if shared.srv != nil {
		shared.srv.Close()
	}
}

// onEngine makes s a node of a new cluster, on a database of its own,
// when t runs on the cluster engine and s was given no database.
func onEngine(t testing.TB, s *server) {
	if engineOf(t) != clusterEngine || s.postgres != "" {
		return
	}
	url := sharedPostgres(t).CreateDatabase(t)
	s.postgres, s.node, s.data = url, "n1", ""
	s.flags = append([]string{"--lease", clusterLease}, s.flags...)
}
