package pebblestore_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/hourglass-go/hourglass/store"
	"github.com/hourglass-go/hourglass/store/pebblestore"
)

// The crash tests commit numbered batches from crashCommitters goroutines
// and note which Commits returned. Batch n of a run holds the jobs
// base+n*k .. base+n*k+k-1, each with a payload that follows from its job
// id (crashPayload), so that after a crash every task can be checked and
// every batch seen to be whole or absent.
const (
	crashCommitters = 2
	crashEnv        = "HOURGLASS_PEBBLESTORE_CRASH_DIR"
)

// crashPayload is the payload of job: 50 to 561 bytes, zeros included.
func crashPayload(job uint64) []byte {
	p := make([]byte, 50+job%512)
	r := rand.New(rand.NewPCG(job, 77))
	for i := range p {
		p[i] = byte(r.UintN(4)) // many zero bytes
	}
	return p
}

// crashBatch returns batch n of a run starting at job id base, of k tasks.
func crashBatch(base, n, k uint64) *store.Batch {
	var b store.Batch
	for i := range k {
		job := base + n*k + i
		b.Put(store.Task{
			JobID: job, Queue: fmt.Sprintf("q%d", job%3), ID: fmt.Sprintf("job-%d", job),
			State: store.Waiting, Due: int64(job), Payload: crashPayload(job),
		})
	}
	return &b
}

// commitLoop commits batches 0, 1, 2, ... of a run from crashCommitters
// goroutines until stop is closed or limit batches are taken, calling
// acked(n) after batch n's Commit returned nil. It returns the first
// Commit error.
func commitLoop(st store.Store, base, k uint64, limit int, stop <-chan struct{}, acked func(n uint64)) error {
	var next atomic.Uint64
	var wg sync.WaitGroup
	errs := make(chan error, crashCommitters)
	for range crashCommitters {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				n := next.Add(1) - 1
				if n >= uint64(limit) {
					return
				}
				if err := st.Commit(crashBatch(base, n, k)); err != nil {
					errs <- fmt.Errorf("batch %d: %w", n, err)
					return
				}
				acked(n)
			}
		})
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// checkRun checks the tasks of one run, job ids base to end (exclusive),
// after a crash: every acknowledged
// batch is present, every batch present is whole, each task has its own
// payload and record, and at most crashCommitters batches beyond the
// acknowledged ones (those whose Commit was in progress) survived. It
// returns how many batches of the run the store holds. With payloads it
// reads every task of the run with Task as well.
func checkRun(t *testing.T, st store.Store, base, end, k uint64, acked map[uint64]bool, payloads bool) int {
	t.Helper()
	count := map[uint64]uint64{} // batch → tasks present
	err := st.Recover(func(task store.Task) error {
		if task.JobID < base || task.JobID >= end {
			return nil
		}
		n := (task.JobID - base) / k
		count[n]++
		if task.Due != int64(task.JobID) || task.ID != fmt.Sprintf("job-%d", task.JobID) {
			return fmt.Errorf("task %d: record %+v is not its own", task.JobID, task)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("Recover after the crash: %v", err)
	}
	for n := range acked {
		if count[n] != k {
			t.Errorf("batch %d was acknowledged, and %d of its %d tasks survived", n, count[n], k)
		}
	}
	extra := 0
	for n, c := range count {
		if c != k {
			t.Errorf("batch %d: %d of its %d tasks survived: not atomic", n, c, k)
		}
		if !acked[n] {
			extra++
		}
		if !payloads {
			continue
		}
		for i := range k {
			job := base + n*k + i
			got, err := st.Task(job)
			if err != nil {
				t.Fatalf("Task(%d): %v", job, err)
			}
			if !bytes.Equal(got.Payload, crashPayload(job)) {
				t.Fatalf("Task(%d): payload of %d bytes is not its own", job, len(got.Payload))
			}
		}
	}
	if extra > crashCommitters {
		t.Errorf("%d batches survived without an acknowledgement; at most %d Commits were in progress", extra, crashCommitters)
	}
	return len(count)
}

// TestCrash_Kill runs a child process (this test binary, in
// TestCrash_Child) that commits batches and prints each batch number once
// its Commit returned, kills it with SIGKILL at a random moment, reopens
// the directory and checks every batch the child acknowledged (checkRun).
// It does so a few times over the same directory, so that a crash also
// hits a store that was recovered from one, and rechecks every earlier
// run each time.
//
// What this can catch: SIGKILL keeps what the process handed to the
// kernel, so this test proves that Commit returns only after its batch is
// in the WAL file (Pebble writes the WAL from a goroutine of its own, so a
// Commit returning before that would lose acknowledged batches here), that
// batches are atomic across a crash, and that replay after an unclean stop
// keeps everything. It cannot see a missing fsync: the page cache survives
// SIGKILL. TestCrash_PowerLoss covers that, and shows it would fail.
func TestCrash_Kill(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs child processes")
	}
	dir := filepath.Join(t.TempDir(), "db")
	type run struct {
		base, k uint64
		acked   map[uint64]bool
	}
	var runs []run
	r := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	for iter := range 4 {
		k := uint64(1 + iter*7) // 1, 8, 15, 22 tasks a batch
		cmd := exec.Command(os.Args[0], "-test.run=^TestCrash_Child$", "-test.count=1", "-test.timeout=60s")
		cmd.Env = append(os.Environ(), crashEnv+"="+dir, "HOURGLASS_CRASH_K="+strconv.FormatUint(k, 10))
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cur := run{k: k, acked: map[uint64]bool{}}
		started := make(chan uint64, 1)
		lines := make(chan struct{})
		go func() {
			defer close(lines)
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				f := strings.Fields(sc.Text())
				if len(f) != 2 {
					continue // a torn last line, or the testing package's
				}
				v, err := strconv.ParseUint(f[1], 10, 64)
				if err != nil {
					continue
				}
				switch f[0] {
				case "crash-base":
					started <- v
				case "crash-acked":
					cur.acked[v] = true
				}
			}
		}()
		select {
		case cur.base = <-started:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			t.Fatalf("child did not start: %s", stderr.String())
		}
		time.Sleep(time.Duration(100+r.IntN(500)) * time.Millisecond)
		if err := cmd.Process.Kill(); err != nil { // SIGKILL
			t.Fatal(err)
		}
		<-lines // the pipe is read to its end before Wait closes it
		err = cmd.Wait()
		if ee, ok := err.(*exec.ExitError); !ok || ee.Success() {
			t.Fatalf("child ended with %v before the kill: %s", err, stderr.String())
		}
		if len(cur.acked) == 0 {
			t.Fatalf("run %d: the child acknowledged no batch: %s", iter, stderr.String())
		}
		runs = append(runs, cur)

		st := open(t, dir)
		for i, r := range runs {
			end := ^uint64(0)
			if i+1 < len(runs) {
				end = runs[i+1].base
			}
			n := checkRun(t, st, r.base, end, r.k, r.acked, i == len(runs)-1)
			if i == len(runs)-1 {
				t.Logf("run %d: %d tasks a batch, %d batches acknowledged, %d present", iter, r.k, len(r.acked), n)
			}
		}
		if err := st.Close(); err != nil {
			t.Fatal(err)
		}
		if t.Failed() {
			return
		}
	}
}

// TestCrash_Child is the child of TestCrash_Kill: it commits batches until
// it is killed, printing "crash-acked n" after batch n's Commit returned.
func TestCrash_Child(t *testing.T) {
	dir := os.Getenv(crashEnv)
	if dir == "" {
		t.Skip("the child process of TestCrash_Kill")
	}
	k, err := strconv.ParseUint(os.Getenv("HOURGLASS_CRASH_K"), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	st, err := pebblestore.Open(dir, pebblestore.Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	base, err := st.NextJobID()
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	say := func(s string) {
		mu.Lock()
		defer mu.Unlock()
		io.WriteString(os.Stdout, s) // unbuffered: a write(2) each
	}
	say(fmt.Sprintf("crash-base %d\n", base))
	stop := make(chan struct{})
	time.AfterFunc(20*time.Second, func() { close(stop) }) // if the parent is gone
	err = commitLoop(st, base, k, 1<<30, stop, func(n uint64) {
		say(fmt.Sprintf("crash-acked %d\n", n))
	})
	t.Fatalf("not killed: %v", err)
}

// TestCrash_PowerLoss simulates losing power: the store runs on Pebble's
// crashable in-memory file system, and at a random moment while batches
// commit, CrashClone takes what a disk would hold after a power cut (all
// synced data, and a random half of the unsynced blocks and directory
// entries: torn tails included). The clone is opened and checked like a
// killed process (checkRun).
//
// This is the test that sees a missing fsync, and it shows that it can:
// the NoSync case commits without syncing the WAL, loses acknowledged
// batches in the clone, and is checked to fail.
func TestCrash_PowerLoss(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name     string
		noSync   bool
		unsynced int // percent of unsynced data kept by the clone
	}{
		{"Sync/NoUnsyncedKept", false, 0},
		{"Sync/HalfUnsyncedKept", false, 50},
		{"NoSync/MustLose", true, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			for seed := range uint64(3) {
				lost := powerLoss(t, seed, c.noSync, c.unsynced)
				if c.noSync && lost == 0 {
					t.Fatalf("seed %d: commits without fsync lost no acknowledged batch: the check cannot see a missing sync", seed)
				}
				if !c.noSync && lost != 0 {
					t.Fatalf("seed %d: %d acknowledged batches lost", seed, lost)
				}
			}
		})
	}
}

// powerLoss runs one power-loss round and returns how many acknowledged
// batches the clone lacks (checkRun's other checks fail t directly, except
// for noSync, where only the count is wanted).
func powerLoss(t *testing.T, seed uint64, noSync bool, unsynced int) (lost int) {
	t.Helper()
	fs := vfs.NewCrashableMem()
	st, err := pebblestore.OpenFS("db", pebblestore.Options{Logger: quiet}, fs, noSync)
	if err != nil {
		t.Fatal(err)
	}
	const k = 5
	r := rand.New(rand.NewPCG(seed, 3))
	crashAfter := 20 + r.IntN(60) // acknowledged batches before the cut

	var mu sync.Mutex
	acked := map[uint64]bool{}
	stop := make(chan struct{})
	cut := make(chan map[uint64]bool, 1)
	var clone *vfs.MemFS
	done := make(chan error, 1)
	go func() {
		done <- commitLoop(st, 1, k, 1000, stop, func(n uint64) {
			mu.Lock()
			defer mu.Unlock()
			acked[n] = true
			if len(acked) == crashAfter {
				// Every batch acknowledged so far must be in the clone.
				snapshot := make(map[uint64]bool, len(acked))
				for n := range acked {
					snapshot[n] = true
				}
				clone = fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: unsynced, RNG: rand.New(rand.NewPCG(seed, 4))})
				cut <- snapshot
				close(stop)
			}
		})
	}()
	want := <-cut
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	st2, err := pebblestore.OpenFS("db", pebblestore.Options{Logger: quiet}, clone, false)
	if err != nil {
		t.Fatalf("Open after the power cut: %v", err)
	}
	defer st2.Close()
	if noSync {
		present := map[uint64]bool{}
		_ = st2.Recover(func(task store.Task) error {
			present[(task.JobID-1)/k] = true
			return nil
		})
		for n := range want {
			if !present[n] {
				lost++
			}
		}
		return lost
	}
	checkRun(t, st2, 1, ^uint64(0), k, want, true)
	return 0
}
