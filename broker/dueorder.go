package broker

import (
	"github.com/RaduBerinde/btreemap"

	"github.com/hourglass-go/hourglass/service"
	"github.com/hourglass-go/hourglass/task"
)

// dueOrder keeps each queue's live tasks in due order: ascending (due
// time, job id), the order of FindTasks (service.Cursor). It is a B-tree
// per queue, by the queue's index, of 16-byte keys: about 20 bytes a task
// with the nodes' slack (measured: docs/BENCHMARKS.md, find), beside the
// 16 of its slot.
//
// It lives in memory rather than as a second key in the store because the
// broker already holds every task's due time and queue in its slot, and
// every change of either goes through slots.set or slots.del, which keep
// dueOrder: nothing is written to disk for it, a put or an update of the
// store stays one key, the store needs no new format, and a crash cannot
// leave it out of step with the records, since Open rebuilds it from them
// with the slots. A key in the store would cost a second write on every
// put and every change of a due time, and its removal would need the old
// due time, which an update does not read.
//
// add and remove take O(log n) for a queue of n tasks, after walks its
// entries in order. dueOrder is not safe for concurrent use: the broker's
// mutex guards it, as it guards the slots.
type dueOrder struct {
	queues map[uint32]*btreemap.BTreeMap[dueKey, struct{}]
}

// dueKey is a task's place in its queue's due order.
type dueKey struct {
	due int64
	job uint64
}

// cmpDue orders dueKeys in due order (task.CompareDue).
func cmpDue(a, b dueKey) int { return task.CompareDue(a.due, a.job, b.due, b.job) }

// dueDegree is the B-tree's degree: nodes of 31 to 63 keys (0.5 to 1
// KiB), few enough levels at 10M tasks (4 to 5) and little slack.
const dueDegree = 32

// add puts job, due at due, into queue q's order.
func (o *dueOrder) add(q uint32, due int64, job uint64) {
	t := o.queues[q]
	if t == nil {
		if o.queues == nil {
			o.queues = make(map[uint32]*btreemap.BTreeMap[dueKey, struct{}])
		}
		t = btreemap.New[dueKey, struct{}](dueDegree, cmpDue)
		o.queues[q] = t
	}
	t.ReplaceOrInsert(dueKey{due, job}, struct{}{})
}

// remove takes job, due at due, out of queue q's order; a queue left
// empty drops its tree, so that an index given to another queue later
// starts empty.
func (o *dueOrder) remove(q uint32, due int64, job uint64) {
	t := o.queues[q]
	if t == nil {
		return
	}
	t.Delete(dueKey{due, job})
	if t.Len() == 0 {
		delete(o.queues, q)
	}
}

// after calls f with the tasks of queue q after c in due order, due
// before before (0: any), until f returns false.
func (o *dueOrder) after(q uint32, c service.Cursor, before int64, f func(due int64, job uint64) bool) {
	t := o.queues[q]
	if t == nil {
		return
	}
	hi := btreemap.Max[dueKey]()
	if before != 0 {
		hi = btreemap.LT(dueKey{before, 0})
	}
	for k := range t.Ascend(btreemap.GT(dueKey{c.Due, c.Job}), hi) {
		if !f(k.due, k.job) {
			return
		}
	}
}

// len returns the number of tasks of queue q.
func (o *dueOrder) len(q uint32) int {
	if t := o.queues[q]; t != nil {
		return t.Len()
	}
	return 0
}
