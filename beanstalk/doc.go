// Package beanstalk serves the beanstalkd text protocol (doc/protocol.txt
// of beanstalkd 1.12) over a [service.Service] on either engine (the
// embedded store, or a node of a cluster on PostgreSQL), so that any
// beanstalkd client works against hourglass by changing an address.
//
// # Mapping
//
// A tube is a broker queue (names.go says how tube names with characters
// queues do not allow are spelled as queue names), a job id is the task's
// JobID, a buried job is a dead task, and a reservation is a lease that
// the connection keeps for each job it reserved. A job put over this
// protocol has the HTTP id of its job id in decimal, so it can be
// reserved, deleted or inspected over either protocol.
//
// # Durability
//
// Every broker write returns once it is durable (the broker's group
// commit), so INSERTED, DELETED, RELEASED, BURIED, KICKED and TOUCHED, and
// RESERVED, are sent only once what they report is on disk; a crash after
// the reply loses none of it. beanstalkd, by contrast, syncs its binlog
// at most every 50 ms.
//
// # On a cluster node
//
// `hourglass serve --postgres URL --beanstalk ADDR` serves the protocol
// from a node of a cluster (package cluster). A job id is the task's job
// id, unique across the cluster, so a job put over this protocol on one
// node can be peeked, reserved, deleted or kicked over this protocol or
// HTTP on any node, and a task put over HTTP anywhere is a job here.
// INSERTED, and every reply that reports a write, is sent after the
// PostgreSQL commit (synchronous_commit on: in the WAL, and on
// synchronous standbys if configured). Each command is one statement on
// the task's row, conditioned on its state and the lease the connection
// holds, so two nodes never both win a job.
//
// What is the cluster's, read from the database, the same on every node:
// the jobs and their states, stats-job, the current-jobs-* counts of
// stats and stats-tube (by a scan of the tasks table for stats and
// list-tubes, of the tube's tasks for stats-tube), peek-* and kick's
// order (the oldest burial first, by the database's clock), and
// pause-tube: a pause holds on every node, and its time left
// (pause-time-left) and count (cmd-pause-tube) are the same everywhere.
//
// What is this node's, since it started: the server-wide counters of
// stats (cmd-*, total-jobs, the connections, producers, workers and
// waiting, uptime, id, pid), and of stats-tube total-jobs (puts this
// node served, over either protocol), current-using, current-watching,
// current-waiting, cmd-delete, and "pause" (the delay of the last
// pause-tube sent to this node; 0 while a pause made on another node
// runs). list-tubes lists the tubes with a job in the database and those
// this node's connections use or watch. Sum a counter over the nodes for
// the cluster's.
//
// A reservation belongs to its connection, so to one node. When a
// connection closes its jobs are released at once, as on one node; when
// its node dies (SIGKILL, a lost network), they are released when their
// TTR runs out, by the owner of their partition.
//
// # Layout
//
// parse.go reads a command line into a command (no semantics; fuzzed);
// commands.go holds the one table from command to handler, and the
// handlers, each a thin call of one broker method; reserve.go the
// blocking reserve, TTR and DEADLINE_SOON; stats.go the YAML documents;
// tubes.go what the server knows of tubes beyond the broker (who uses and
// watches them); conn.go a connection's loop and replies; body.go how a
// put's body is read, its memory and its time bounded; server.go
// accepting, limits and shutdown. Package internal/loadgen drives a server of the
// protocol, this one or beanstalkd, for the benchmarks.
//
// # Differences from beanstalkd
//
// What a client can observe differently, each also said where it lives:
//
//   - Equal priorities are handed out in due-time order (a released or
//     kicked job is due when that happened), then put order; beanstalkd
//     orders them by job id alone. This is the broker's order.
//   - A job released because its connection closed counts a release in
//     stats-job; beanstalkd counts none.
//   - stats-job reports "delay" 0 for a job that was released or kicked,
//     "file" 0; stats reports "job-timeouts" and the binlog fields 0, and
//     "total-jobs" counts only the jobs put over this protocol
//     (stats.go).
//   - A delay or pause beyond the broker's MaxDelay (10 years by
//     default) is answered BAD_FORMAT; beanstalkd takes up to 2^32-1 s.
//   - list-tubes lists tubes by name; beanstalkd in the order it made
//     them. A tube's cmd-delete, and the "pause" of stats-tube, are kept
//     while a connection uses, watches or waits on the tube: a tube
//     holding jobs that no connection refers to has them 0, where
//     beanstalkd keeps them until it frees the tube (the server keeps
//     nothing for a tube no connection refers to). Its total-jobs and
//     cmd-pause-tube are the queue's counts while it exists (stats.go).
//   - A command line ends at its first CR-LF. beanstalkd, given a CR not
//     followed by LF, waits for more input until the line is too long.
//   - stats and stats-tube count urgent jobs by a scan of the ready jobs.
//   - A reserve or other command the broker cannot serve because it is
//     closed is answered DRAINING.
//   - A put's body must arrive within 30 s of its command line
//     (Options.BodyTimeout), or the connection is closed and nothing is
//     put; and a body's buffer grows as its bytes arrive (body.go).
//     beanstalkd waits for ever, with the declared size allocated.
//   - At Options.MaxConns open connections (16,384), a new connection
//     closes the one that has waited longest for a command holding no
//     reservation, or is closed at once when there is none (server.go);
//     beanstalkd accepts connections until it runs out of descriptors.
//   - A connection watches at most task.MaxWatch (1,000) tubes: a watch
//     past it is answered OUT_OF_MEMORY, as beanstalkd answers a watch
//     it has no memory for, and the watch list is unchanged. beanstalkd
//     has no bound but memory; here every reserve looks over the whole
//     watch list and waits on each of its tubes, so its length is the
//     cost of each reserve and of each wake-up of a waiting one. A
//     watched tube makes no queue: the broker keeps state for a tube
//     that holds nothing only while a reserve waits on it.
//
// Where beanstalkd 1.12 and later versions differ, this package does as
// 1.12 does: names unquoted in the stats documents, and
// reserve-with-timeout's argument read by strtol (a negative timeout
// waits for ever).
//
// The differential test (diff_test.go) runs one script against
// beanstalkd and this package and holds these differences to account.
package beanstalk
