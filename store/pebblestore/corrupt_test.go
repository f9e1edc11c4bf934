package pebblestore_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/hourglass-go/hourglass/store"
	"github.com/hourglass-go/hourglass/store/pebblestore"
	"github.com/hourglass-go/hourglass/task"
)

// corruptFixture opens a store with two tasks, a schedule, two queue
// records (q, and p with a push endpoint), and a history: job 9's two
// attempts and its Finished record, Seq 1, as task (q, a).
func corruptFixture(t *testing.T) (*pebblestore.Store, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "db")
	st := open(t, dir)
	var b store.Batch
	b.Put(store.Task{JobID: 1, Queue: "q", ID: "a", State: store.Waiting, Payload: []byte("one")})
	b.Put(store.Task{JobID: 2, Queue: "q", ID: "b", State: store.Waiting, Payload: []byte("two")})
	b.PutSchedule(store.Schedule{Name: "s", Cron: "* * * * *", Queue: "q"})
	b.PutQueue(store.Queue{Name: "q", Pauses: 1, Policy: task.Policy{Rate: &task.Rate{Limit: 10, Per: time.Second}, DeadLetter: "q-dead"}})
	b.PutQueue(store.Queue{Name: "p", Policy: task.Policy{Push: &task.Push{
		URL: "https://example.com/hook", Headers: map[string]string{"A-One": "1", "B-Two": "2"}, Secret: "s",
	}}})
	b.PutAttempt(store.Attempt{JobID: 9, N: 1, Started: 1, Ended: 2, Outcome: task.AttemptNacked, Error: "boom"})
	b.PutAttempt(store.Attempt{JobID: 9, N: 2, Started: 3, Ended: 4, Outcome: task.AttemptAcked})
	b.PutFinished(store.Finished{Seq: 1, JobID: 9, Queue: "q", ID: "a", Outcome: task.FinishedAcked, Finished: 5, Attempts: 2})
	if err := st.Commit(&b); err != nil {
		t.Fatal(err)
	}
	return st, dir
}

// queueBody returns the body of the queue record under key, without its
// checksum.
func queueBody(st *pebblestore.Store, key []byte) []byte {
	v, _ := st.Raw(key)
	return v[:len(v)-4]
}

// flip returns v with one bit of its middle byte flipped.
func flip(v []byte) []byte {
	v = append([]byte(nil), v...)
	v[len(v)/2] ^= 0x10
	return v
}

// wantCorrupt fails t unless err wraps store.ErrCorrupt and names what.
func wantCorrupt(t *testing.T, op string, err error, what string) {
	t.Helper()
	if !errors.Is(err, store.ErrCorrupt) || !strings.Contains(err.Error(), what) {
		t.Errorf("%s: %v; want an error wrapping ErrCorrupt naming %s", op, err, what)
	}
}

// TestCorrupt_Value damages one stored value at a time, through the
// test hook SetRaw, and checks that every method reading it reports
// ErrCorrupt naming the record, and that methods not reading it work.
func TestCorrupt_Value(t *testing.T) {
	t.Parallel()
	update := func(st store.Store) error {
		return st.Commit(&store.Batch{Ops: []store.Op{{Kind: store.UpdateTask, Task: store.Task{JobID: 1, Queue: "q", ID: "a", State: store.Reserved}}}})
	}
	recover := func(st store.Store) error { return st.Recover(func(store.Task) error { return nil }) }
	list := func(st store.Store) error { _, err := st.List("q", 0, 10); return err }
	task1 := func(st store.Store) error { _, err := st.Task(1); return err }
	queues := func(st store.Store) error { _, err := st.Queues(); return err }
	schedules := func(st store.Store) error { _, err := st.Schedules(); return err }
	attempts := func(st store.Store) error { _, err := st.Attempts(9); return err }
	last := func(st store.Store) error { _, err := st.LastFinished("q", "a"); return err }
	history := func(st store.Store) error { _, err := st.History("q", "", 0, 10); return err }
	pruneAll := func(st store.Store) error { _, err := st.PruneHistory(1<<62, 10); return err }
	flipped := func(st *pebblestore.Store, key []byte) []byte { v, _ := st.Raw(key); return flip(v) }
	// pushHeaders renames the headers in p's record: a good checksum over
	// a body whose headers are out of order or repeated.
	pushHeaders := func(one, two string) func(*pebblestore.Store, []byte) []byte {
		return func(st *pebblestore.Store, key []byte) []byte {
			body := queueBody(st, key)
			body = bytes.Replace(body, []byte("A-One"), []byte(one), 1)
			body = bytes.Replace(body, []byte("B-Two"), []byte(two), 1)
			return pebblestore.Seal(key, body)
		}
	}

	for _, c := range []struct {
		name   string
		key    []byte
		damage func(st *pebblestore.Store, key []byte) []byte // the raw value to write
		what   string                                         // the name the error gives
		fail   map[string]func(store.Store) error             // must fail
		work   map[string]func(store.Store) error             // must work
	}{
		{
			name: "Record", key: pebblestore.MetaKey(1),
			damage: func(st *pebblestore.Store, key []byte) []byte { v, _ := st.Raw(key); return flip(v) },
			what:   "task 1 record",
			// An update or delete reads nothing (store.UpdateTask): it
			// overwrites or removes the damaged value without seeing it.
			fail: map[string]func(store.Store) error{"Task": task1, "Recover": recover, "List": list},
		},
		{
			name: "RecordTruncated", key: pebblestore.MetaKey(1),
			damage: func(*pebblestore.Store, []byte) []byte { return []byte{1, 2} },
			what:   "task 1 record",
			fail:   map[string]func(store.Store) error{"Task": task1, "Recover": recover},
		},
		{
			// A whole value of task 2 under task 1's key: the checksum covers
			// the key.
			name: "RecordMisplaced", key: pebblestore.MetaKey(1),
			damage: func(st *pebblestore.Store, _ []byte) []byte { v, _ := st.Raw(pebblestore.MetaKey(2)); return v },
			what:   "task 1 record",
			fail:   map[string]func(store.Store) error{"Task": task1, "Recover": recover},
		},
		{
			// A good checksum over a body that is not a record.
			name: "RecordUndecodable", key: pebblestore.MetaKey(1),
			damage: func(_ *pebblestore.Store, key []byte) []byte { return pebblestore.Seal(key, []byte{1, 2, 3}) },
			what:   "task 1 record",
			fail:   map[string]func(store.Store) error{"Task": task1, "Recover": recover, "List": list},
		},
		{
			// Recover never reads a payload, so it does not see this one.
			name: "Payload", key: pebblestore.PayloadKey(1),
			damage: func(st *pebblestore.Store, key []byte) []byte { v, _ := st.Raw(key); return flip(v) },
			what:   "task 1 payload",
			fail:   map[string]func(store.Store) error{"Task": task1},
			work:   map[string]func(store.Store) error{"Recover": recover, "List": list, "update": update},
		},
		{
			name: "Index", key: pebblestore.IndexKey("q", "a"),
			damage: func(st *pebblestore.Store, key []byte) []byte { v, _ := st.Raw(key); return flip(v) },
			what:   `index entry of queue "q" id "a"`,
			fail: map[string]func(store.Store) error{
				"Lookup": func(st store.Store) error { _, err := st.Lookup("q", "a"); return err },
			},
			work: map[string]func(store.Store) error{"Task": task1, "Recover": recover},
		},
		{
			name: "ListEntry", key: pebblestore.ListKey("q", 2),
			damage: func(st *pebblestore.Store, key []byte) []byte { v, _ := st.Raw(key); return flip(v) },
			what:   `list entry of task 2 in queue "q"`,
			fail:   map[string]func(store.Store) error{"List": list},
		},
		{
			name: "Schedule", key: pebblestore.ScheduleKey("s"),
			damage: func(st *pebblestore.Store, key []byte) []byte { v, _ := st.Raw(key); return flip(v) },
			what:   `schedule "s"`,
			fail: map[string]func(store.Store) error{
				"Schedules": func(st store.Store) error { _, err := st.Schedules(); return err },
			},
		},
		{
			name: "Queue", key: pebblestore.QueueKey("q"),
			damage: func(st *pebblestore.Store, key []byte) []byte { v, _ := st.Raw(key); return flip(v) },
			what:   `queue "q" record`,
			fail:   map[string]func(store.Store) error{"Queues": queues},
			work:   map[string]func(store.Store) error{"Task": task1, "Recover": recover, "Schedules": schedules},
		},
		{
			// Good checksums over bodies that are not queue records: a
			// presence byte that is neither 0 nor 1, a body cut short, a
			// byte after the end.
			name: "QueueBadPresence", key: pebblestore.QueueKey("q"),
			damage: func(st *pebblestore.Store, key []byte) []byte {
				body := queueBody(st, key)
				body[16] = 2 // Retry's presence
				return pebblestore.Seal(key, body)
			},
			what: `queue "q" record`,
			fail: map[string]func(store.Store) error{"Queues": queues},
		},
		{
			name: "QueueTruncated", key: pebblestore.QueueKey("q"),
			damage: func(st *pebblestore.Store, key []byte) []byte {
				body := queueBody(st, key)
				return pebblestore.Seal(key, body[:len(body)-1])
			},
			what: `queue "q" record`,
			fail: map[string]func(store.Store) error{"Queues": queues},
		},
		{
			name: "QueueTrailing", key: pebblestore.QueueKey("q"),
			damage: func(st *pebblestore.Store, key []byte) []byte {
				return pebblestore.Seal(key, append(queueBody(st, key), 0))
			},
			what: `queue "q" record`,
			fail: map[string]func(store.Store) error{"Queues": queues},
		},
		{
			// The push group's presence byte, after 16 bytes of pause and
			// the six bytes of a policy with nothing else set.
			name: "QueuePushPresence", key: pebblestore.QueueKey("p"),
			damage: func(st *pebblestore.Store, key []byte) []byte {
				body := queueBody(st, key)
				if body[22] != 1 {
					panic("queue p's record has no push presence byte at 22")
				}
				body[22] = 2
				return pebblestore.Seal(key, body)
			},
			what: `queue "p" record`,
			fail: map[string]func(store.Store) error{"Queues": queues},
		},
		{
			name: "QueuePushHeadersOutOfOrder", key: pebblestore.QueueKey("p"),
			damage: pushHeaders("C-One", "B-Two"),
			what:   `queue "p" record`,
			fail:   map[string]func(store.Store) error{"Queues": queues},
		},
		{
			name: "QueuePushHeadersRepeated", key: pebblestore.QueueKey("p"),
			damage: pushHeaders("A-One", "A-One"),
			what:   `queue "p" record`,
			fail:   map[string]func(store.Store) error{"Queues": queues},
		},
		{
			name: "QueuePushTruncated", key: pebblestore.QueueKey("p"),
			damage: func(st *pebblestore.Store, key []byte) []byte {
				body := queueBody(st, key)
				return pebblestore.Seal(key, body[:len(body)-2]) // into the secret
			},
			what: `queue "p" record`,
			fail: map[string]func(store.Store) error{"Queues": queues},
		},
		{
			name: "Attempt", key: pebblestore.AttemptKey(9, 1),
			damage: flipped,
			what:   "attempt 1 of job 9",
			fail:   map[string]func(store.Store) error{"Attempts": attempts},
			work:   map[string]func(store.Store) error{"History": history, "LastFinished": last, "Recover": recover},
		},
		{
			name: "AttemptUndecodable", key: pebblestore.AttemptKey(9, 2),
			damage: func(_ *pebblestore.Store, key []byte) []byte { return pebblestore.Seal(key, make([]byte, 21)) },
			what:   "attempt 2 of job 9",
			fail:   map[string]func(store.Store) error{"Attempts": attempts},
		},
		{
			name: "Finished", key: pebblestore.FinishedKey("q", 1),
			damage: flipped,
			what:   `finished record 1 of queue "q"`,
			fail:   map[string]func(store.Store) error{"History": history, "LastFinished": last},
			// Pruning reads the time entry and the id entry alone.
			work: map[string]func(store.Store) error{"Attempts": attempts, "Queues": queues, "PruneHistory": pruneAll},
		},
		{
			name: "FinishedTrailing", key: pebblestore.FinishedKey("q", 1),
			damage: func(st *pebblestore.Store, key []byte) []byte {
				v, _ := st.Raw(key)
				return pebblestore.Seal(key, append(v[:len(v)-4:len(v)-4], 0))
			},
			what: `finished record 1 of queue "q"`,
			fail: map[string]func(store.Store) error{"History": history, "LastFinished": last},
		},
		{
			name: "FinishedID", key: pebblestore.FinishedIDKey("q", "a"),
			damage: flipped,
			what:   `last finished entry of queue "q" id "a"`,
			fail:   map[string]func(store.Store) error{"LastFinished": last, "PruneHistory": pruneAll},
			work:   map[string]func(store.Store) error{"History": history, "Attempts": attempts},
		},
		{
			name: "FinishedTime", key: pebblestore.FinishedTimeKey(5, 1),
			damage: flipped,
			what:   "time entry of finished record 1",
			fail:   map[string]func(store.Store) error{"PruneHistory": pruneAll},
			work:   map[string]func(store.Store) error{"History": history, "LastFinished": last, "Attempts": attempts},
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			st, _ := corruptFixture(t)
			defer st.Close()
			if err := st.SetRaw(c.key, c.damage(st, c.key)); err != nil {
				t.Fatal(err)
			}
			for name, fn := range c.fail {
				wantCorrupt(t, name, fn(st), c.what)
			}
			for name, fn := range c.work {
				if err := fn(st); err != nil {
					t.Errorf("%s: %v; want it to work, not reading the damaged value", name, err)
				}
			}
			// The damaged task's neighbour is unharmed.
			if got, err := st.Task(2); err != nil || string(got.Payload) != "two" {
				t.Errorf("Task(2) = %q, %v", got.Payload, err)
			}
		})
	}
}

// TestCorrupt_Open checks what Open refuses: a damaged next job id
// record or history seq record, a format version it does not know, and a
// Pebble database that is not a store.
func TestCorrupt_Open(t *testing.T) {
	t.Parallel()
	t.Run("HistorySeqRecord", func(t *testing.T) {
		st, dir := corruptFixture(t)
		v, _ := st.Raw(pebblestore.HistorySeqKey)
		if err := st.SetRaw(pebblestore.HistorySeqKey, flip(v)); err != nil {
			t.Fatal(err)
		}
		st.Close()
		_, err := pebblestore.Open(dir, pebblestore.Options{Logger: quiet})
		wantCorrupt(t, "Open", err, "history seq record")
	})
	t.Run("NextJobRecord", func(t *testing.T) {
		st, dir := corruptFixture(t)
		v, _ := st.Raw(pebblestore.NextJobKey)
		if err := st.SetRaw(pebblestore.NextJobKey, flip(v)); err != nil {
			t.Fatal(err)
		}
		st.Close()
		_, err := pebblestore.Open(dir, pebblestore.Options{Logger: quiet})
		wantCorrupt(t, "Open", err, "next job id record")
	})
	t.Run("FormatVersion", func(t *testing.T) {
		// A version from the future, whose layout this build cannot know,
		// and 0, which no build wrote.
		for _, v := range []uint32{4, 0} {
			st, dir := corruptFixture(t)
			raw := pebblestore.Seal(pebblestore.FormatKey, binary.LittleEndian.AppendUint32(nil, v))
			if err := st.SetRaw(pebblestore.FormatKey, raw); err != nil {
				t.Fatal(err)
			}
			st.Close()
			_, err := pebblestore.Open(dir, pebblestore.Options{Logger: quiet})
			if want := fmt.Sprintf("format version %d, and this build reads versions 1 to 3", v); err == nil || !strings.Contains(err.Error(), want) {
				t.Fatalf("Open of a version %d store: %v; want %q", v, err, want)
			}
		}
	})
	t.Run("FormatRecordDamaged", func(t *testing.T) {
		st, dir := corruptFixture(t)
		v, _ := st.Raw(pebblestore.FormatKey)
		if err := st.SetRaw(pebblestore.FormatKey, flip(v)); err != nil {
			t.Fatal(err)
		}
		st.Close()
		_, err := pebblestore.Open(dir, pebblestore.Options{Logger: quiet})
		wantCorrupt(t, "Open", err, "format record")
	})
	t.Run("NotAStore", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "db")
		db, err := pebble.Open(dir, &pebble.Options{Logger: pebbleQuiet{}})
		if err != nil {
			t.Fatal(err)
		}
		if err := db.Set([]byte("hello"), []byte("world"), pebble.Sync); err != nil {
			t.Fatal(err)
		}
		db.Close()
		_, err = pebblestore.Open(dir, pebblestore.Options{Logger: quiet})
		if err == nil || !strings.Contains(err.Error(), "without an hourglass format record") {
			t.Fatalf("Open of a foreign Pebble database: %v", err)
		}
	})
}

// pebbleQuiet is a Pebble logger that drops everything.
type pebbleQuiet struct{}

func (pebbleQuiet) Infof(string, ...any)  {}
func (pebbleQuiet) Errorf(string, ...any) {}
func (pebbleQuiet) Fatalf(format string, args ...any) {
	panic("pebble fatal: " + format)
}
