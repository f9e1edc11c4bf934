package cluster

import (
	"context"
	"log/slog"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/prometheus/client_golang/prometheus"
)

// Channels of LISTEN/NOTIFY.
const (
	// chanMembers: a node joined, left or released partitions; payload
	// informative. Every node runs its lease loop at once.
	chanMembers = "hourglass_members"
	// chanSchedules: a schedule was set or deleted; payload its name.
	chanSchedules = "hourglass_schedules"
	// chanPolicies: a queue's policy was set or deleted; payload "1 QUEUE"
	// when it has a concurrency limit, else "0 QUEUE" (policy.go).
	chanPolicies = "hourglass_policies"
	// chanReady: tasks were made ready in queues (see below).
	chanReady = "hourglass_ready"
)

// Tasks made ready in a queue are announced to the other nodes on one
// channel for every queue, chanReady, which every node listens to from
// its start; its payload is lines "K QUEUE NODE", K tasks made ready in
// QUEUE by the node NODE that its own reservers cannot take, or "all
// QUEUE NODE", every reserver of QUEUE to look again (a pause or policy
// changed). A queue name has no space or newline (service.CheckQueue);
// a node's name comes last, so it may. A node acts on the lines of the
// queues it has reservers waiting on (wakeNotified) and passes over the
// others.
//
// One channel rather than one per queue, because a LISTEN per queue
// waited on is state a client creates by naming queues (issue 39: a
// node kept a LISTEN and its entries for every name a reserver ever
// waited on), and listening only while someone waits would cost a
// LISTEN and an UNLISTEN round trip on the one listen connection per
// long poll of a queue no one else waits on, serialising every
// reserver's first wait behind it. With one channel the node's LISTENs
// are a fixed few (the three above, this one and its partitions'), a
// reserver waits with no round trip, and no wake-up can be lost between
// a LISTEN and a wait. The cost is that every node receives every
// readiness notice, also of queues it has no reservers on: a notice is
// sent only for what the sender's own waiters cannot take, a batch of
// them goes as few notifications (notifier.flush), and passing over a
// line is a map lookup. The queue's name travels in the payload, so two
// queues never wake each other's reservers, as two queues sharing a
// hashed channel name could.

// partitionChannel is where timers of partition p are announced to its
// owner: one line "JOB FIRE_AT" per timer (see notifier).
func partitionChannel(p int) string { return partitionChannelPrefix + strconv.Itoa(p) }

const partitionChannelPrefix = "hourglass_p"

// announceLease is announce for the lease of a task that this node's
// statement took, which began at the membership's generation gen (0:
// unknown) and has committed. When this node held the task's partition
// throughout, with its lease running on past now (heldThrough), the
// statement committed while no other node could own the partition, and
// an owner after this one loads the timer from the row when it acquires
// the partition: the node arms the timer itself and sends no
// notification. Otherwise, as announce, except that a lease a second or
// more away is announced with the notifier's next batch, within
// notifyLinger (notifier.timerLater): at one node no reserve then sends
// a notification, and at N the reserves of a node share one statement of
// notifications every notifyLinger.
func (n *Node) announceLease(job uint64, at, dbNow int64, gen uint64) {
	if at-dbNow >= int64(n.opts.Window)+int64(n.opts.Window/2) {
		return
	}
	n.timers.armHeld(job, at)
	if gen == 0 || !n.members.heldThrough(n.partitionOf(job), gen) {
		n.notifications.timerLater(n.partitionOf(job), job, at, dbNow)
	}
}

// notifications is a node's role on LISTEN/NOTIFY: the listener (its
// LISTEN connection and goroutine, listener.go), the notifier (its
// batched NOTIFYs and goroutine, notifier.go), and the dispatch of what
// arrives to the node's other roles through handlers. It starts with
// start and ends with stop; the node's other locks are never taken by
// it, nor is a handler run or a command waited for under a lock.
// notifications is safe for concurrent use by multiple goroutines.
type notifications struct {
	db   *pool
	name string // the node's, to tell its own queue notifications
	log  *slog.Logger
	on   noteHandlers

	// listener and notifier are set by start; the notifier sends what is
	// pending when stop closes it.
	listener *listener
	notifier *notifier
}

// noteHandlers are what notifications tell the node's other roles of.
// Each runs on the listener's goroutine and must not block.
type noteHandlers struct {
	// tick: a node joined, left or released partitions, or a schedule
	// changed: the lease loop is to run now.
	tick func()
	// policy: a payload of chanPolicies.
	policy func(payload string)
	// timers: a payload of partition p's channel, "JOB FIRE_AT" lines.
	timers func(p int, payload string)
	// wake: k tasks were made ready by another node in queues (all: their
	// reservers are to look again).
	wake func(queues []string, k int, all bool)
	// lease: another node deleted a reserved task whose lease this is.
	lease func(lease string)
	// resync: the listen connection was lost and is back; notifications
	// sent meanwhile were lost.
	resync func()
	// hop observes, per task announced ready, the time from its
	// announcement to its NOTIFY's commit (nil: none).
	hop prometheus.Observer
}

// newNotifications returns the role, not started.
func newNotifications(db *pool, name string, log *slog.Logger, on noteHandlers) *notifications {
	return &notifications{db: db, name: name, log: log, on: on}
}

// start starts the notifier and connects the listener, each with its
// goroutine, and listens to chanReady and channels; on an error nothing
// is left running.
func (nt *notifications) start(ctx context.Context, channels ...string) error {
	nt.notifier = newNotifier(nt.db, nt.name, nt.log, nt.on.hop)
	l, err := newListener(ctx, nt.db.Config().ConnConfig.Copy(), nt.dispatch, nt.on.resync, nt.log)
	if err != nil {
		nt.notifier.close()
		return err
	}
	nt.listener = l
	if err := nt.listen(ctx, append([]string{chanReady}, channels...)...); err != nil {
		nt.stop()
		return err
	}
	return nil
}

// stop closes the listener, then the notifier once it has sent what is
// pending, and returns when their goroutines have exited. It is
// idempotent.
func (nt *notifications) stop() {
	if nt.listener != nil {
		nt.listener.close()
	}
	if nt.notifier != nil {
		nt.notifier.close()
	}
}

// listen makes the node listen to channels and returns once it does:
// every notification committed after listen returns reaches the node.
func (nt *notifications) listen(ctx context.Context, channels ...string) error {
	return nt.listener.listen(ctx, channels...)
}

// listening returns how many channels the node listens to (the
// hourglass_cluster_listen_channels gauge).
func (nt *notifications) listening() int {
	if nt.listener == nil {
		return 0
	}
	return nt.listener.count()
}

// unlisten stops listening to channels, without waiting.
func (nt *notifications) unlisten(channels ...string) {
	nt.listener.unlisten(channels...)
}

// timer announces to partition p's owner that job fires at (database
// ns), once the write that set it has committed.
func (nt *notifications) timer(p int, job uint64, at int64) { nt.notifier.timer(p, job, at) }

// timerLater announces as timer a timer that may wait for the next batch
// (notifier.timerLater); now is the database's clock when it was written.
func (nt *notifications) timerLater(p int, job uint64, at, now int64) {
	nt.notifier.timerLater(p, job, at, now)
}

// readyIn announces k tasks made ready in queue to the other nodes.
func (nt *notifications) readyIn(queue string, k int) { nt.notifier.readyIn(queue, k) }

// cancelLater drops the announcements of jobs' lease timers not sent yet
// (notifier.cancelLater).
func (nt *notifications) cancelLater(jobs []int64) { nt.notifier.cancelLater(jobs) }

// lookAgain has every other node's reservers on queue look again.
func (nt *notifications) lookAgain(queue string) { nt.notifier.readyIn(queue, lookAgain) }

// send sends payload on channel.
func (nt *notifications) send(channel, payload string) { nt.notifier.send(channel, payload) }

// dispatch acts on one notification. It runs on the listener's goroutine
// and does not block.
func (nt *notifications) dispatch(note *pgconn.Notification) {
	switch ch := note.Channel; {
	case ch == chanMembers || ch == chanSchedules:
		nt.on.tick()
	case ch == chanPolicies:
		nt.on.policy(note.Payload)
	case ch == chanReady:
		nt.readied(note.Payload)
	case strings.HasPrefix(ch, partitionChannelPrefix):
		p, err := strconv.Atoi(ch[len(partitionChannelPrefix):])
		if err != nil {
			return
		}
		nt.on.timers(p, note.Payload)
	}
}

// cancelled announces to the other nodes that a reserved task of queue
// was deleted, ending lease: a line "cancel QUEUE LEASE NODE" on
// chanReady (readied). A lease has no space or newline (both engines
// make them of hex digits). A node of an older version reads the line as
// a wake-up of QUEUE's reservers, which costs them a look.
func (nt *notifications) cancelled(queue, lease string) {
	nt.send(chanReady, cancelLine+" "+queue+" "+lease+" "+nt.name)
}

// cancelLine begins a line of chanReady announcing a lease ended by a
// delete (cancelled).
const cancelLine = "cancel"

// readied acts on a payload of chanReady: lines "K QUEUE SENDER", K
// tasks made ready in QUEUE by the node SENDER that its own reservers
// cannot take, or "all QUEUE SENDER", every reserver of QUEUE is to look
// again, or "cancel QUEUE LEASE SENDER", a reserved task of QUEUE deleted
// by SENDER, which ended LEASE (cancelled). Lines of this node (it acted
// on them already) and lines it cannot read are passed over.
// O(len(payload)).
func (nt *notifications) readied(payload string) {
	for payload != "" {
		var line string
		line, payload, _ = strings.Cut(payload, "\n")
		count, rest, _ := strings.Cut(line, " ")
		if count == cancelLine {
			_, rest, _ = strings.Cut(rest, " ")
			lease, sender, _ := strings.Cut(rest, " ")
			if lease != "" && sender != nt.name && nt.on.lease != nil {
				nt.on.lease(lease)
			}
			continue
		}
		queue, sender, _ := strings.Cut(rest, " ")
		if queue == "" || sender == nt.name {
			continue
		}
		k, err := strconv.Atoi(count)
		if err != nil || k <= 0 {
			k = 1
		}
		nt.on.wake([]string{queue}, k, count == "all")
	}
}
