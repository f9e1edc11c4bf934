package beanstalk

import (
	"context"
	"os"
	"strconv"
	"time"

	"github.com/hourglass-go/hourglass/task"
)

// The stats commands answer YAML documents with beanstalkd 1.12's fields,
// in its order and quoting (prot.c, STATS_FMT, STATS_TUBE_FMT,
// STATS_JOB_FMT: only the version is quoted; later versions quote names
// too).
// Fields the server cannot measure are 0:
//
//   - stats-job "file" (no binlog files), and "delay" of a job that was
//     released or kicked (the broker records its due time, not the delay
//     last asked for);
//   - stats "job-timeouts" (the broker counts lease expiries only in its
//     metrics) and the binlog-* fields.
//
// Counts of commands, and the server's "total-jobs", are of this server
// since it started: jobs put over HTTP are not among them. A tube's
// "total-jobs" and "cmd-pause-tube" are the broker's counts of its queue
// (HTTP puts included) while the queue exists, and never less than this
// server's counts of them over this protocol while a connection refers
// to the tube (a queue that holds nothing is dropped with its counts;
// beanstalkd forgets a tube no one refers to that holds no job). On a cluster
// node, which of these are the cluster's and which the node's is said in
// package doc ("On a cluster node").

// yaml builds a YAML document of scalars as beanstalkd prints them.
type yaml []byte

func newYAML() yaml { return append(make(yaml, 0, 1024), "---\n"...) }

func (y yaml) int(key string, v int64) yaml {
	y = append(y, key...)
	y = append(y, ": "...)
	y = strconv.AppendInt(y, v, 10)
	return append(y, '\n')
}

func (y yaml) uint(key string, v uint64) yaml {
	y = append(y, key...)
	y = append(y, ": "...)
	y = strconv.AppendUint(y, v, 10)
	return append(y, '\n')
}

// str appends an unquoted string; quoted appends one in double quotes,
// unescaped (beanstalkd's names and versions need no escapes).
func (y yaml) str(key, v string) yaml {
	return append(append(append(append(y, key...), ": "...), v...), '\n')
}

func (y yaml) quoted(key, v string) yaml {
	return append(append(append(append(y, key...), ": \""...), v...), "\"\n"...)
}

// yamlList is list-tubes' document: "---\n- name\n..." .
func yamlList(names []string) []byte {
	y := newYAML()
	for _, n := range names {
		y = append(append(append(y, "- "...), n...), '\n')
	}
	return y
}

// secs returns d in whole seconds, truncated toward zero as beanstalkd's
// integer division does.
func secs(d time.Duration) int64 { return int64(d / time.Second) }

// jobState names a broker state as beanstalkd does.
func jobState(s task.State) string {
	if s == task.Dead {
		return "buried"
	}
	return s.String()
}

// statsJob answers the statistics of job cmd.id.
func (c *conn) statsJob(cmd *command) error {
	t, err := c.s.b.Job(cmd.id)
	if err != nil {
		return c.replyErr(err)
	}
	return c.replyData(jobStats(t, time.Now()))
}

// jobStats is stats-job's document for t at now.
func jobStats(t task.Task, now time.Time) []byte {
	var delay, left time.Duration
	if t.Releases == 0 && t.Kicks == 0 {
		delay = max(t.Due.Sub(t.Created), 0) // a put's Due is Created + delay
	}
	switch t.State {
	case task.Reserved:
		left = t.LeaseUntil.Sub(now)
	case task.Delayed:
		left = t.Due.Sub(now)
	}
	return newYAML().
		uint("id", t.JobID).
		str("tube", tubeOf(t.Queue)).
		str("state", jobState(t.State)).
		uint("pri", uint64(t.Priority)).
		int("age", secs(now.Sub(t.Created))).
		int("delay", secs(delay)).
		int("ttr", secs(t.TTR)).
		int("time-left", secs(left)).
		int("file", 0).
		uint("reserves", uint64(t.Attempts)).
		uint("timeouts", uint64(t.Timeouts)).
		uint("releases", uint64(t.Releases)).
		uint("buries", uint64(t.Buries)).
		uint("kicks", uint64(t.Kicks))
}

// statsTube answers the statistics of tube cmd.tube, NOT_FOUND if it
// does not exist. It takes O(ready jobs of the tube) (the urgent count).
func (c *conn) statsTube(cmd *command) error {
	q, ok := queueName(cmd.tube)
	if !ok || !c.s.tubes.exists(c.s.b, cmd.tube) {
		return c.reply(msgNotFound)
	}
	d, err := c.s.b.Queue(q)
	if err != nil {
		return c.replyErr(err)
	}
	tc := c.s.tubes.counts(cmd.tube)
	var pause uint64
	if d.PauseLeft > 0 {
		pause = uint64(tc.pause)
	}
	y := newYAML().
		str("name", cmd.tube).
		int("current-jobs-urgent", int64(d.Urgent)).
		int("current-jobs-ready", int64(d.Ready)).
		int("current-jobs-reserved", int64(d.Reserved)).
		int("current-jobs-delayed", int64(d.Delayed)).
		int("current-jobs-buried", int64(d.Dead)).
		uint("total-jobs", max(d.Puts, tc.puts)).
		int("current-using", int64(tc.using)).
		int("current-watching", int64(tc.watching)).
		int("current-waiting", int64(tc.waiting)).
		uint("cmd-delete", tc.deletes).
		uint("cmd-pause-tube", max(d.Pauses, tc.pauses)).
		uint("pause", pause).
		int("pause-time-left", secs(d.PauseLeft))
	return c.replyData(y)
}

// stats answers the server's statistics. It takes O(queues + ready jobs)
// (the urgent count).
func (c *conn) stats(*command) error {
	s := c.s
	var urgent, ready, reserved, delayed, buried int64
	qs, err := s.b.Queues(context.Background())
	if err != nil {
		return c.replyErr(err)
	}
	for _, q := range qs {
		ready += int64(q.Ready)
		reserved += int64(q.Reserved)
		delayed += int64(q.Delayed)
		buried += int64(q.Dead)
		if q.Ready > 0 {
			if d, err := s.b.Queue(q.Name); err == nil {
				urgent += int64(d.Urgent)
			}
		}
	}
	cmd := func(o op) uint64 { return s.stats.cmds[o].Load() }
	draining := "false"
	if s.draining.Load() {
		draining = "true"
	}
	ru := usage()
	sys := system()
	y := newYAML().
		int("current-jobs-urgent", urgent).
		int("current-jobs-ready", ready).
		int("current-jobs-reserved", reserved).
		int("current-jobs-delayed", delayed).
		int("current-jobs-buried", buried)
	for _, o := range [...]op{opPut, opPeek, opPeekReady, opPeekDelayed, opPeekBuried,
		opReserve, opReserveWithTimeout, opDelete, opRelease, opUse, opWatch, opIgnore,
		opBury, opKick, opTouch, opStats, opStatsJob, opStatsTube, opListTubes,
		opListTubeUsed, opListTubesWatched, opPauseTube} {
		y = y.uint("cmd-"+o.String(), cmd(o))
	}
	y = y.int("job-timeouts", 0).
		uint("total-jobs", s.stats.jobs.Load()).
		int("max-job-size", int64(s.opts.MaxJobSize)).
		int("current-tubes", int64(len(s.tubes.existing(s.b)))).
		int("current-connections", s.stats.conns.Load()).
		int("current-producers", s.stats.producers.Load()).
		int("current-workers", s.stats.workers.Load()).
		int("current-waiting", s.stats.waiting.Load()).
		int("total-connections", s.stats.totalConns.Load()).
		int("pid", int64(os.Getpid())).
		quoted("version", s.opts.Version).
		str("rusage-utime", ru.user).
		str("rusage-stime", ru.system).
		int("uptime", secs(time.Since(s.stats.started))).
		int("binlog-oldest-index", 0).
		int("binlog-current-index", 0).
		int("binlog-records-migrated", 0).
		int("binlog-records-written", 0).
		int("binlog-max-size", 0).
		str("draining", draining).
		str("id", s.stats.id).
		str("hostname", sys.hostname).
		str("os", sys.os).
		str("platform", sys.platform)
	return c.replyData(y)
}
