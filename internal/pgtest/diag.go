package pgtest

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Diagnosis settings, off by default: two environment variables that let
// a person look inside the servers a test or hourglass-bench starts,
// without changing the code that starts them.
//
//   - HOURGLASS_PGTEST_SETTINGS: server parameters, NAME=VALUE separated
//     by ';', given to every server after its own (a later -c wins), e.g.
//     "shared_preload_libraries=auto_explain;auto_explain.log_min_duration=5ms;log_lock_waits=on".
//   - HOURGLASS_PGTEST_LOGDIR: a directory that every server's log is
//     copied into when the server is closed (the data directory and its
//     log are removed then), as pgtest-PORT-TIME.log.
const (
	envSettings = "HOURGLASS_PGTEST_SETTINGS"
	envLogDir   = "HOURGLASS_PGTEST_LOGDIR"
)

// diagSettings returns the -c arguments HOURGLASS_PGTEST_SETTINGS asks
// for, none when it is unset; an entry without '=' is an error.
func diagSettings() ([]string, error) {
	var args []string
	for _, kv := range strings.Split(os.Getenv(envSettings), ";") {
		kv = strings.TrimSpace(kv)
		if kv == "" {
			continue
		}
		if !strings.Contains(kv, "=") {
			return nil, fmt.Errorf("hourglass: pgtest: %s: %q is not NAME=VALUE", envSettings, kv)
		}
		args = append(args, "-c", kv)
	}
	return args, nil
}

// keepLog copies the server's log into HOURGLASS_PGTEST_LOGDIR, if set.
// Best effort: a failure is reported on stderr, not to the caller.
func (s *Server) keepLog() {
	dir := os.Getenv(envLogDir)
	if dir == "" {
		return
	}
	b, err := os.ReadFile(s.log)
	if err == nil {
		name := fmt.Sprintf("pgtest-%d-%s.log", s.Port, time.Now().UTC().Format("150405.000"))
		err = os.WriteFile(filepath.Join(dir, name), b, 0o644)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "hourglass: pgtest: keeping the server's log: %v\n", err)
	}
}
