// Package cluster runs hourglass on many nodes over one PostgreSQL
// database: any node takes puts, reserves and acks for any task, while
// the timing wheels stay the clock. A [Node] is a [service.Engine], the
// engine of `hourglass serve --postgres` below service.New, with the
// semantics and errors of the embedded engine (package broker); the
// conformance suite
// (service/servicetest) and the black-box tests (package e2e) run over
// both. Where the embedded engine keeps every task's place in the memory
// of one process, a node keeps in its wheel only the timers of the
// partitions it owns, due within a window, and the database is both the
// record and the place where nodes meet.
//
// # Partitions, leases, epochs
//
// Tasks are split into a fixed number of partitions by job id (64, fixed
// when the schema is created: hourglass_meta.partitions). A partition's
// owner is the one node that fires its timers: it makes its delayed tasks
// ready when they fall due and settles its expired leases. Each row of
// hourglass_partitions holds an owner, a lease end and an epoch:
//
//	partition | owner | epoch | lease_until
//	       17 | n2    |     5 | 12:00:04.8   (database clock)
//
// Every node runs a lease loop (leases.go) every Lease/3 (default 5 s/3):
//
//  1. heartbeat and renew, in one statement: hourglass_nodes.alive_until
//     = now + Lease, and lease_until = that same end for the partitions
//     it holds, only where owner and epoch are still its own and the
//     lease has not run out; a partition it fails to renew is dropped at
//     once. One statement, so that a node's heartbeat never outlives its
//     leases: the others count it dead when they run out;
//  2. share = ceil(partitions / live nodes); above it, release the excess
//     (owner NULL), below it, acquire free or expired partitions, each
//     at epoch+1 (UPDATE ... FOR UPDATE SKIP LOCKED).
//
// An acquire or a release whose statement committed but whose answer
// never came (its context ran out, the connection broke) leaves an
// orphan: a partition leased in the database to this node's name that
// the node does not believe it holds. No other node may take it before
// its lease runs out, and its owner acts on nothing of it. The round
// after finds it in the rows it reads and frees it at the epoch read,
// ending that epoch's lease at once; the node's acquire (below its share)
// or another's takes it at epoch+1, which fences out anything still
// acting at the old one.
//
// A node also wakes at the moment the first lease held by another node
// runs out, and the first heartbeat of another node, of those running
// when its round read them (at once if they ran out during the round),
// so a dead node's partitions are taken over within one Lease of its
// last renewal and the time to notice and acquire; a joining or leaving node notifies the others
// (channel hourglass_members), who rebalance at once rather than at their
// next tick: a join settles within a few ticks.
//
// The epoch is the fence. Every write an owner makes as owner (firing
// timers, putting a schedule's occurrence) runs in a transaction that
// first locks its partitions' rows FOR KEY SHARE (FOR SHARE for a
// schedule's occurrence) where owner, epoch and an unexpired lease are
// still its own, and writes only the tasks of the partitions that passed.
// An acquisition or a release locks the row FOR UPDATE, so it waits for
// such a transaction to end (the owner's renewal, FOR NO KEY UPDATE,
// does not), and a transaction that starts after sees the
// new epoch: a node that was paused past its lease (SIGSTOP, a long GC, a
// partition of the network) writes nothing when it resumes, however late.
// Writes a client asks for (put, reserve, ack, nack, touch, kick, delete)
// need no owner: each is one statement on the task's row, conditioned on
// its state and lease token, and nodes serialise on the row's lock.
//
// A node restarted under its name waits for its previous run's heartbeat
// to run out (Open's register), then for that run's partition leases,
// which the same round renewed a moment later (awaitPreviousLeases), and
// takes them back in its first round; before Open returns it flushes the
// tasks of its partitions that fell due while none ran, so that a node,
// like the embedded engine after its recovery, is ready when its due
// tasks are. It logs "hourglass: recovered", and a warning when the
// previous run did not close (its heartbeat row was still there).
//
// # Timers
//
// A task's next timer is the column fire_at: its due time while it waits,
// its lease's end while reserved, NULL when ready or dead. An owner holds
// in its [hourglass.Keyed] wheel the timers of its partitions that fire
// before its horizon, one Window ahead (default 1 min), and loads the next
// window when half of the current one is left (timers.go). A node that
// writes a timer inside that reach (a put with a short delay, a
// reservation, a nack) announces it to the partition's owner on the
// channel hourglass_p<N> after committing; the owner listens to the
// channels of its partitions, and on acquiring one it listens first and
// loads second, so a timer is either announced to it or read by the load.
// A reservation's lease on a partition the node held throughout the
// statement, its lease surely running past the commit, is armed by the
// node and not announced (a later owner reads it with its load); a lease
// a second or more away on another owner's partition waits up to 100 ms
// to share the notifier's next statement (announceLease,
// notifier.timerLater).
// When a timer fires, the flusher makes the task ready in the database in
// one statement (sqlFlushDue in flushfast.go), which reads the fired
// tasks by job id; a lease ending it leaves to the whole statement
// (sqlFlush in flush.go), which settles it. The same statement reserves, among
// the tasks it makes due, as many as its own node's reservers waiting on
// their queues take, and hands them over when it returns: a task falling
// due reaches a waiting reserver of the owner in one round trip. For the
// rest it wakes its own node's other reservers waiting on the queue, as
// many as can take the tasks between them (one reserver of max 100 for
// 30 tasks), and notifies the other nodes of the queue (one channel for
// every queue, notifications.go), if any are left: the
// other nodes with reservers waiting wake them likewise. A reserve on any node takes ready tasks from every partition
// with FOR UPDATE SKIP LOCKED; waking reservers on every node for the
// same few tasks would have them race for those rows, all but one for
// nothing. Nothing polls for due tasks. A lost notification (the listen
// connection dropped, a crash between a commit and its announcement) is
// caught by the owner's sweep of timers overdue by more than a lease, at
// each tick.
//
// # Job ids: the beanstalkd protocol
//
// A task's job id comes from the sequence hourglass_job_ids, so it is
// unique across the cluster, and the methods that name a task by job id
// (jobs.go) work on any node, as the others do: one statement on the
// task's row, conditioned on its state and lease. What the broker keeps
// in memory for them, the database keeps for every node: a queue's pause
// is a row of hourglass_queues, which the reserve statement checks (and
// whose end a waiting reserver learns from it, since no one announces
// it), and a task's burial time is the column died, which orders
// peek-buried and kick (migration 003).
//
// # Policies
//
// A queue's policy (task.Policy: retry back-off, put defaults, rate and
// concurrency limits, dead-letter queue) is columns of its row of
// hourglass_queues (migration 005), beside its pause, and the rules are
// service/policy.go's, as for the embedded engine. No node caches it: the
// statements that apply it read the row by primary key (policy.go). A
// put takes its defaults in the INSERT; a nack, bury or release reads the
// task's attempts with the policy, decides with service.AfterFailure and
// settles the task with one statement conditioned on its lease, which
// moves a dying task to the dead-letter queue (failure.go); the flush
// settles expired leases of queues without such a policy itself, by
// service.Expired's verdicts on each row's counters (sqlDies), and leaves
// the others to its node, which settles them the same way. Rate
// and concurrency limits are held by a transaction that locks the queue's
// row, which only reserves of limited queues take (limits.go); a rate's
// tokens accrue on the database's clock, the only one the nodes share,
// so a step of that machine's wall clock forward fills buckets early
// (the embedded engine's accrue on the monotonic clock). A push
// queue's endpoint is a JSON column of the same row, its secrets (and
// the next one of a key being rotated) in the clear (policy.go).
//
// # History
//
// Every attempt of a task (hourglass_attempts) and every task that left
// its queue (hourglass_history), migration 006, are written by the
// statement that changes the task, as common table expressions of it:
// the ack's DELETE inserts the finished task, with the acked attempt in
// the same row (migration 018), in the same statement and commit, and
// likewise the nack, release, bury, delete and the flush's expiries
// (history.go). The history is as durable as the change it records and
// costs no round trip; with Options.History negative the inserts select
// nothing. The owner of partition 0 prunes what is older than the
// retention, a thousand rows per statement (prune.go), and vacuums
// hourglass_tasks when enough of its rows died (vacuum.go).
//
// # One clock
//
// Due times, lease ends and the check that a task is due all use the
// database server's clock (hourglass_now(), clock_timestamp() in Unix
// ns): a put's delay is added to it in the INSERT, and the flusher makes a
// task ready only WHERE fire_at <= hourglass_now(). The nodes' clocks
// only decide when to look: each node measures its offset from the
// database's clock at every tick and arms its wheel with it. A node whose
// clock (or offset) runs ahead fires early, finds the task not yet due
// and arms again for exactly the rest as the database counts it; one that
// runs behind fires late. So skew between nodes can make delivery late by
// the error of the offset (half a round trip when measured), never early.
// What can make it early is the database's own clock stepping back, or a
// failover to a standby whose clock is behind the old primary's: by that
// difference.
//
// # Durability
//
// A put is answered after its INSERT commits; an ack after its DELETE
// commits; a nack, touch, kick, delete and schedule change likewise: with
// the server's synchronous_commit=on, each is in the WAL (and on
// synchronous standbys, if configured) before the answer. Acks that
// arrive on a node together share one DELETE and one commit (group.go).
// Two writes commit with synchronous_commit off, set for their own
// transaction: firing timers, which promises nothing to anyone (a crash
// that loses it leaves the tasks due in the record), and a reservation,
// as the embedded broker's is not waited for either: a crash within the
// WAL flush makes the task ready again as if its lease had run out. Any
// synchronous commit after them flushes the WAL past them, so the ack of
// a task can never outlive its reservation.
//
// With a synchronous standby (synchronous_standby_names on the primary),
// every answer follows a commit on the standby's disk too: after the
// primary's loss and the standby's promotion nothing answered is lost.
// Nodes given both servers in one URL with
// target_session_attrs=read-write find the new primary on their own; the
// listener's reconnection resynchronises what notifications were lost
// (TestProcessFailover; the promise and its limits in docs/SCALING.md).
//
// # A database out of reach
//
// Every statement has a deadline, its caller's or Options.DBTimeout from
// its start, the wait for a connection included (pool.go), and the
// connections a connect timeout and keep-alive probes: a node whose
// database drops its packets answers 503 ("database unreachable") within
// the timeout rather than never. Once its heartbeat has not gone through
// for a lease, Ready says so (ready.go), and /readyz answers 503 until
// it does again; the other nodes take its partitions over as from a
// dead node, and its writes are fenced out by the epochs. Its loops
// retry after a back-off with jitter and log a failure that lasts once a
// second with a count (internal/retry). Nothing answered is lost: an answer
// follows a commit (TestDBCut in package e2e). Nor is anything left
// leased to no one: a reservation whose answer the link lost after the
// statement was sent is given back in the background (giveback.go: the
// node chose its leases' token, ends the statement's backend, then makes
// the tasks under the token ready again), not after the tasks' TTR
// (TestDBCut_LostReserve).
//
// # Roles
//
// A [Node] is its request methods over three roles, each a type with its
// own lock and goroutines, started by Open and stopped by Close:
//
//   - membership (leases.go, join.go, renew.go): the heartbeat, the
//     leases held (partition to epoch) and the lease loop;
//   - timers (timers.go, flush.go): the wheel, the jobs fired, the
//     horizon and the flusher;
//   - notifications (notifications.go): the listener and the notifier.
//
// The roles ask the membership what it holds and are told by handlers
// what it acquired (listen, then load the timers) and dropped (disarm
// the schedules, unlisten). The Node's own lock guards what stays on it:
// the waiting reservers (wait.go; their loop is service.LongPoll), the
// schedules armed, the policy watchers, and whether it is closed. The
// membership's lock is a leaf, taken under the Node's or the timers'
// lock; no other two of these locks nest, and none is held across a
// database call.
package cluster
