package beanstalk

import (
	"bytes"
	"context"
	"errors"
	"math"
	"slices"
	"time"

	"github.com/hourglass-go/hourglass/service"
	"github.com/hourglass-go/hourglass/task"
)

// handler serves one parsed command on c and writes its reply. An error
// it returns ends the connection (an I/O error, or quit).
type handler func(c *conn, cmd *command) error

// table maps each command to its handler. The replies are protocol.txt's;
// where a handler's answer differs from beanstalkd's, its comment says
// how.
var table = [numOps]handler{
	opPut:                (*conn).put,
	opPeek:               (*conn).peek,
	opPeekReady:          (*conn).peekState,
	opPeekDelayed:        (*conn).peekState,
	opPeekBuried:         (*conn).peekState,
	opReserve:            (*conn).reserve,
	opReserveWithTimeout: (*conn).reserve,
	opReserveJob:         (*conn).reserveJob,
	opDelete:             (*conn).delete,
	opRelease:            (*conn).release,
	opBury:               (*conn).bury,
	opKick:               (*conn).kick,
	opKickJob:            (*conn).kickJob,
	opTouch:              (*conn).touch,
	opStats:              (*conn).stats,
	opStatsJob:           (*conn).statsJob,
	opStatsTube:          (*conn).statsTube,
	opUse:                (*conn).useTube,
	opWatch:              (*conn).watchTube,
	opIgnore:             (*conn).ignoreTube,
	opListTubes:          (*conn).listTubes,
	opListTubeUsed:       (*conn).listTubeUsed,
	opListTubesWatched:   (*conn).listTubesWatched,
	opQuit:               (*conn).quit,
	opPauseTube:          (*conn).pauseTube,
}

// seconds turns a protocol count of seconds into a duration.
func seconds(n uint32) time.Duration { return time.Duration(n) * time.Second }

// tubeOf returns the tube of queue, or queue itself when it has none (a
// queue made over HTTP whose name starts with '-').
func tubeOf(queue string) string {
	if t, ok := tubeName(queue); ok {
		return t
	}
	return queue
}

// put reads the body and puts the job into the used tube. INSERTED is
// sent once the job is durable. A TTR of 0 is raised to 1 s, as
// beanstalkd does, and one over service.MaxTTR (a day) lowered to it; a
// delay over the server's limit (10 years by default) is answered
// BAD_FORMAT. beanstalkd takes either up to 2^32-1 s.
//
// Puts that a client pipelined behind this one, already read whole into
// the buffer and well formed, are put with it in one broker.PutBatch (one
// commit), and answered in order; see bufferedPut.
func (c *conn) put(cmd *command) error {
	if !c.producer {
		c.producer = true
		c.s.stats.producers.Add(1)
	}
	body, err := c.readBody(int(cmd.bytes) + 2)
	if err != nil {
		return err // gone, or too slow, mid-body: nothing is put
	}
	n := int(cmd.bytes)
	if body[n] != '\r' || body[n+1] != '\n' {
		return c.reply(msgExpectedCRLF)
	}
	if c.s.draining.Load() {
		return c.reply(msgDraining)
	}
	reqs := []task.PutRequest{putRequest(cmd, body[:n:n])}
	for len(reqs) < task.MaxBatch {
		next, body, ok := c.bufferedPut()
		if !ok {
			break
		}
		c.s.stats.cmds[opPut].Add(1)
		reqs = append(reqs, putRequest(&next, body))
	}
	res := c.s.b.PutBatch(context.Background(), c.useQueue, reqs)
	put := 0
	for _, r := range res {
		if r.Err == nil {
			put++
		}
	}
	c.s.tubes.put(c.use, put)
	for _, r := range res {
		var err error
		if r.Err != nil {
			err = c.replyErr(r.Err)
		} else {
			c.s.stats.jobs.Add(1)
			err = c.replyNumber("INSERTED", r.Task.JobID)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// putRequest is the broker's request for a put command with body. Its
// max_attempts is task.UnlimitedAttempts, not the queue policy's nor the
// service's default: a beanstalkd job is never dead of its releases or
// timeouts (only a bury makes it so), and its clients release a job
// again and again on purpose (a poll loop that releases with a delay).
func putRequest(cmd *command, body []byte) task.PutRequest {
	return task.PutRequest{
		Payload:     body,
		Delay:       seconds(cmd.delay),
		Priority:    cmd.pri,
		TTR:         min(seconds(max(cmd.ttr, 1)), service.MaxTTR),
		MaxAttempts: task.UnlimitedAttempts,
	}
}

// bufferedPut takes the next command from the read buffer if it is a
// well-formed put whose body and CR-LF are buffered too, and returns it
// with a copy of its body. It never reads from the socket, so it never
// waits; anything else stays buffered for the command loop.
func (c *conn) bufferedPut() (command, []byte, bool) {
	buf, _ := c.r.Peek(c.r.Buffered())
	i := bytes.Index(buf, []byte("\r\n"))
	if i < 0 || i+2 > maxLine {
		return command{}, nil, false
	}
	cmd, err := parse(buf[:i], c.s.opts.MaxJobSize)
	if err != nil || cmd.op != opPut {
		return command{}, nil, false
	}
	end := i + 2 + int(cmd.bytes) + 2
	if end > len(buf) || buf[end-2] != '\r' || buf[end-1] != '\n' {
		return command{}, nil, false
	}
	body := bytes.Clone(buf[i+2 : end-2])
	c.r.Discard(end)
	return cmd, body, true
}

// peek answers FOUND with job cmd.id in any tube.
func (c *conn) peek(cmd *command) error {
	t, err := c.s.b.Job(cmd.id)
	if err != nil {
		return c.replyErr(err)
	}
	return c.replyJob("FOUND", t.JobID, t.Payload)
}

// peekState answers FOUND with the used tube's next ready job (paused or
// not), its delayed job due soonest, or its oldest buried job.
func (c *conn) peekState(cmd *command) error {
	st := task.Ready
	switch cmd.op {
	case opPeekDelayed:
		st = task.Delayed
	case opPeekBuried:
		st = task.Dead
	}
	t, err := c.s.b.Peek(c.useQueue, st)
	if err != nil {
		return c.replyErr(err)
	}
	return c.replyJob("FOUND", t.JobID, t.Payload)
}

// reserveJob reserves job cmd.id if it is ready, delayed or buried.
func (c *conn) reserveJob(cmd *command) error {
	t, err := c.s.b.ReserveJob(context.Background(), cmd.id)
	if err != nil {
		return c.replyErr(err)
	}
	c.setWorker()
	return c.reserved(t)
}

// setWorker counts c among the workers (current-workers) once.
func (c *conn) setWorker() {
	if !c.worker {
		c.worker = true
		c.s.stats.workers.Add(1)
	}
}

// reserved holds t and answers RESERVED.
func (c *conn) reserved(t task.Task) error {
	c.held[t.JobID] = holding{queue: t.Queue, id: t.ID, lease: t.Lease, until: t.LeaseUntil, prio: t.Priority, tube: tubeOf(t.Queue)}
	return c.replyJob("RESERVED", t.JobID, t.Payload)
}

// delete deletes job cmd.id if this connection reserved it, or it is
// ready, delayed or buried; DELETED is sent once that is durable.
func (c *conn) delete(cmd *command) error {
	h, mine := c.held[cmd.id]
	tube := h.tube
	if !mine {
		// The tube, for its cmd-delete count; a job reserved by another
		// connection is not found below either.
		t, err := c.s.b.Job(cmd.id)
		if err != nil {
			return c.replyErr(err)
		}
		tube = tubeOf(t.Queue)
	}
	var err error
	if mine {
		// The worker's delete of the job it holds is its ack, by key: the
		// lease names the reservation, so no read by job id is needed. A
		// lease that ran out leaves a job any client may delete, unless
		// reserved again.
		if err = c.s.b.Ack(context.Background(), h.queue, h.id, h.lease); errors.Is(err, task.ErrLease) {
			err = c.s.b.DeleteJob(context.Background(), cmd.id, "")
		}
	} else {
		err = c.s.b.DeleteJob(context.Background(), cmd.id, "")
	}
	if mine && (err == nil || errors.Is(err, task.ErrNotFound)) {
		delete(c.held, cmd.id)
	}
	if err != nil {
		return c.replyErr(err)
	}
	c.s.tubes.deleted(tube)
	return c.reply(msgDeleted)
}

// release gives back job cmd.id, reserved by this connection, with a new
// priority and delay; RELEASED once durable. A delay over the broker's
// limit is answered BAD_FORMAT and the job stays reserved.
func (c *conn) release(cmd *command) error {
	h, ok := c.held[cmd.id]
	if !ok {
		return c.reply(msgNotFound)
	}
	err := c.s.b.ReleaseJob(context.Background(), cmd.id, h.lease, cmd.pri, seconds(cmd.delay))
	if err == nil || errors.Is(err, task.ErrNotFound) {
		delete(c.held, cmd.id)
	}
	if err != nil {
		return c.replyErr(err)
	}
	return c.reply(msgReleased)
}

// bury buries job cmd.id, reserved by this connection, with a new
// priority; BURIED once durable.
func (c *conn) bury(cmd *command) error {
	h, ok := c.held[cmd.id]
	if !ok {
		return c.reply(msgNotFound)
	}
	err := c.s.b.BuryJob(context.Background(), cmd.id, h.lease, cmd.pri)
	if err == nil || errors.Is(err, task.ErrNotFound) {
		delete(c.held, cmd.id)
	}
	if err != nil {
		return c.replyErr(err)
	}
	return c.reply(msgBuried)
}

// touch renews the reservation of job cmd.id for another TTR.
func (c *conn) touch(cmd *command) error {
	h, ok := c.held[cmd.id]
	if !ok {
		return c.reply(msgNotFound)
	}
	t, err := c.s.b.TouchJob(context.Background(), cmd.id, h.lease)
	if errors.Is(err, task.ErrNotFound) {
		delete(c.held, cmd.id)
	}
	if err != nil {
		return c.replyErr(err)
	}
	h.until = t.LeaseUntil
	c.held[cmd.id] = h
	return c.reply(msgTouched)
}

// kick makes up to cmd.bound jobs of the used tube ready: buried ones if
// it has any, else delayed ones.
func (c *conn) kick(cmd *command) error {
	n, err := c.s.b.KickQueue(context.Background(), c.useQueue, int(min(cmd.bound, math.MaxInt32)))
	if err != nil {
		return c.replyErr(err)
	}
	return c.replyNumber("KICKED", uint64(n))
}

// kickJob makes job cmd.id ready if it is buried or delayed.
func (c *conn) kickJob(cmd *command) error {
	if err := c.s.b.KickJob(context.Background(), cmd.id); err != nil {
		return c.replyErr(err)
	}
	return c.reply(msgKicked)
}

// useTube makes puts go to cmd.tube. A tube whose queue name would be
// too long (see names.go) is answered BAD_FORMAT.
func (c *conn) useTube(cmd *command) error {
	q, ok := queueName(cmd.tube)
	if !ok {
		return c.reply(msgBadFormat)
	}
	c.s.tubes.use(c.use, cmd.tube)
	c.use, c.useQueue = cmd.tube, q
	return c.replyLine("USING", c.use)
}

// watchTube adds cmd.tube to the watch list. A tube whose queue name
// would be too long is answered BAD_FORMAT; a tube past task.MaxWatch
// tubes watched, OUT_OF_MEMORY (what beanstalkd answers when it cannot
// add to a watch list). Watching a tube makes no queue: the broker keeps
// state for it only while a reserve waits on it. O(tubes watched).
func (c *conn) watchTube(cmd *command) error {
	q, ok := queueName(cmd.tube)
	if !ok {
		return c.reply(msgBadFormat)
	}
	if !slices.Contains(c.watch, cmd.tube) {
		if len(c.watch) >= task.MaxWatch {
			return c.reply(msgOutOfMemory)
		}
		c.watch = append(c.watch, cmd.tube)
		c.watchQueues = append(c.watchQueues, q)
		c.s.tubes.watch(cmd.tube, 1)
	}
	return c.replyNumber("WATCHING", uint64(len(c.watch)))
}

// ignoreTube takes cmd.tube off the watch list, unless it is the last.
func (c *conn) ignoreTube(cmd *command) error {
	i := slices.Index(c.watch, cmd.tube)
	if i >= 0 {
		if len(c.watch) < 2 {
			return c.reply(msgNotIgnored)
		}
		last := len(c.watch) - 1
		c.watch[i], c.watchQueues[i] = c.watch[last], c.watchQueues[last]
		c.watch, c.watchQueues = c.watch[:last], c.watchQueues[:last]
		c.s.tubes.watch(cmd.tube, -1)
	}
	return c.replyNumber("WATCHING", uint64(len(c.watch)))
}

// listTubes lists the tubes that exist, by name (beanstalkd lists them
// in the order they were made).
func (c *conn) listTubes(*command) error {
	return c.replyData(yamlList(sortedNames(c.s.tubes.existing(c.s.b))))
}

// listTubeUsed answers USING with the used tube.
func (c *conn) listTubeUsed(*command) error { return c.replyLine("USING", c.use) }

// listTubesWatched lists the watch list.
func (c *conn) listTubesWatched(*command) error { return c.replyData(yamlList(c.watch)) }

// quit ends the connection.
func (c *conn) quit(*command) error { return errQuit }

// pauseTube stops cmd.tube from handing out jobs for cmd.delay seconds (0
// ends a pause). NOT_FOUND if the tube does not exist; a pause over the
// broker's limit on delays is answered BAD_FORMAT.
func (c *conn) pauseTube(cmd *command) error {
	q, ok := queueName(cmd.tube)
	if !ok || !c.s.tubes.exists(c.s.b, cmd.tube) {
		return c.reply(msgNotFound)
	}
	if err := c.s.b.PauseQueue(context.Background(), q, seconds(cmd.delay)); err != nil {
		return c.replyErr(err)
	}
	c.s.tubes.paused(cmd.tube, cmd.delay)
	return c.reply(msgPaused)
}

// replyLine writes "word s\r\n".
func (c *conn) replyLine(word, s string) error {
	c.w.WriteString(word)
	c.w.WriteByte(' ')
	c.w.WriteString(s)
	_, err := c.w.WriteString("\r\n")
	return err
}
