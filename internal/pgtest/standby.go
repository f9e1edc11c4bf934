package pgtest

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// A synchronous standby, for failover tests: [Server.StartStandby] copies
// the primary with pg_basebackup, starts the copy as a hot standby
// streaming the primary's WAL, and names it in the primary's
// synchronous_standby_names, so that from then on a commit on the primary
// returns only once the standby has flushed its WAL: whatever a client was
// told is committed survives the primary's loss. [Server.Promote] turns the
// standby into a primary (pg_ctl promote), and [URL] names several servers
// in one connection string, for clients that must find the one accepting
// writes (target_session_attrs=read-write).

// StartStandby starts a synchronous standby of s named name (its
// application_name in pg_stat_replication) and returns it once the
// primary reports it in sync. The standby is stopped and its files
// removed when t ends. It runs with the primary's options, as a hot
// standby requires (max_connections at least the primary's).
func (s *Server) StartStandby(t testing.TB, name string) *Server {
	t.Helper()
	st, err := s.standby(name)
	if err != nil {
		t.Fatalf("pgtest: standby: %v", err)
	}
	t.Cleanup(func() {
		st.quit()
		os.RemoveAll(st.root)
	})
	if err := s.makeSynchronous(name); err != nil {
		t.Fatalf("pgtest: standby: %v", err)
	}
	return st
}

// standby copies s with pg_basebackup and starts the copy.
func (s *Server) standby(name string) (*Server, error) {
	root, err := os.MkdirTemp("", "pgtest-standby-")
	if err != nil {
		return nil, err
	}
	st := &Server{bin: s.bin, root: root, Dir: filepath.Join(root, "data"), log: filepath.Join(root, "server.log"), cred: s.cred}
	if err := st.chown(root); err != nil {
		os.RemoveAll(root)
		return nil, err
	}
	// -c fast: checkpoint at once rather than spread over minutes; -X
	// stream: the WAL written during the copy comes with it.
	bb := exec.Command(filepath.Join(s.bin, "pg_basebackup"), "-D", st.Dir, "-h", "127.0.0.1",
		"-p", strconv.Itoa(s.Port), "-U", User, "-c", "fast", "-X", "stream", "-N")
	bb.SysProcAttr = s.attr()
	if out, err := bb.CombinedOutput(); err != nil {
		os.RemoveAll(root)
		return nil, fmt.Errorf("pg_basebackup: %v\n%s", err, out)
	}
	signal := filepath.Join(st.Dir, "standby.signal")
	if err := os.WriteFile(signal, nil, 0o600); err != nil {
		os.RemoveAll(root)
		return nil, err
	}
	if err := st.chown(signal); err != nil {
		os.RemoveAll(root)
		return nil, err
	}
	st.extra = append(append([]string(nil), s.extra...),
		"-c", fmt.Sprintf("primary_conninfo=host=127.0.0.1 port=%d user=%s application_name=%s", s.Port, User, name),
		"-c", "hot_standby=on")
	for attempt := 0; ; attempt++ {
		port, perr := freePort()
		if perr != nil {
			os.RemoveAll(root)
			return nil, perr
		}
		if err = st.launch(port); err == nil {
			return st, nil
		}
		if attempt == 3 {
			os.RemoveAll(root)
			return nil, err
		}
	}
}

// makeSynchronous names the standby in s's synchronous_standby_names and
// waits until s reports it streaming in sync.
func (s *Server) makeSynchronous(name string) error {
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	conn, err := pgx.Connect(ctx, s.URL("postgres"))
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "ALTER SYSTEM SET synchronous_standby_names = "+pgx.Identifier{name}.Sanitize()); err != nil {
		return err
	}
	if _, err := conn.Exec(ctx, "SELECT pg_reload_conf()"); err != nil {
		return err
	}
	for {
		var state string
		err := conn.QueryRow(ctx, `SELECT sync_state FROM pg_stat_replication
			WHERE application_name = $1 AND state = 'streaming'`, name).Scan(&state)
		if err == nil && state == "sync" {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("standby %s not in sync within %s (last: %q, %v)", name, startTimeout, state, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Promote turns a standby into a primary (pg_ctl promote) and returns
// once it accepts writes.
func (s *Server) Promote() error {
	cmd := exec.Command(filepath.Join(s.bin, "pg_ctl"), "promote", "-D", s.Dir, "-w", "-t", "30")
	cmd.SysProcAttr = s.attr()
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("pgtest: pg_ctl promote: %v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	conn, err := pgx.Connect(ctx, s.URL("postgres"))
	if err != nil {
		return fmt.Errorf("pgtest: after promote: %w", err)
	}
	defer conn.Close(context.Background())
	for {
		var recovering bool
		if err := conn.QueryRow(ctx, "SELECT pg_is_in_recovery()").Scan(&recovering); err != nil {
			return fmt.Errorf("pgtest: after promote: %w", err)
		}
		if !recovering {
			return nil
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// URL returns one connection URL for database db naming every server in
// servers, in order, with the extra query parameters params (e.g.
// "target_session_attrs=read-write"): a client tries the hosts in turn.
func URL(db string, params string, servers ...*Server) string {
	hosts := make([]string, len(servers))
	for i, s := range servers {
		hosts[i] = net.JoinHostPort("127.0.0.1", strconv.Itoa(s.Port))
	}
	q := "sslmode=disable"
	if params != "" {
		q += "&" + params
	}
	u := url.URL{Scheme: "postgres", User: url.User(User), Host: strings.Join(hosts, ","), Path: "/" + db, RawQuery: q}
	return u.String()
}

// Database returns the name of the database a URL from
// [Server.CreateDatabase] connects to.
func Database(dbURL string) string {
	u, err := url.Parse(dbURL)
	if err != nil {
		return ""
	}
	return strings.TrimPrefix(u.Path, "/")
}
