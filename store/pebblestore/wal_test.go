package pebblestore_test

import (
	"bytes"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/hourglass-go/hourglass/store"
	"github.com/hourglass-go/hourglass/store/pebblestore"
)

// The WAL tests damage the end of Pebble's newest write-ahead log and
// check what Open makes of it, against the package doc ("Crashes"). Batch
// i is task i+1 alone, with a payload of walPayload bytes, so that each
// batch is one WAL record whose byte range is known: the WAL file's size
// after each Commit (Pebble preallocates with FALLOC_FL_KEEP_SIZE, so the
// size is what was written).

// walBlock is the block size of Pebble's log format (record/record.go).
const walBlock = 32 << 10

// walTask is the task of batch i.
func walTask(i int, payload int) store.Task {
	p := bytes.Repeat([]byte{byte(i), 0, byte(i >> 8), 0xa5}, payload/4)
	return store.Task{JobID: uint64(i + 1), Queue: "q", ID: "t" + string(rune('a'+i%26)) + string(rune('a'+i/26)), State: store.Waiting, Payload: p}
}

// newestWAL returns the path of the newest WAL file in dir.
func newestWAL(t *testing.T, dir string) string {
	t.Helper()
	logs, err := filepath.Glob(filepath.Join(dir, "*.log"))
	if err != nil || len(logs) == 0 {
		t.Fatalf("no WAL in %s: %v", dir, err)
	}
	slices.Sort(logs) // fixed-width numbers
	return logs[len(logs)-1]
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// copyDir copies the files of src to dst: with the store still open, the
// copy is what a crash (of the process, not the machine) would leave.
func copyDir(t *testing.T, src, dst string) {
	t.Helper()
	if err := os.MkdirAll(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if e.IsDir() || e.Name() == "LOCK" {
			continue
		}
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// walFixture commits n batches in a new store and returns its directory,
// a crash copy of it taken before Close, and ends[i], the offset in the
// WAL where batch i's record ends (it starts at ends[i-1]).
func walFixture(t *testing.T, n, payload int) (dir, crashed string, ends []int64) {
	t.Helper()
	dir = filepath.Join(t.TempDir(), "db")
	st := open(t, dir)
	wal := newestWAL(t, dir)
	ends = append(ends, fileSize(t, wal)) // after Open's own record
	for i := range n {
		b := &store.Batch{Ops: []store.Op{{Kind: store.PutTask, Task: walTask(i, payload)}}}
		if err := st.Commit(b); err != nil {
			t.Fatal(err)
		}
		ends = append(ends, fileSize(t, wal))
	}
	if w := newestWAL(t, dir); w != wal {
		t.Fatalf("the WAL rotated (%s, then %s): the fixture needs one log", wal, w)
	}
	crashed = filepath.Join(t.TempDir(), "crashed")
	copyDir(t, dir, crashed)
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	return dir, crashed, ends[1:]
}

// logBuffer is a slog destination for tests, safe for concurrent use.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// reopen opens dir, returning the store (nil on error), what it logged,
// and the error.
func reopen(dir string) (*pebblestore.Store, string, error) {
	var log logBuffer
	st, err := pebblestore.Open(dir, pebblestore.Options{Logger: slog.New(slog.NewTextHandler(&log, nil))})
	return st, log.String(), err
}

// survivors checks that st holds a prefix of the n batches, each whole
// and with values that pass their checksums, and returns its length.
func survivors(t *testing.T, st *pebblestore.Store, n, payload int) int {
	t.Helper()
	var jobs []uint64
	if err := st.Recover(func(task store.Task) error {
		jobs = append(jobs, task.JobID)
		return nil
	}); err != nil {
		t.Fatalf("Recover: %v", err)
	}
	for i, job := range jobs {
		if job != uint64(i+1) {
			t.Fatalf("survivors %v: not a prefix of the batches", jobs)
		}
		want := walTask(i, payload)
		got, err := st.Task(job)
		if err != nil || !bytes.Equal(got.Payload, want.Payload) {
			t.Fatalf("Task(%d): %d bytes, %v", job, len(got.Payload), err)
		}
		if l, err := st.Lookup("q", want.ID); err != nil || l != job {
			t.Fatalf("Lookup(q, %s) = %d, %v", want.ID, l, err)
		}
	}
	if len(jobs) > n {
		t.Fatalf("%d tasks from %d batches", len(jobs), n)
	}
	return len(jobs)
}

// damage flips one bit at off in path, or truncates path to off.
func damage(t *testing.T, path string, off int64, truncate bool) {
	t.Helper()
	if truncate {
		if err := os.Truncate(path, off); err != nil {
			t.Fatal(err)
		}
		return
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[off] ^= 0x08
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestWAL_CleanCloseTail: after a clean Close the last record of the WAL
// is the deletion of the running marker. Damaging it keeps every batch
// and is reported: Open warns that the store was not closed cleanly.
func TestWAL_CleanCloseTail(t *testing.T) {
	t.Parallel()
	for _, truncate := range []bool{false, true} {
		dir, _, ends := walFixture(t, 10, 200)
		wal := newestWAL(t, dir)
		last := ends[len(ends)-1]
		if size := fileSize(t, wal); size <= last {
			t.Fatalf("WAL of %d bytes, last batch ends at %d: no record of Close", size, last)
		}
		damage(t, wal, last+12, truncate) // inside the next record
		st, log, err := reopen(dir)
		if err != nil {
			t.Fatalf("truncate=%v: Open: %v", truncate, err)
		}
		if got := survivors(t, st, 10, 200); got != 10 {
			t.Errorf("truncate=%v: %d of 10 batches survived", truncate, got)
		}
		if !strings.Contains(log, "not closed cleanly") || !strings.Contains(log, "stopped reading at offset") {
			t.Errorf("truncate=%v: no warning of the damaged tail in the log:\n%s", truncate, log)
		}
		st.Close()

		// And a clean close after that is clean again.
		st, log, err = reopen(dir)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(log, "not closed cleanly") {
			t.Errorf("a warning after a clean close:\n%s", log)
		}
		st.Close()
	}
}

// TestWAL_TornTail: a crash copy whose last record is cut short or
// damaged opens with every batch but the last, which is gone whole, and
// the warning.
func TestWAL_TornTail(t *testing.T) {
	t.Parallel()
	const n, payload = 20, 300
	for _, truncate := range []bool{false, true} {
		_, crashed, ends := walFixture(t, n, payload)
		wal := newestWAL(t, crashed)
		if size := fileSize(t, wal); size != ends[n-1] {
			t.Fatalf("crash copy's WAL: %d bytes, want %d (the end of the last batch)", size, ends[n-1])
		}
		damage(t, wal, (ends[n-2]+ends[n-1])/2, truncate)
		st, log, err := reopen(crashed)
		if err != nil {
			t.Fatalf("truncate=%v: Open: %v", truncate, err)
		}
		if got := survivors(t, st, n, payload); got != n-1 {
			t.Errorf("truncate=%v: %d batches survived, want %d (all but the torn one)", truncate, got, n-1)
		}
		if !strings.Contains(log, "not closed cleanly") {
			t.Errorf("truncate=%v: no warning in the log:\n%s", truncate, log)
		}
		tail := ends[n-1] - ends[n-2] // the damaged record, whole
		if truncate {
			tail = (ends[n-2]+ends[n-1])/2 - ends[n-2] // what is left of it
		}
		wantDropped(t, log, tail)
		st.Close()
	}
}

// TestWAL_DamageBeforeTail: damage to synced records. In an earlier 32 KiB
// block of the WAL, later chunks prove it corruption and Open fails with
// ErrCorrupt. In the final block nothing later proves it, and Pebble takes
// it for the end of the log: Open succeeds with the batches before the
// damaged one, and loses it and those after it in that block, though they
// had been acknowledged. This is the limit the package doc states.
func TestWAL_DamageBeforeTail(t *testing.T) {
	t.Parallel()
	const n, payload = 68, 2000 // about 2 KiB a record: 4.5 blocks
	t.Run("EarlierBlock", func(t *testing.T) {
		_, crashed, ends := walFixture(t, n, payload)
		i := 3 // batch 3's record lies in block 0
		if ends[i] >= walBlock {
			t.Fatalf("batch %d ends at %d, past block 0", i, ends[i])
		}
		damage(t, newestWAL(t, crashed), (ends[i-1]+ends[i])/2, false)
		st, _, err := reopen(crashed)
		if err == nil {
			got := survivors(t, st, n, payload)
			st.Close()
			t.Fatalf("Open succeeded with %d of %d batches; want an error", got, n)
		}
		if !errors.Is(err, store.ErrCorrupt) {
			t.Fatalf("Open: %v; want an error wrapping ErrCorrupt", err)
		}
	})
	t.Run("FinalBlock", func(t *testing.T) {
		_, crashed, ends := walFixture(t, n, payload)
		lastBlock := (ends[n-1] - 1) / walBlock * walBlock
		i := slices.IndexFunc(ends, func(e int64) bool { return e > lastBlock+walBlock/8 })
		if i <= 0 || ends[i-1] < lastBlock || i >= n-2 {
			t.Fatalf("no whole record early in the final block (block at %d, ends %v)", lastBlock, ends)
		}
		damage(t, newestWAL(t, crashed), (ends[i-1]+ends[i])/2, false)
		st, log, err := reopen(crashed)
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		defer st.Close()
		if got := survivors(t, st, n, payload); got != i {
			t.Errorf("%d batches survived; want %d, those before the damaged one", got, i)
		}
		if !strings.Contains(log, "not closed cleanly") {
			t.Errorf("no warning in the log:\n%s", log)
		}
		// The warning must not promise what was just broken, and must
		// count the bytes dropped: from the damaged record to the end.
		wantDropped(t, log, ends[n-1]-ends[i-1])
	})
}

// wantDropped fails t unless the unclean-stop warning in log says that
// acknowledged writes may be lost, promises nothing else, and counts
// dropped bytes of the WAL.
func wantDropped(t *testing.T, log string, dropped int64) {
	t.Helper()
	if strings.Contains(log, "no Commit that returned is lost") || !strings.Contains(log, "writes acknowledged before the stop may be lost") {
		t.Errorf("the warning does not say that acknowledged writes may be lost:\n%s", log)
	}
	m := regexp.MustCompile(`dropped_bytes=(\d+)`).FindStringSubmatch(log)
	if m == nil {
		t.Fatalf("the warning counts no dropped bytes:\n%s", log)
	}
	if got, _ := strconv.ParseInt(m[1], 10, 64); got != dropped {
		t.Errorf("the warning counts %d dropped bytes; want %d:\n%s", got, dropped, log)
	}
}
