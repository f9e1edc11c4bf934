package e2e_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/api"
	"github.com/hourglass-go/hourglass/client"
)

// The corruption tests damage the write-ahead log of a killed server and
// restart it. What they expect is what package pebblestore's doc
// ("Crashes") promises of Pebble's replay:
//
//   - Damage to a chunk followed by valid chunks in later 32 KiB blocks of
//     the log is proven corruption of synced data: Open fails with an error
//     wrapping store.ErrCorrupt ("store corrupt"), and serve exits with
//     status 1 and logs it, never ready.
//   - Damage in the last block of the newest log cannot be told from a
//     torn tail: replay stops there, the damaged record and the records
//     after it in that block are dropped, and Open logs the warning of an
//     unclean stop ("store was not closed cleanly (a crash, or a corrupt
//     WAL tail)"). The server serves every record before the damage as it
//     was put, and nothing of the damaged ones.
//   - A torn tail (the log cut short) is the same: the cut record is
//     dropped, with the same warning.
const (
	corruptTasks   = 150  // puts, one synced WAL record each
	corruptPayload = 1000 // bytes a payload, so the log spans several 32 KiB blocks
	walBlock       = 32 << 10
)

// TestCorruptWAL_Proven damages a record in the second block of the log;
// later blocks prove it was synced, so the restart must refuse.
func TestCorruptWAL_Proven(t *testing.T) {
	t.Parallel()
	s, _ := fillAndKill(t)
	wal := newestWAL(t, s.data)
	size := fileSize(t, wal)
	if size < 3*walBlock {
		t.Fatalf("the log is %d bytes; the test needs at least 3 blocks", size)
	}
	damage(t, wal, walBlock+walBlock/2, 16)

	p := s.spawn()
	code := s.exited(readyTimeout)
	log := p.log.String()
	if code != 1 {
		t.Fatalf("restart on a log with damaged synced data: exit %d, want 1:\n%s", code, log)
	}
	failed := ""
	for _, e := range p.log.entries() {
		if e["msg"] == "serve failed" {
			failed, _ = e["err"].(string)
		}
	}
	if !strings.Contains(failed, "store corrupt") || !strings.Contains(failed, s.data) {
		t.Errorf("serve failed with %q; want an error naming the corruption and the directory:\n%s", failed, log)
	}
	if strings.Contains(log, `"msg":"ready"`) {
		t.Errorf("the server was ready on a corrupt store:\n%s", log)
	}
	t.Logf("refused: %s", failed)
}

// TestCorruptWAL_Tail damages the last record of the log, or one a few
// records before the end: the restart drops it and what follows in its
// block, warns, and serves the rest exactly as it was put.
func TestCorruptWAL_Tail(t *testing.T) {
	t.Parallel()
	for _, back := range []int64{corruptPayload / 2, 5*corruptPayload + corruptPayload/2} {
		t.Run(fmt.Sprint(back, "BytesFromTheEnd"), func(t *testing.T) {
			t.Parallel()
			s, put := fillAndKill(t)
			wal := newestWAL(t, s.data)
			damage(t, wal, fileSize(t, wal)-back, 16)
			restartAfterDamage(t, s, put)
		})
	}
}

// TestCorruptWAL_Torn cuts the log in the middle of its last record, as a
// crash in the middle of a write would: the restart drops that record,
// warns, and serves the rest exactly as it was put.
func TestCorruptWAL_Torn(t *testing.T) {
	t.Parallel()
	s, put := fillAndKill(t)
	wal := newestWAL(t, s.data)
	if err := os.Truncate(wal, fileSize(t, wal)-corruptPayload/2); err != nil {
		t.Fatal(err)
	}
	restartAfterDamage(t, s, put)
}

// restartAfterDamage restarts s on a log damaged in its last block and
// checks that it warns in its log, serves each task put either exactly as
// put or not at all, loses only a run of the newest tasks, no more than a
// block holds, and goes on working.
func restartAfterDamage(t *testing.T, s *server, put []api.Task) {
	t.Helper()
	s.start()
	if !s.logged("store was not closed cleanly (a crash, or a corrupt WAL tail)") {
		t.Errorf("no warning of the damaged tail in the log:\n%s", s.logText())
	}
	c := s.client()
	ctx := context.Background()
	lost := -1 // the first task lost
	for i, want := range put {
		got, err := c.Get(ctx, "c", want.ID)
		switch {
		case errors.Is(err, client.ErrNotFound):
			if lost < 0 {
				lost = i
			}
		case err != nil:
			t.Fatalf("Get %s: %v", want.ID, err)
		case lost >= 0:
			t.Errorf("%s served, though %s, put before it, was lost: a record after the damage was replayed", want.ID, put[lost].ID)
		case !sameTask(got, want):
			t.Errorf("%s served as\n%+v\nwant\n%+v", want.ID, got, want)
		}
	}
	if lost < 0 {
		t.Fatalf("no task lost: the damage hit nothing")
	}
	if n := len(put) - lost; n > walBlock/corruptPayload+1 {
		t.Errorf("%d tasks lost, more than the last block held", n)
	}
	t.Logf("the newest %d of %d tasks lost, the others served as put", len(put)-lost, len(put))

	// The server goes on: it takes puts, and its job ids stay unique.
	task, created, err := c.Put(ctx, "c", api.PutRequest{ID: "after"})
	if err != nil || !created {
		t.Fatalf("Put after the restart: %+v, %v, %v", task, created, err)
	}
	for _, p := range put[:lost] {
		if p.JobID == task.JobID {
			t.Errorf("job id %d given again after the restart", task.JobID)
		}
	}
	s.stop()
	s.start()
	if _, err := c.Get(ctx, "c", "after"); err != nil {
		t.Errorf("Get after a clean restart: %v", err)
	}
}

// fillAndKill starts a server, puts corruptTasks tasks one at a time (a
// synced WAL record each), kills it with SIGKILL and returns the server
// (stopped) and the tasks as put.
func fillAndKill(t *testing.T) (*server, []api.Task) {
	t.Helper()
	s := startServer(t)
	c := s.client()
	var put []api.Task
	for i := range corruptTasks {
		task, _, err := c.Put(context.Background(), "c", api.PutRequest{
			ID:      fmt.Sprintf("c-%04d", i),
			Payload: []byte(fmt.Sprintf(`"%0*d"`, corruptPayload-2, i)),
			Delay:   new(api.Duration(time.Hour)),
		})
		if err != nil {
			t.Fatal(err)
		}
		put = append(put, task)
	}
	s.kill()
	return s, put
}

// newestWAL returns the path of the newest Pebble write-ahead log in dir.
func newestWAL(t *testing.T, dir string) string {
	t.Helper()
	logs, err := filepath.Glob(filepath.Join(dir, "*.log"))
	if err != nil || len(logs) == 0 {
		t.Fatalf("no write-ahead log in %s: %v", dir, err)
	}
	slices.Sort(logs) // zero-padded numbers: the newest last
	return logs[len(logs)-1]
}

// damage inverts n bytes of the file at off.
func damage(t *testing.T, path string, off int64, n int) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, n)
	if _, err := f.ReadAt(b, off); err != nil {
		t.Fatal(err)
	}
	for i := range b {
		b[i] ^= 0xff
	}
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

// fileSize returns the size of the file.
func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}
