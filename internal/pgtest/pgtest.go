// Package pgtest starts a throwaway PostgreSQL server for tests (and for
// `hourglass-bench --scenario cluster`, through [Launch]): initdb
// into a temporary directory, the postgres server on a free loopback port,
// a fresh database per caller, and everything removed when the test ends.
// No mock stands in for the database: the stores and the cluster are tested
// against the real server Debian's postgresql package installs.
//
// The server runs with fsync=on and synchronous_commit=on, the settings
// the durability promises are about. Only initdb's final sync of the new
// data directory is skipped (initdb -N): a crash of the machine during a
// test would lose a directory that the test throws away anyway.
//
// Where the binaries are missing the test is skipped with a message that
// says what to install. As root, PostgreSQL refuses to run, so the server
// runs as the user postgres (which Debian's package creates) or nobody.
package pgtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// User is the database superuser initdb creates; it logs in without a
// password from the loopback address (trust authentication).
const User = "hourglass"

// startTimeout bounds how long a server may take to accept connections.
const startTimeout = 30 * time.Second

// Server is one running PostgreSQL server. Its methods are safe for
// concurrent use.
type Server struct {
	// Dir is the data directory; Port the TCP port on 127.0.0.1.
	Dir  string
	Port int

	bin   string // directory of initdb and postgres
	root  string // temporary directory holding Dir, the socket and the log
	log   string // the server's log file
	cred  *syscall.Credential
	extra []string
	cmd   *exec.Cmd
	exit  chan struct{} // closed when cmd has exited
	dbs   atomic.Int64  // databases created, for names
}

// Option sets a server parameter, as postgres -c NAME=VALUE.
type Option struct{ name, value string }

// Set returns the Option NAME=VALUE, e.g. Set("max_connections", "500").
func Set(name, value string) Option { return Option{name, value} }

// Bin returns the directory holding Debian's PostgreSQL binaries (the
// newest version under /usr/lib/postgresql), or the directory of initdb
// on PATH, or "" when there is none.
func Bin() string {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return version(dirs[i]) > version(dirs[j]) })
	for _, d := range dirs {
		if usable(d) {
			return d
		}
	}
	if p, err := exec.LookPath("initdb"); err == nil && usable(filepath.Dir(p)) {
		return filepath.Dir(p)
	}
	return ""
}

func version(dir string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(dir)))
	return v
}

func usable(dir string) bool {
	for _, name := range []string{"initdb", "postgres"} {
		if fi, err := os.Stat(filepath.Join(dir, name)); err != nil || fi.IsDir() {
			return false
		}
	}
	return true
}

// ErrNoBinaries is returned by [Launch] when the PostgreSQL binaries are
// missing; the message says what to install.
var ErrNoBinaries = errors.New("hourglass: pgtest: PostgreSQL binaries not found (initdb and postgres under /usr/lib/postgresql/*/bin or on PATH); " +
	"install them with: apt-get install -y postgresql")

// Start initialises and starts a server for the test t and stops it and
// removes its files when t ends. It skips t when the binaries are missing
// and fails it when the server does not start.
func Start(t testing.TB, opts ...Option) *Server {
	t.Helper()
	s, err := Launch(opts...)
	if errors.Is(err, ErrNoBinaries) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	t.Cleanup(s.Close)
	return s
}

// Launch initialises and starts a server, as Start does, for a caller
// that is not one test: a TestMain that shares a server among its tests,
// or hourglass-bench. The caller stops it with [Server.Close].
// ErrNoBinaries when the binaries are missing.
func Launch(opts ...Option) (*Server, error) {
	bin := Bin()
	if bin == "" {
		return nil, ErrNoBinaries
	}
	return start(bin, opts)
}

// Close stops the server and removes its files. An immediate shutdown: a
// fast one would first write a checkpoint of every database made, with
// fsyncs, for a directory removed next.
func (s *Server) Close() {
	s.quit()
	s.keepLog()
	os.RemoveAll(s.root)
}

// start runs initdb and the server.
func start(bin string, opts []Option) (*Server, error) {
	root, err := os.MkdirTemp("", "pgtest-")
	if err != nil {
		return nil, err
	}
	s := &Server{bin: bin, root: root, Dir: filepath.Join(root, "data"), log: filepath.Join(root, "server.log")}
	for _, o := range opts {
		s.extra = append(s.extra, "-c", o.name+"="+o.value)
	}
	diag, err := diagSettings()
	if err != nil {
		os.RemoveAll(root)
		return nil, err
	}
	s.extra = append(s.extra, diag...)
	if s.cred, err = unprivileged(); err != nil {
		os.RemoveAll(root)
		return nil, err
	}
	if err := s.chown(root); err != nil {
		os.RemoveAll(root)
		return nil, err
	}
	initdb := exec.Command(filepath.Join(bin, "initdb"), "-D", s.Dir, "-U", User, "-A", "trust",
		"-E", "UTF8", "--locale=C", "-N")
	initdb.SysProcAttr = s.attr()
	if out, err := initdb.CombinedOutput(); err != nil {
		os.RemoveAll(root)
		return nil, fmt.Errorf("initdb: %v\n%s", err, out)
	}
	for attempt := 0; ; attempt++ {
		port, perr := freePort()
		if perr != nil {
			os.RemoveAll(root)
			return nil, perr
		}
		err = s.launch(port)
		if err == nil {
			return s, nil
		}
		if attempt == 3 {
			os.RemoveAll(root)
			return nil, err
		}
	}
}

// launch starts the server on port and waits until it accepts
// connections. A port free when chosen may be taken by another process
// before the server binds it: then launch fails and start tries another.
func (s *Server) launch(port int) error {
	s.Port = port
	args := []string{"-D", s.Dir,
		"-c", "port=" + strconv.Itoa(port),
		"-c", "listen_addresses=127.0.0.1",
		"-c", "unix_socket_directories=" + s.root,
		"-c", "fsync=on",
		"-c", "synchronous_commit=on",
		"-c", "log_min_messages=warning",
	}
	args = append(args, s.extra...)
	logf, err := os.OpenFile(s.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := exec.Command(filepath.Join(s.bin, "postgres"), args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = s.attr()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting postgres: %v", err)
	}
	exit := make(chan struct{})
	go func() { cmd.Wait(); close(exit) }()
	s.cmd, s.exit = cmd, exit

	deadline := time.Now().Add(startTimeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		conn, err := pgx.Connect(ctx, s.URL("postgres"))
		cancel()
		if err == nil {
			conn.Close(context.Background())
			return nil
		}
		select {
		case <-exit:
			return fmt.Errorf("postgres exited at start: %v\n%s", cmd.ProcessState, s.logTail())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.Kill()
			return fmt.Errorf("postgres did not accept connections within %s: %v\n%s", startTimeout, err, s.logTail())
		}
	}
}

// logTail returns the end of the server's log, for error messages.
func (s *Server) logTail() string {
	b, _ := os.ReadFile(s.log)
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(bytes.TrimSpace(b))
}

// freePort returns a TCP port on 127.0.0.1 that is free now.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// URL returns the connection URL of database db on s.
func (s *Server) URL(db string) string {
	u := url.URL{
		Scheme:   "postgres",
		User:     url.User(User),
		Host:     net.JoinHostPort("127.0.0.1", strconv.Itoa(s.Port)),
		Path:     "/" + db,
		RawQuery: "sslmode=disable",
	}
	return u.String()
}

// CreateDatabase creates a new, empty database and returns its URL. Each
// call gives another database, so tests sharing one server do not see
// each other's tables.
func (s *Server) CreateDatabase(t testing.TB) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	url, err := s.NewDatabase(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return url
}

// NewDatabase is CreateDatabase for callers without a test.
func (s *Server) NewDatabase(ctx context.Context) (string, error) {
	name := fmt.Sprintf("test%d", s.dbs.Add(1))
	conn, err := pgx.Connect(ctx, s.URL("postgres"))
	if err != nil {
		return "", fmt.Errorf("hourglass: pgtest: %w", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		return "", fmt.Errorf("hourglass: pgtest: creating database %s: %w", name, err)
	}
	return s.URL(name), nil
}

// Pool opens a pool of at most maxConns connections to the database at
// url, as a process of its own would (a node under test gets one each);
// it is closed when the test ends, if it is not closed before. Each of
// configure changes the pool's configuration first (for a node:
// cluster.ConfigurePool).
func Pool(t testing.TB, url string, maxConns int32, configure ...func(*pgxpool.Config)) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = maxConns
	for _, f := range configure {
		f(cfg)
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// Stop shuts the server down (fast shutdown: open sessions are ended,
// everything committed is kept) and waits for it to exit. Stopping a
// stopped server does nothing.
func (s *Server) Stop() error {
	if s.cmd == nil {
		return nil
	}
	s.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-s.exit:
	case <-time.After(15 * time.Second):
		s.Kill()
		return errors.New("postgres did not stop within 15s after SIGINT; killed")
	}
	s.cmd = nil
	return nil
}

// Kill ends the server with SIGKILL, as a crash would: what was committed
// is in its WAL and is recovered by Restart.
func (s *Server) Kill() {
	if s.cmd == nil {
		return
	}
	s.cmd.Process.Kill()
	<-s.exit
	s.cmd = nil
}

// quit ends the server with SIGQUIT (immediate shutdown: no checkpoint,
// committed data is in the WAL) and waits for it to exit.
func (s *Server) quit() {
	if s.cmd == nil {
		return
	}
	s.cmd.Process.Signal(syscall.SIGQUIT)
	select {
	case <-s.exit:
		s.cmd = nil
	case <-time.After(10 * time.Second):
		s.Kill()
	}
}

// Restart starts a stopped or killed server again on the same data
// directory and port.
func (s *Server) Restart() error {
	if s.cmd != nil {
		return errors.New("pgtest: Restart of a running server")
	}
	port := s.Port
	// The backends of a killed postmaster may hold the port briefly.
	var err error
	for range 50 {
		if err = s.launch(port); err == nil {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return err
}
