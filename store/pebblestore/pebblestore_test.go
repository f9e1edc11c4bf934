package pebblestore_test

import (
	"io"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/hourglass-go/hourglass/store"
	"github.com/hourglass-go/hourglass/store/pebblestore"
	"github.com/hourglass-go/hourglass/store/storetest"
)

// quiet is the logger of stores in tests: Pebble's lines are not wanted
// in test output.
var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// open opens the store in dir with test options, failing t on an error.
func open(t testing.TB, dir string) *pebblestore.Store {
	t.Helper()
	st, err := pebblestore.Open(dir, pebblestore.Options{Logger: quiet})
	if err != nil {
		t.Fatalf("Open(%s): %v", dir, err)
	}
	return st
}

func TestStore(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		return open(t, filepath.Join(t.TempDir(), "db"))
	})
}

func TestStore_Durable(t *testing.T) {
	storetest.RunDurable(t, func(t *testing.T, dir string) store.Store {
		return open(t, dir)
	})
}
