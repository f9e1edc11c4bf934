package pebblestore_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/hourglass-go/hourglass/store"
	"github.com/hourglass-go/hourglass/store/pebblestore"
)

// format1Dir copies testdata/format1, a store written by format 1 of this
// package (testdata/format1.go.txt), into a temporary directory.
func format1Dir(t *testing.T) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "db")
	if err := os.CopyFS(dst, os.DirFS("testdata/format1")); err != nil {
		t.Fatal(err)
	}
	// CopyFS makes files read-only; Pebble writes some of them.
	err := filepath.WalkDir(dst, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Chmod(path, map[bool]fs.FileMode{true: 0o755, false: 0o644}[d.IsDir()])
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

// format1Tasks are the tasks testdata/format1 holds, as its generator put
// them (task 6 was deleted after).
func format1Tasks() []store.Task {
	base := time.Date(2026, 11, 27, 3, 0, 0, 0, time.UTC).UnixNano()
	task := func(job uint64, queue, id string, st store.State, payload string) store.Task {
		return store.Task{JobID: job, Queue: queue, ID: id, State: st, Priority: uint32(job % 7), Due: base + int64(job)*int64(time.Second),
			Created: base - int64(time.Hour), TTR: 30 * time.Second, Payload: []byte(payload)}
	}
	r := task(4, "other", "4", store.Reserved, "reserved")
	r.Attempts, r.Lease, r.LeaseUntil = 1, "lease-4", base+int64(time.Minute)
	d := task(5, "other", "five", store.Dead, "dead")
	d.Attempts, d.MaxAttempts, d.Buries = 3, 3, 1
	tasks := []store.Task{
		task(1, "mail", "1", store.Waiting, "hello"),
		task(2, "mail", "welcome-7", store.Waiting, `{"a":1}`),
		task(3, "mail", "17", store.Waiting, "decimal id of another job"),
		r, d,
		task(7, "mail", "7", store.Waiting, ""),
	}
	for _, job := range []uint64{4095, 4096, 4097, 8191, 8192} {
		tasks = append(tasks, task(job, "bulk", itoa(job), store.Waiting, "bulk "+itoa(job)))
	}
	tasks = append(tasks, task(9000, "bulk", "named", store.Waiting, "bulk named"))
	for _, job := range []uint64{100000, 1 << 40} {
		tasks = append(tasks, task(job, "bulk", itoa(job), store.Waiting, "bulk "+itoa(job)))
	}
	return tasks
}

func itoa(n uint64) string { return strconv.FormatUint(n, 10) }

// checkFormat1 checks that st holds exactly the tasks and schedule of
// testdata/format1, through every read of the store.
func checkFormat1(t *testing.T, st *pebblestore.Store) {
	t.Helper()
	want := format1Tasks()
	var got []store.Task
	if err := st.Recover(func(tk store.Task) error { got = append(got, tk); return nil }); err != nil {
		t.Fatalf("Recover: %v", err)
	}
	if len(got) != len(want) {
		t.Fatalf("Recover: %d tasks, want %d", len(got), len(want))
	}
	for i, w := range want {
		g := got[i]
		g.Payload, w.Payload = nil, nil
		if !reflect.DeepEqual(g, w) {
			t.Errorf("Recover #%d = %+v, want %+v", i, g, w)
		}
	}
	for _, w := range want {
		g, err := st.Task(w.JobID)
		if err != nil || !bytes.Equal(g.Payload, w.Payload) || g.Queue != w.Queue || g.ID != w.ID || g.State != w.State {
			t.Errorf("Task(%d) = %+v, %v; want %+v", w.JobID, g, err, w)
		}
		if job, err := st.Lookup(w.Queue, w.ID); err != nil || job != w.JobID {
			t.Errorf("Lookup(%q, %q) = %d, %v; want %d", w.Queue, w.ID, job, err, w.JobID)
		}
	}
	if _, err := st.Task(6); err != store.ErrNotFound {
		t.Errorf("Task(6) (deleted) = %v, want ErrNotFound", err)
	}
	for _, k := range [][2]string{{"mail", "6"}, {"mail", "4"}, {"other", "1"}} {
		if job, err := st.Lookup(k[0], k[1]); err != store.ErrNotFound {
			t.Errorf("Lookup(%q, %q) = %d, %v; want ErrNotFound", k[0], k[1], job, err)
		}
	}
	for _, c := range []struct {
		queue string
		after uint64
		limit int
		want  []uint64
	}{
		{"mail", 0, 10, []uint64{1, 2, 3, 7}},
		{"other", 0, 10, []uint64{4, 5}},
		{"bulk", 0, 100, []uint64{4095, 4096, 4097, 8191, 8192, 9000, 100000, 1 << 40}},
		{"bulk", 4096, 2, []uint64{4097, 8191}},
		{"bulk", 9000, 10, []uint64{100000, 1 << 40}},
		{"nope", 0, 10, nil},
	} {
		page, err := st.List(c.queue, c.after, c.limit)
		var jobs []uint64
		for _, tk := range page {
			jobs = append(jobs, tk.JobID)
		}
		if err != nil || !slices.Equal(jobs, c.want) {
			t.Errorf("List(%q, %d, %d) = %v, %v; want %v", c.queue, c.after, c.limit, jobs, err, c.want)
		}
	}
	if scs, err := st.Schedules(); err != nil || len(scs) != 1 || scs[0].Name != "nightly" || scs[0].Cron != "0 3 * * *" {
		t.Errorf("Schedules() = %+v, %v; want nightly", scs, err)
	}
	if n, err := st.NextJobID(); err != nil || n != 1<<40+1 {
		t.Errorf("NextJobID() = %d, %v; want %d", n, err, uint64(1<<40+1))
	}
}

// TestUpgrade_Format1 opens a store written by format 1: Open upgrades it,
// every task reads back the same, the keys of format 1 are gone, and the
// next Open does not upgrade again.
func TestUpgrade_Format1(t *testing.T) {
	dir := format1Dir(t)
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	st, err := pebblestore.Open(dir, pebblestore.Options{Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	checkFormat1(t, st)
	if !strings.Contains(logs.String(), "store upgraded") || !strings.Contains(logs.String(), "tasks=14") {
		t.Errorf("log has no upgrade of 14 tasks:\n%s", logs.String())
	}
	// Format 1's keys: task 1's record, payload, list and index entries.
	v1 := [][]byte{
		append([]byte{'m'}, binary.BigEndian.AppendUint64(nil, 1)...),
		append([]byte{'p'}, binary.BigEndian.AppendUint64(nil, 1)...),
		binary.BigEndian.AppendUint64([]byte("q\x04mail"), 1),
		[]byte("i\x04mail1"),
		[]byte("i\x04mail17"),
		pebblestore.IndexKey("mail", "1"), // an implicit id: no entry in format 2
		pebblestore.UpgradeKey,
	}
	for _, k := range v1 {
		if _, err := st.Raw(k); err == nil {
			t.Errorf("key %x still there after the upgrade", k)
		}
	}
	if _, err := st.Raw(pebblestore.IndexKey("mail", "17")); err != nil {
		t.Errorf("index entry of id 17 (job 3) gone: %v", err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	logs.Reset()
	st, err = pebblestore.Open(dir, pebblestore.Options{Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if strings.Contains(logs.String(), "upgrad") {
		t.Errorf("second Open upgraded again:\n%s", logs.String())
	}
	checkFormat1(t, st)
}

// TestUpgrade_Resumes stops an upgrade half-way, as a crash would: the
// next Open finishes it, and the store reads back whole.
func TestUpgrade_Resumes(t *testing.T) {
	for _, stopAt := range []int{1, 3, 6} {
		dir := format1Dir(t)
		stop := errors.New("stopped")
		restore := pebblestore.SetUpgradeHook(3, func(n int) error {
			if n == stopAt {
				return stop
			}
			return nil
		})
		_, err := pebblestore.Open(dir, pebblestore.Options{Logger: quiet})
		restore()
		if !errors.Is(err, stop) {
			t.Fatalf("stop after batch %d: Open = %v, want the hook's error", stopAt, err)
		}
		var logs bytes.Buffer
		st, err := pebblestore.Open(dir, pebblestore.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		if err != nil {
			t.Fatalf("stop after batch %d: reopen: %v", stopAt, err)
		}
		if !strings.Contains(logs.String(), "resumed=true") {
			t.Errorf("stop after batch %d: reopen did not resume the upgrade:\n%s", stopAt, logs.String())
		}
		checkFormat1(t, st)
		st.Close()
	}
}

// TestUpgrade_PowerLoss cuts the power during an upgrade, after a given
// batch (or once it has finished), keeping none or half of what was not
// synced: the clone opens, finishes the upgrade if it must, and reads
// back whole.
func TestUpgrade_PowerLoss(t *testing.T) {
	for _, cutAt := range []int{1, 4, 9, 15, 0} { // 0: after the upgrade
		for _, unsynced := range []int{0, 50} {
			fs := vfs.NewCrashableMem()
			if _, err := vfs.Clone(vfs.Default, fs, "testdata/format1", "db", vfs.CloneSync); err != nil {
				t.Fatal(err)
			}
			var clone *vfs.MemFS
			cut := func() {
				clone = fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: unsynced, RNG: rand.New(rand.NewPCG(uint64(cutAt), uint64(unsynced)))})
			}
			restore := pebblestore.SetUpgradeHook(3, func(n int) error {
				if n == cutAt {
					cut()
				}
				return nil
			})
			st, err := pebblestore.OpenFS("db", pebblestore.Options{Logger: quiet}, fs, false)
			restore()
			if err != nil {
				t.Fatal(err)
			}
			if clone == nil {
				if cutAt != 0 {
					t.Fatalf("the upgrade had fewer than %d batches", cutAt)
				}
				cut()
			}
			st.Close()
			st, err = pebblestore.OpenFS("db", pebblestore.Options{Logger: quiet}, clone, false)
			if err != nil {
				t.Fatalf("cut after batch %d, %d%% unsynced kept: Open: %v", cutAt, unsynced, err)
			}
			checkFormat1(t, st)
			st.Close()
		}
	}
}

// formatOf returns the format version st's format record holds.
func formatOf(t *testing.T, st *pebblestore.Store) uint32 {
	t.Helper()
	v, err := st.Raw(pebblestore.FormatKey)
	if err != nil || len(v) != 8 {
		t.Fatalf("format record %x, %v", v, err)
	}
	return binary.LittleEndian.Uint32(v)
}

// format2Dir writes the tasks and schedule of testdata/format1 as a store
// of format 2 holds them: records ending after the lease (this package
// writes a last error after it, empty here: the record's last byte), and
// format record 2. It returns the store's directory and the records as
// stored.
func format2Dir(t *testing.T) (string, map[uint64][]byte) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "db")
	st := open(t, dir)
	defer st.Close()
	var b store.Batch
	for _, tk := range format1Tasks() {
		b.Put(tk)
	}
	b.PutSchedule(store.Schedule{Name: "nightly", Cron: "0 3 * * *", Queue: "mail"})
	if err := st.Commit(&b); err != nil {
		t.Fatal(err)
	}
	records := map[uint64][]byte{}
	for _, tk := range format1Tasks() {
		key := pebblestore.MetaKey(tk.JobID)
		v, err := st.Raw(key)
		if err != nil {
			t.Fatal(err)
		}
		// A record of format 3 ends in its last error and Reserved: an
		// empty string and 8 zero bytes here, which format 2 did not have.
		body := v[:len(v)-4]
		tail := body[len(body)-9:]
		if !bytes.Equal(tail, make([]byte, 9)) {
			t.Fatalf("record of task %d does not end in an empty last error and no reservation: %x", tk.JobID, body)
		}
		v2 := pebblestore.Seal(key, body[:len(body)-9])
		if err := st.SetRaw(key, v2); err != nil {
			t.Fatal(err)
		}
		records[tk.JobID] = v2
	}
	if err := st.SetRaw(pebblestore.FormatKey, pebblestore.Seal(pebblestore.FormatKey, binary.LittleEndian.AppendUint32(nil, 2))); err != nil {
		t.Fatal(err)
	}
	return dir, records
}

// TestUpgrade_Format2 opens a store of format 2: Open upgrades it by
// rewriting the format record alone (every task record stays as format 2
// wrote it), every task and the schedule read back with no last error,
// a task updated with one reads it back beside the records of format 2,
// and the next Open does not upgrade again.
func TestUpgrade_Format2(t *testing.T) {
	dir, records := format2Dir(t)
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	st, err := pebblestore.Open(dir, pebblestore.Options{Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	if s := logs.String(); !strings.Contains(s, "store upgraded") || !strings.Contains(s, "from=2 to=3") {
		t.Errorf("log has no upgrade from 2 to 3:\n%s", s)
	}
	if v := formatOf(t, st); v != 3 {
		t.Errorf("format record %d after the upgrade, want 3", v)
	}
	for job, want := range records {
		if got, err := st.Raw(pebblestore.MetaKey(job)); err != nil || !bytes.Equal(got, want) {
			t.Errorf("record of task %d rewritten by the upgrade: %x, %v; want %x", job, got, err, want)
		}
	}
	checkFormat1(t, st)

	// An update writes a record of format 3, with its last error.
	tk, err := st.Task(2)
	if err != nil {
		t.Fatal(err)
	}
	tk.Attempts++
	tk.LastError = "smtp: 421 try again"
	if err := st.Commit(&store.Batch{Ops: []store.Op{{Kind: store.UpdateTask, Task: tk}}}); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	logs.Reset()
	st, err = pebblestore.Open(dir, pebblestore.Options{Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if strings.Contains(logs.String(), "upgrad") {
		t.Errorf("second Open upgraded again:\n%s", logs.String())
	}
	var lastErrors []string
	err = st.Recover(func(r store.Task) error {
		if r.LastError != "" {
			lastErrors = append(lastErrors, fmt.Sprintf("%d: %s", r.JobID, r.LastError))
		}
		return nil
	})
	if err != nil || !slices.Equal(lastErrors, []string{"2: smtp: 421 try again"}) {
		t.Errorf("Recover: last errors %q, %v; want task 2's alone", lastErrors, err)
	}
	if got, err := st.Task(2); err != nil || got.LastError != tk.LastError || got.Attempts != tk.Attempts || string(got.Payload) != `{"a":1}` {
		t.Errorf("Task(2) = %+v, %v; want attempts %d, last error %q", got, err, tk.Attempts, tk.LastError)
	}
	if page, err := st.List("mail", 0, 10); err != nil || len(page) != 4 || page[1].LastError != tk.LastError || page[0].LastError != "" {
		t.Errorf("List(mail) = %+v, %v; want task 2 with its last error", page, err)
	}
	if scs, err := st.Schedules(); err != nil || len(scs) != 1 || scs[0].Name != "nightly" {
		t.Errorf("Schedules() = %+v, %v; want nightly", scs, err)
	}
}

// TestUpgrade_Format1ResumedFromFormat2 resumes an upgrade from format 1
// that a build of format 2 began (format record 2, upgrade marker there):
// Open finishes it, and the format record ends at 3.
func TestUpgrade_Format1ResumedFromFormat2(t *testing.T) {
	dir := format1Dir(t)
	stop := errors.New("stopped")
	restore := pebblestore.SetUpgradeHook(3, func(n int) error {
		if n == 2 {
			return stop
		}
		return nil
	})
	_, err := pebblestore.Open(dir, pebblestore.Options{Logger: quiet})
	restore()
	if !errors.Is(err, stop) {
		t.Fatalf("Open = %v, want the hook's error", err)
	}
	db, err := pebble.Open(dir, &pebble.Options{Logger: pebbleQuiet{}})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Set(pebblestore.FormatKey, pebblestore.Seal(pebblestore.FormatKey, binary.LittleEndian.AppendUint32(nil, 2)), pebble.Sync); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	st, err := pebblestore.Open(dir, pebblestore.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if s := logs.String(); !strings.Contains(s, "resumed=true") || !strings.Contains(s, "from=1") {
		t.Errorf("Open did not resume the upgrade from 1:\n%s", s)
	}
	if v := formatOf(t, st); v != 3 {
		t.Errorf("format record %d after the upgrade, want 3", v)
	}
	checkFormat1(t, st)
}
