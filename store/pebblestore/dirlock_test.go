//go:build linux || darwin || dragonfly || freebsd || netbsd || openbsd

package pebblestore_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hourglass-go/hourglass/store/pebblestore"
)

// TestLockDir checks the data directory's lock: LockDir creates the
// directory and writes the pid; a second LockDir (another open file, as
// another process would hold) fails naming the holder's pid; the store
// opens under the lock; after Close the directory can be taken again.
func TestLockDir(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "data")
	l, err := pebblestore.LockDir(dir)
	if err != nil {
		t.Fatalf("LockDir: %v", err)
	}
	b, err := os.ReadFile(filepath.Join(dir, pebblestore.PIDFile))
	if want := fmt.Sprintf("%d\n", os.Getpid()); err != nil || string(b) != want {
		t.Errorf("%s holds %q (%v), want %q", pebblestore.PIDFile, b, err, want)
	}
	_, err = pebblestore.LockDir(dir)
	want := fmt.Sprintf("hourglass: data directory %s is in use by another hourglass (pid %d)", dir, os.Getpid())
	if err == nil || err.Error() != want {
		t.Fatalf("second LockDir: %v, want %q", err, want)
	}
	st := open(t, dir) // Pebble's lock is another
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l, err = pebblestore.LockDir(dir)
	if err != nil {
		t.Fatalf("LockDir after Close: %v", err)
	}
	l.Close()
}

// TestLockDir_StalePID checks that a pid file left by a process that is
// gone does not keep the directory: only the lock counts.
func TestLockDir_StalePID(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, pebblestore.PIDFile), []byte("99999999999\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	l, err := pebblestore.LockDir(dir)
	if err != nil {
		t.Fatalf("LockDir over a stale pid file: %v", err)
	}
	defer l.Close()
	if b, _ := os.ReadFile(filepath.Join(dir, pebblestore.PIDFile)); strings.TrimSpace(string(b)) != fmt.Sprint(os.Getpid()) {
		t.Errorf("pid file holds %q", b)
	}
}
