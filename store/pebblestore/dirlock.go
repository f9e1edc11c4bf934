package pebblestore

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// PIDFile is the file in a data directory that [LockDir] locks and
// writes the holder's process id into.
const PIDFile = "hourglass.pid"

// errLocked is what lockFile returns when another open file holds the
// lock.
var errLocked = errors.New("locked")

// DirLock is a data directory held by this process; see [LockDir].
type DirLock struct {
	f *os.File
}

// LockDir takes dir for this process, creating dir if it is missing, so
// that a second server on it fails at once, before it listens, instead of
// once Pebble finds its own lock taken: it takes an exclusive lock on
// dir/hourglass.pid (flock, held by the open file, so that the kernel
// drops it when the process ends, however it ends) and writes the
// process id into that file, if the disk takes it. When another process
// holds it, LockDir
// returns "hourglass: data directory DIR is in use by another hourglass
// (pid N)". Pebble's own lock (its LOCK file, an fcntl lock) is separate
// and still taken by [Open]: the two locks never meet. On systems without
// flock, LockDir takes nothing and Pebble's lock alone guards the
// directory.
func LockDir(dir string) (*DirLock, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("hourglass: data directory: %w", err)
	}
	name := filepath.Join(dir, PIDFile)
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("hourglass: data directory: %w", err)
	}
	if err := lockFile(f); err != nil {
		f.Close()
		if !errors.Is(err, errLocked) {
			return nil, fmt.Errorf("hourglass: data directory %s: lock %s: %w", dir, PIDFile, err)
		}
		if pid := holder(name); pid > 0 {
			return nil, fmt.Errorf("hourglass: data directory %s is in use by another hourglass (pid %d)", dir, pid)
		}
		return nil, fmt.Errorf("hourglass: data directory %s is in use by another hourglass", dir)
	}
	// The pid only names the holder in another's error: a disk too full
	// to take it (the server then waits for space to open the store)
	// leaves the file empty, and the lock held.
	if f.Truncate(0) == nil {
		f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return &DirLock{f: f}, nil
}

// holder returns the process id written in the pid file name, or 0 if it
// holds none (its holder may not have written it yet).
func holder(name string) int {
	b, err := os.ReadFile(name)
	if err != nil || len(b) > 32 {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return 0
	}
	return pid
}

// Close lets the directory go. The pid file stays: removing it could
// remove one that another process has just opened and locked, and a file
// left with a stale pid is harmless, since only its lock counts.
func (l *DirLock) Close() error {
	return l.f.Close()
}
