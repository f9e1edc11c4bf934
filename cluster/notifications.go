package cluster

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"log/slog"
	"strconv"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5/pgconn"
)

// Channels of LISTEN/NOTIFY. Channel names are identifiers of at most 63
// bytes, so a queue's channel carries a hash of its name; two queues
// sharing a channel only wake each other's reservers for nothing.
const (
	// chanMembers: a node joined, left or released partitions; payload
	// informative. Every node runs its lease loop at once.
	chanMembers = "hourglass_members"
	// chanSchedules: a schedule was set or deleted; payload its name.
	chanSchedules = "hourglass_schedules"
	// chanPolicies: a queue's policy was set or deleted; payload "1 QUEUE"
	// when it has a concurrency limit, else "0 QUEUE" (policy.go).
	chanPolicies = "hourglass_policies"
)

// partitionChannel is where timers of partition p are announced to its
// owner: one line "JOB FIRE_AT" per timer (see notifier).
func partitionChannel(p int) string { return partitionChannelPrefix + strconv.Itoa(p) }

const partitionChannelPrefix = "hourglass_p"

// queueChannel is where tasks made ready in queue are announced to the
// nodes with reservers waiting on it; payload "K NODE", K tasks made
// ready by the node NODE that its own reservers cannot take, or "all
// NODE", every reserver to look again (see dispatch). The
// flush computes the same name in SQL (sqlFlush): the prefix and the
// first 16 hex digits of the MD5 of the queue's name.
func queueChannel(queue string) string {
	sum := md5.Sum([]byte(queue))
	return queueChannelPrefix + hex.EncodeToString(sum[:8])
}

const queueChannelPrefix = "hourglass_q_"

// notifications is a node's role on LISTEN/NOTIFY: the listener (its
// LISTEN connection and goroutine, listener.go), the notifier (its
// batched NOTIFYs and goroutine, notifier.go), which channels the node
// listens to for which queues, and the dispatch of what arrives to the
// node's other roles through handlers. It starts with start and ends
// with stop; the node's other locks are never taken under mu, nor is mu
// held while a handler runs or a command waits for the database.
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

	mu sync.Mutex
	// channels maps a queue channel's name to the queues this node
	// listens to (or is about to) on it: append only. Guarded by mu.
	channels map[string][]string
	// queues holds, by queue, whether this node listens to the queue's
	// channel. A node keeps listening to a queue once a reserver waited
	// on it (one LISTEN per queue and node). Guarded by mu.
	queues map[string]*queueListen
}

// queueListen is whether a node listens to one queue's channel.
// Guarded by notifications.mu.
type queueListen struct {
	// listened is closed once the node listens to the queue's channel;
	// nil until a waiter asked, and again after a LISTEN failed.
	listened chan struct{}
	err      error
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
	// resync: the listen connection was lost and is back; notifications
	// sent meanwhile were lost.
	resync func()
}

// newNotifications returns the role, not started.
func newNotifications(db *pool, name string, log *slog.Logger, on noteHandlers) *notifications {
	return &notifications{
		db: db, name: name, log: log, on: on,
		channels: make(map[string][]string),
		queues:   make(map[string]*queueListen),
	}
}

// start starts the notifier and connects the listener, each with its
// goroutine, and listens to channels; on an error nothing is left
// running.
func (nt *notifications) start(ctx context.Context, channels ...string) error {
	nt.notifier = newNotifier(nt.db, nt.name, nt.log)
	l, err := newListener(ctx, nt.db.Config().ConnConfig.Copy(), nt.dispatch, nt.on.resync, nt.log)
	if err != nil {
		nt.notifier.close()
		return err
	}
	nt.listener = l
	if err := nt.listen(ctx, channels...); err != nil {
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

// unlisten stops listening to channels, without waiting.
func (nt *notifications) unlisten(channels ...string) {
	nt.listener.unlisten(channels...)
}

// listenQueue makes the node listen to queue's channel, once, and
// returns when it does: a task made ready after that wakes the node's
// waiters.
func (nt *notifications) listenQueue(ctx context.Context, queue string) error {
	nt.mu.Lock()
	q := nt.queues[queue]
	if q == nil {
		q = &queueListen{}
		nt.queues[queue] = q
		ch := queueChannel(queue)
		nt.channels[ch] = append(nt.channels[ch], queue)
	}
	if q.listened == nil {
		q.listened = make(chan struct{})
		nt.mu.Unlock()
		err := nt.listener.listen(ctx, queueChannel(queue))
		nt.mu.Lock()
		done := q.listened
		if err != nil {
			q.listened = nil // the next waiter tries again
		}
		q.err = err
		close(done)
		nt.mu.Unlock()
		return err
	}
	done := q.listened
	nt.mu.Unlock()
	select {
	case <-done:
	case <-ctx.Done():
		return ctx.Err()
	}
	nt.mu.Lock()
	defer nt.mu.Unlock()
	if q.listened == nil {
		return q.err
	}
	return nil
}

// timer announces to partition p's owner that job fires at (database
// ns), once the write that set it has committed.
func (nt *notifications) timer(p int, job uint64, at int64) { nt.notifier.timer(p, job, at) }

// readyIn announces k tasks made ready in queue to the other nodes.
func (nt *notifications) readyIn(queue string, k int) { nt.notifier.readyIn(queue, k) }

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
	case strings.HasPrefix(ch, partitionChannelPrefix):
		p, err := strconv.Atoi(ch[len(partitionChannelPrefix):])
		if err != nil {
			return
		}
		nt.on.timers(p, note.Payload)
	case strings.HasPrefix(ch, queueChannelPrefix):
		// "K SENDER": K tasks made ready by the node SENDER that its own
		// reservers cannot take; "all SENDER": every reserver is to look
		// again (a pause changed). SENDER woke its own already.
		count, sender, _ := strings.Cut(note.Payload, " ")
		if sender == nt.name {
			return
		}
		k, err := strconv.Atoi(count)
		if err != nil || k <= 0 {
			k = 1
		}
		nt.mu.Lock()
		queues := nt.channels[ch] // append only: its first len stay
		nt.mu.Unlock()
		if len(queues) > 0 {
			nt.on.wake(queues, k, count == "all")
		}
	}
}
