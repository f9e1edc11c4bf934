package memstore

import (
	"cmp"
	"slices"

	"github.com/hourglass-go/hourglass/store"
)

// history keeps the attempt and Finished records in memory, with the
// orders its reads and its pruning need:
//
//   - byQueue: each queue's Seqs, ascending, so that a page newest first
//     is a binary search for before and a walk down;
//   - byTime: every record's (Finished time, Seq), ascending, so that
//     pruning oldest first takes from the front;
//   - last: (queue, id) → Seq of the record put last for it, which
//     LastFinished answers (a later put of the same task overwrites it,
//     whatever its Seq).
//
// Records hold only strings and numbers, so values copy them whole. A
// history is not safe for concurrent use: the Store's mutex guards it.
type history struct {
	attempts map[uint64][]store.Attempt // job → attempts by N
	finished map[uint64]store.Finished  // Seq → record
	byQueue  map[string][]uint64
	byTime   []timeKey
	last     map[[2]string]uint64
	seq      uint64 // highest Seq ever put
}

// timeKey orders Finished records by time, then Seq.
type timeKey struct {
	at  int64
	seq uint64
}

func compareTimeKey(a, b timeKey) int {
	return cmp.Or(cmp.Compare(a.at, b.at), cmp.Compare(a.seq, b.seq))
}

func newHistory() history {
	return history{
		attempts: make(map[uint64][]store.Attempt),
		finished: make(map[uint64]store.Finished),
		byQueue:  make(map[string][]uint64),
		last:     make(map[[2]string]uint64),
	}
}

// deleteAttempt removes attempt n of job, if any: O(a) for a attempts
// of the job.
func (h *history) deleteAttempt(job uint64, n uint32) {
	as := h.attempts[job]
	i, found := slices.BinarySearchFunc(as, n, func(x store.Attempt, n uint32) int { return cmp.Compare(x.N, n) })
	if found {
		h.attempts[job] = slices.Delete(as, i, i+1)
	}
}

// putAttempt writes a, replacing the attempt of the same job and N. It
// takes O(a) for a attempts of the job.
func (h *history) putAttempt(a store.Attempt) {
	as := h.attempts[a.JobID]
	i, found := slices.BinarySearchFunc(as, a.N, func(x store.Attempt, n uint32) int { return cmp.Compare(x.N, n) })
	if found {
		as[i] = a
		return
	}
	h.attempts[a.JobID] = slices.Insert(as, i, a)
}

// putFinished writes f, replacing the record of the same Seq, points
// (f.Queue, f.ID) at it and raises seq. It takes O(h) for h records (an
// insertion in the middle shifts; the broker's Seqs only grow, so its
// puts append).
func (h *history) putFinished(f store.Finished) {
	if _, ok := h.finished[f.Seq]; ok {
		h.remove(f.Seq, false)
	}
	h.finished[f.Seq] = f
	qs := h.byQueue[f.Queue]
	i, _ := slices.BinarySearch(qs, f.Seq)
	h.byQueue[f.Queue] = slices.Insert(qs, i, f.Seq)
	k := timeKey{f.Finished, f.Seq}
	j, _ := slices.BinarySearchFunc(h.byTime, k, compareTimeKey)
	h.byTime = slices.Insert(h.byTime, j, k)
	h.last[[2]string{f.Queue, f.ID}] = f.Seq
	h.seq = max(h.seq, f.Seq)
}

// remove drops the record seq from byQueue and its id entry if that still
// names it. When pruned, it drops its job's attempts too and leaves byTime
// to the caller, which trims its front; otherwise (a record replaced) it
// drops the record's byTime entry.
func (h *history) remove(seq uint64, pruned bool) {
	f := h.finished[seq]
	delete(h.finished, seq)
	qs := h.byQueue[f.Queue]
	if i, ok := slices.BinarySearch(qs, seq); ok {
		qs = slices.Delete(qs, i, i+1)
	}
	if len(qs) == 0 {
		delete(h.byQueue, f.Queue)
	} else {
		h.byQueue[f.Queue] = qs
	}
	if !pruned {
		if j, ok := slices.BinarySearchFunc(h.byTime, timeKey{f.Finished, seq}, compareTimeKey); ok {
			h.byTime = slices.Delete(h.byTime, j, j+1)
		}
	}
	id := [2]string{f.Queue, f.ID}
	if h.last[id] == seq {
		delete(h.last, id)
	}
	if pruned {
		delete(h.attempts, f.JobID)
	}
}

// attemptsOf returns a copy of job's attempts, by N.
func (h *history) attemptsOf(job uint64) []store.Attempt {
	return slices.Clone(h.attempts[job])
}

// lastFinished returns the record (queue, id) names, or store.ErrNotFound.
func (h *history) lastFinished(queue, id string) (store.Finished, error) {
	seq, ok := h.last[[2]string{queue, id}]
	if !ok {
		return store.Finished{}, store.ErrNotFound
	}
	return h.finished[seq], nil
}

// page returns up to limit records of queue below before (0: any),
// newest first, of outcome ("" any).
func (h *history) page(queue, outcome string, before uint64, limit int) []store.Finished {
	out := make([]store.Finished, 0)
	qs := h.byQueue[queue]
	i := len(qs)
	if before != 0 {
		i, _ = slices.BinarySearch(qs, before)
	}
	for i--; i >= 0 && len(out) < limit; i-- {
		if f := h.finished[qs[i]]; outcome == "" || f.Outcome == outcome {
			out = append(out, f)
		}
	}
	return out
}

// prune removes up to max records finished before before, oldest first,
// with their jobs' attempts, and returns how many it removed.
func (h *history) prune(before int64, max int) int {
	n := 0
	for n < max && n < len(h.byTime) && h.byTime[n].at < before {
		h.remove(h.byTime[n].seq, true)
		n++
	}
	h.byTime = slices.Delete(h.byTime, 0, n)
	return n
}
