package pebblestore_test

import (
	"encoding/hex"
	"path/filepath"
	"testing"

	"github.com/hourglass-go/hourglass/store"
	"github.com/hourglass-go/hourglass/store/pebblestore"
)

// TestLayout_Example checks the worked example of the package doc: the
// keys of task 42 and the sizes of their values.
func TestLayout_Example(t *testing.T) {
	st := open(t, filepath.Join(t.TempDir(), "db"))
	defer st.Close()
	task := store.Task{JobID: 42, Queue: "mail", ID: "welcome-7", State: store.Waiting, Payload: []byte("hello")}
	if err := st.Commit(&store.Batch{Ops: []store.Op{{Kind: store.PutTask, Task: task}}}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		key     []byte
		wantKey string // hex, as in the doc without spaces
		valLen  int
	}{
		{pebblestore.MetaKey(42), "6d000000000000002a", 81},
		{pebblestore.PayloadKey(42), "70000000000000002a", 9},
		{pebblestore.IndexKey("mail", "welcome-7"), "69046d61696c77656c636f6d652d37", 12},
		{pebblestore.ListKey("mail", 42), "71046d61696c000000000000002a", 4},
	} {
		if got := hex.EncodeToString(c.key); got != c.wantKey {
			t.Errorf("key %s, want %s", got, c.wantKey)
		}
		v, err := st.Raw(c.key)
		if err != nil || len(v) != c.valLen {
			t.Errorf("value under %x: %d bytes, %v; want %d bytes", c.key, len(v), err, c.valLen)
		}
	}
	if v, err := st.Raw(pebblestore.IndexKey("mail", "welcome-7")); err != nil || hex.EncodeToString(v[:8]) != "2a00000000000000" {
		t.Errorf("index value %x, %v; want job 42 little-endian first", v, err)
	}
	if n, _ := st.NextJobID(); n != 43 {
		t.Errorf("NextJobID() = %d, want 43", n)
	}
}
