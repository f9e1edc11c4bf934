package pebblestore_test

import (
	"errors"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/hourglass-go/hourglass/store"
	"github.com/hourglass-go/hourglass/store/pebblestore"
)

// fullFS is a file system whose files refuse every write with ENOSPC
// while full is set: a full disk.
type fullFS struct {
	vfs.FS
	full atomic.Bool
}

func (fs *fullFS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.Create(name, c)
	return fs.wrap(f, err)
}

func (fs *fullFS) ReuseForWrite(oldname, newname string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.ReuseForWrite(oldname, newname, c)
	return fs.wrap(f, err)
}

func (fs *fullFS) wrap(f vfs.File, err error) (vfs.File, error) {
	if err != nil {
		return nil, err
	}
	return fullFile{f, fs}, nil
}

type fullFile struct {
	vfs.File
	fs *fullFS
}

func (f fullFile) Write(p []byte) (int, error) {
	if f.fs.full.Load() {
		return 0, syscall.ENOSPC
	}
	return f.File.Write(p)
}

// TestOpen_FullDisk: a new store on a full disk fails to open with an
// error wrapping ENOSPC, which Pebble raises through Logger.Fatalf (its
// MANIFEST write is fatal to it), and opens once space is freed. Before,
// the Fatalf's panic ended the process.
func TestOpen_FullDisk(t *testing.T) {
	t.Parallel()
	fs := &fullFS{FS: vfs.NewMem()}
	fs.full.Store(true)
	st, err := pebblestore.OpenFS("db", pebblestore.Options{Logger: quiet}, fs, false)
	if err == nil {
		st.Close()
		t.Fatal("Open on a full disk succeeded")
	}
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("Open on a full disk: %v; want an error wrapping ENOSPC", err)
	}
	t.Logf("on a full disk: %v", err)
	fs.full.Store(false)
	st, err = pebblestore.OpenFS("db", pebblestore.Options{Logger: quiet}, fs, false)
	if err != nil {
		t.Fatalf("Open once space is freed: %v", err)
	}
	defer st.Close()
	var b store.Batch
	b.Put(store.Task{JobID: 1, Queue: "q", ID: "a", State: store.Waiting, Payload: []byte("x")})
	if err := st.Commit(&b); err != nil {
		t.Fatal(err)
	}
}
