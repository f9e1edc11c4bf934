package beanstalk

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/hourglass-go/hourglass/task"
)

// conn is one client connection. Its goroutine (serve) reads a command,
// answers it, and reads the next, as beanstalkd serves each connection:
// in order, one command at a time. Everything but state is owned by that
// goroutine.
type conn struct {
	s  *Server
	nc net.Conn
	r  *bufio.Reader
	w  *bufio.Writer
	// line holds the command line being read.
	line []byte

	// state is connIdle while the goroutine waits for a command line,
	// connActive while it serves one, and connClosed once Shutdown, or a
	// new connection at MaxConns (Server.track), has closed it while
	// idle.
	state atomic.Int32
	// idleSince is when the goroutine last began to wait for a command
	// (UnixNano) if it then held no reservation, and 0 if it held one:
	// what Server.track closes at MaxConns is the idle connection with
	// the least, so that a worker that reserved a job and works on it
	// keeps its connection, and its job. Reservations change only while
	// a command is served, so the value holds while it waits.
	idleSince atomic.Int64
	// evicted is set, under s.mu, when track closes c for a new
	// connection: c no longer counts against MaxConns.
	evicted bool

	// use is the tube puts go to, and useQueue its queue.
	use, useQueue string
	// watch is the watch list, in beanstalkd's order (appended to; an
	// ignored tube's place is taken by the last one), and watchQueues
	// their queues, in the same order.
	watch, watchQueues []string
	// held are the jobs this connection has reserved, by job id.
	held map[uint64]holding
	// producer and worker: a put, or a reserve, was served.
	producer, worker bool
}

// holding is a reservation this connection holds.
type holding struct {
	// queue and id name the job by key, for its ack.
	queue, id string
	lease     string
	until     time.Time // the lease's end
	prio      uint32    // to release the job with when the connection closes
	tube      string
}

const (
	connActive int32 = iota
	connIdle
	connClosed
)

// I/O buffer sizes: a command line fits in the reader's; bodies longer
// than either go through to the socket.
const (
	readBuffer  = 4096
	writeBuffer = 4096
)

// closeWriteTimeout bounds how long a closing connection tries to send
// the replies it has written.
const closeWriteTimeout = 5 * time.Second

// errQuit ends a connection without an I/O error: quit, or Shutdown.
var errQuit = errors.New("hourglass: beanstalk: connection closing")

func newConn(s *Server, nc net.Conn) *conn {
	c := new(conn)
	*c = conn{
		s:           s,
		nc:          nc,
		r:           bufio.NewReaderSize(flushReader{c}, readBuffer),
		w:           bufio.NewWriterSize(nc, writeBuffer),
		line:        make([]byte, 0, maxLine),
		use:         defaultTube,
		useQueue:    defaultTube,
		watch:       []string{defaultTube},
		watchQueues: []string{defaultTube},
		held:        make(map[uint64]holding),
	}
	c.state.Store(connActive)
	s.tubes.use("", defaultTube)
	s.tubes.watch(defaultTube, 1)
	return c
}

// serve is the connection's goroutine.
func (c *conn) serve() {
	defer c.close()
	for {
		if len(c.held) == 0 {
			c.idleSince.Store(time.Now().UnixNano())
		} else {
			c.idleSince.Store(0)
		}
		c.state.Store(connIdle)
		if c.s.closing() {
			return
		}
		line, tooLong, err := c.readLine()
		if !c.state.CompareAndSwap(connIdle, connActive) || err != nil {
			return // Shutdown, or the client is gone
		}
		if tooLong {
			err = c.reply(msgBadFormat)
		} else {
			err = c.dispatch(line)
		}
		if err != nil {
			return
		}
	}
}

// flushReader is what c.r reads from: the socket, after sending the
// replies written so far. Replies to pipelined commands thus go out
// together, when the server runs out of input, and never wait while the
// server waits for input.
type flushReader struct{ c *conn }

func (f flushReader) Read(p []byte) (int, error) {
	if f.c.w.Buffered() > 0 {
		if err := f.c.w.Flush(); err != nil {
			return 0, err
		}
	}
	return f.c.nc.Read(p)
}

// closeIfIdle makes c's goroutine end if it waits for a command: its
// read fails at once, and it closes the connection after sending the
// replies it has written, for up to closeWriteTimeout (a client that
// reads none of them would otherwise hold it in that write). A command
// already read but not begun is dropped unanswered. It reports whether
// c was idle. closeIfIdle is Shutdown's and track's, under s.mu.
func (c *conn) closeIfIdle() bool {
	if c.state.CompareAndSwap(connIdle, connClosed) {
		c.nc.SetReadDeadline(time.Unix(1, 0))
		c.nc.SetWriteDeadline(time.Now().Add(closeWriteTimeout))
		return true
	}
	return false
}

// close ends the connection: it sends the replies written, closes the
// socket, then releases its reservations (at their priority, with no
// delay, as beanstalkd does) and drops its tubes and counts.
func (c *conn) close() {
	c.nc.SetWriteDeadline(time.Now().Add(closeWriteTimeout))
	c.w.Flush()
	c.nc.Close()
	for job, h := range c.held {
		err := c.s.b.ReleaseJob(context.Background(), job, h.lease, h.prio, 0)
		if err != nil && !errors.Is(err, task.ErrNotFound) && !errors.Is(err, task.ErrClosed) {
			c.s.log.Error("hourglass: beanstalk: releasing a job of a closed connection", "job_id", job, "err", err)
		}
	}
	c.s.tubes.use(c.use, "")
	for _, t := range c.watch {
		c.s.tubes.watch(t, -1)
	}
	if c.producer {
		c.s.stats.producers.Add(-1)
	}
	if c.worker {
		c.s.stats.workers.Add(-1)
	}
	c.s.forget(c)
}

// readLine reads the next command line and returns it without its CR-LF
// (in c.line, valid until the next call). A line ends at the first CR-LF;
// a lone LF is part of it. A line longer than maxLine, CR-LF included,
// is read and dropped through its CR-LF, and reported as tooLong.
func (c *conn) readLine() (line []byte, tooLong bool, err error) {
	c.line = c.line[:0]
	var last byte // while dropping: the last byte dropped
	for {
		chunk, err := c.r.ReadSlice('\n')
		if err != nil && err != bufio.ErrBufferFull {
			return nil, false, err
		}
		ended := err == nil // chunk ends with '\n'
		if !tooLong {
			c.line = append(c.line, chunk...)
			n := len(c.line)
			crlf := ended && n >= 2 && c.line[n-2] == '\r'
			switch {
			case crlf && n <= maxLine:
				return c.line[:n-2], false, nil
			case crlf:
				return nil, true, nil
			case n < maxLine:
				continue
			}
			tooLong, last = true, c.line[n-1]
			c.line = c.line[:0]
			continue
		}
		if ended {
			prev := last
			if len(chunk) >= 2 {
				prev = chunk[len(chunk)-2]
			}
			if prev == '\r' {
				return nil, true, nil
			}
		}
		last = chunk[len(chunk)-1]
	}
}

// dispatch parses line and serves the command. An error ends the
// connection.
func (c *conn) dispatch(line []byte) error {
	cmd, err := parse(line, c.s.opts.MaxJobSize)
	if cmd.op != opUnknown {
		c.s.stats.cmds[cmd.op].Add(1)
	}
	switch err {
	case nil:
		return table[cmd.op](c, &cmd)
	case errJobTooBig:
		defer c.bodyDeadline()()
		if _, err := io.CopyN(io.Discard, c.r, int64(cmd.bytes)+2); err != nil {
			return err
		}
		return c.reply(msgJobTooBig)
	case errUnknownCommand:
		return c.reply(msgUnknownCommand)
	default:
		return c.reply(msgBadFormat)
	}
}

// Replies of one line.
const (
	msgBadFormat      = "BAD_FORMAT\r\n"
	msgUnknownCommand = "UNKNOWN_COMMAND\r\n"
	msgExpectedCRLF   = "EXPECTED_CRLF\r\n"
	msgJobTooBig      = "JOB_TOO_BIG\r\n"
	msgDraining       = "DRAINING\r\n"
	msgInternalError  = "INTERNAL_ERROR\r\n"
	msgOutOfMemory    = "OUT_OF_MEMORY\r\n"
	msgNotFound       = "NOT_FOUND\r\n"
	msgDeleted        = "DELETED\r\n"
	msgReleased       = "RELEASED\r\n"
	msgBuried         = "BURIED\r\n"
	msgKicked         = "KICKED\r\n"
	msgTouched        = "TOUCHED\r\n"
	msgPaused         = "PAUSED\r\n"
	msgNotIgnored     = "NOT_IGNORED\r\n"
	msgTimedOut       = "TIMED_OUT\r\n"
	msgDeadlineSoon   = "DEADLINE_SOON\r\n"
)

// reply writes a reply of one line (buffered; see serve).
func (c *conn) reply(msg string) error {
	_, err := c.w.WriteString(msg)
	return err
}

// replyNumber writes "word n\r\n".
func (c *conn) replyNumber(word string, n uint64) error {
	var buf [48]byte
	b := append(buf[:0], word...)
	b = append(b, ' ')
	b = strconv.AppendUint(b, n, 10)
	b = append(b, '\r', '\n')
	_, err := c.w.Write(b)
	return err
}

// replyJob writes "word id bytes\r\n<body>\r\n" (RESERVED or FOUND).
func (c *conn) replyJob(word string, id uint64, body []byte) error {
	var buf [64]byte
	b := append(buf[:0], word...)
	b = append(b, ' ')
	b = strconv.AppendUint(b, id, 10)
	b = append(b, ' ')
	b = strconv.AppendInt(b, int64(len(body)), 10)
	b = append(b, '\r', '\n')
	if _, err := c.w.Write(b); err != nil {
		return err
	}
	if _, err := c.w.Write(body); err != nil {
		return err
	}
	_, err := c.w.WriteString("\r\n")
	return err
}

// replyData writes "OK bytes\r\n<data>\r\n" (stats and lists).
func (c *conn) replyData(data []byte) error {
	var buf [32]byte
	b := append(buf[:0], "OK "...)
	b = strconv.AppendInt(b, int64(len(data)), 10)
	b = append(b, '\r', '\n')
	if _, err := c.w.Write(b); err != nil {
		return err
	}
	if _, err := c.w.Write(data); err != nil {
		return err
	}
	_, err := c.w.WriteString("\r\n")
	return err
}

// replyErr answers a broker error: NOT_FOUND, BAD_FORMAT for a request
// the broker finds invalid (a delay over its limit), JOB_TOO_BIG,
// DRAINING when the broker is closed, and INTERNAL_ERROR (logged) for
// anything else.
func (c *conn) replyErr(err error) error {
	switch {
	case errors.Is(err, task.ErrNotFound):
		return c.reply(msgNotFound)
	case errors.Is(err, task.ErrInvalid):
		return c.reply(msgBadFormat)
	case errors.Is(err, task.ErrTooLarge):
		return c.reply(msgJobTooBig)
	case errors.Is(err, task.ErrClosed):
		return c.reply(msgDraining)
	}
	c.s.log.Error("hourglass: beanstalk: broker", "err", err)
	return c.reply(msgInternalError)
}
