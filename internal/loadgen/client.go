package loadgen

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"
)

// conn is a minimal client of the protocol: only the commands the
// measurements send, one reply at a time (or a batch of puts).
type conn struct {
	nc   net.Conn
	r    *bufio.Reader
	w    *bufio.Writer
	stop func() bool // ends the watch that closes nc when the context ends
}

// ioTimeout bounds every reply: a server that stops answering fails the
// measurement instead of hanging it.
const ioTimeout = 2 * time.Minute

// dial connects to addr; nc is closed when ctx ends.
func dial(ctx context.Context, addr string) (*conn, error) {
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	c := &conn{nc: nc, r: bufio.NewReaderSize(nc, 1<<16), w: bufio.NewWriterSize(nc, 1<<16)}
	c.stop = context.AfterFunc(ctx, func() { nc.Close() })
	return c, nil
}

// dialAll opens n connections using use and watching only watch (each
// when not empty).
func dialAll(ctx context.Context, addr string, n int, use, watch string) ([]*conn, error) {
	conns := make([]*conn, 0, n)
	for range n {
		c, err := dial(ctx, addr)
		if err == nil && use != "" {
			err = c.use(use)
		}
		if err == nil && watch != "" {
			err = c.watchOnly(watch)
		}
		if c != nil {
			conns = append(conns, c)
		}
		if err != nil {
			closeAll(conns)
			return nil, err
		}
	}
	return conns, nil
}

func closeAll(conns []*conn) {
	var wg sync.WaitGroup
	for _, c := range conns {
		wg.Go(func() {
			c.stop()
			c.nc.Close()
		})
	}
	wg.Wait()
}

// line sends a command line and reads the reply line.
func (c *conn) line(cmd string) (string, error) {
	c.w.WriteString(cmd)
	c.w.WriteString("\r\n")
	if err := c.w.Flush(); err != nil {
		return "", err
	}
	return c.readLine()
}

func (c *conn) readLine() (string, error) {
	c.nc.SetReadDeadline(time.Now().Add(ioTimeout))
	s, err := c.r.ReadString('\n')
	if err != nil {
		return "", err
	}
	return strings.TrimSuffix(s, "\r\n"), nil
}

// expect fails unless reply starts with want.
func expect(cmd, reply, want string) error {
	if !strings.HasPrefix(reply, want) {
		return fmt.Errorf("hourglass: loadgen: %s: got %q, want %s", cmd, reply, want)
	}
	return nil
}

func (c *conn) use(tube string) error {
	r, err := c.line("use " + tube)
	if err != nil {
		return err
	}
	return expect("use", r, "USING ")
}

// watchOnly makes tube the whole watch list.
func (c *conn) watchOnly(tube string) error {
	r, err := c.line("watch " + tube)
	if err != nil {
		return err
	}
	if err := expect("watch", r, "WATCHING "); err != nil {
		return err
	}
	if tube == "default" {
		return nil
	}
	r, err = c.line("ignore default")
	if err != nil {
		return err
	}
	return expect("ignore", r, "WATCHING ")
}

func (c *conn) writePut(pri, delay, ttr uint32, body []byte) {
	c.w.WriteString("put ")
	c.w.WriteString(strconv.FormatUint(uint64(pri), 10))
	c.w.WriteByte(' ')
	c.w.WriteString(strconv.FormatUint(uint64(delay), 10))
	c.w.WriteByte(' ')
	c.w.WriteString(strconv.FormatUint(uint64(ttr), 10))
	c.w.WriteByte(' ')
	c.w.WriteString(strconv.Itoa(len(body)))
	c.w.WriteString("\r\n")
	c.w.Write(body)
	c.w.WriteString("\r\n")
}

// put puts one job and returns its id.
func (c *conn) put(pri, delay, ttr uint32, body []byte) (uint64, error) {
	c.writePut(pri, delay, ttr, body)
	if err := c.w.Flush(); err != nil {
		return 0, err
	}
	r, err := c.readLine()
	if err != nil {
		return 0, err
	}
	id, ok := strings.CutPrefix(r, "INSERTED ")
	if !ok {
		return 0, expect("put", r, "INSERTED")
	}
	return strconv.ParseUint(id, 10, 64)
}

// putMany sends n puts, the i-th as job(i) says, then reads their n
// replies.
func (c *conn) putMany(n int, job func(i int) (delay uint32, body []byte)) error {
	for i := range n {
		delay, body := job(i)
		c.writePut(0, delay, 60, body)
	}
	if err := c.w.Flush(); err != nil {
		return err
	}
	for range n {
		r, err := c.readLine()
		if err != nil {
			return err
		}
		if err := expect("put", r, "INSERTED "); err != nil {
			return err
		}
	}
	return nil
}

// reserve reserves with a timeout in seconds; ok is false on TIMED_OUT.
func (c *conn) reserve(timeout int) (id uint64, body []byte, ok bool, err error) {
	r, err := c.line("reserve-with-timeout " + strconv.Itoa(timeout))
	if err != nil {
		return 0, nil, false, err
	}
	if r == "TIMED_OUT" {
		return 0, nil, false, nil
	}
	f := strings.Fields(r)
	if len(f) != 3 || f[0] != "RESERVED" {
		return 0, nil, false, expect("reserve", r, "RESERVED")
	}
	id, err = strconv.ParseUint(f[1], 10, 64)
	if err != nil {
		return 0, nil, false, err
	}
	n, err := strconv.Atoi(f[2])
	if err != nil || n < 0 {
		return 0, nil, false, fmt.Errorf("hourglass: loadgen: reserve: bad reply %q", r)
	}
	body = make([]byte, n+2)
	if _, err := io.ReadFull(c.r, body); err != nil {
		return 0, nil, false, err
	}
	if string(body[n:]) != "\r\n" {
		return 0, nil, false, errors.New("hourglass: loadgen: reserve: body not followed by CR-LF")
	}
	return id, body[:n], true, nil
}

func (c *conn) delete(id uint64) error {
	r, err := c.line("delete " + strconv.FormatUint(id, 10))
	if err != nil {
		return err
	}
	return expect("delete", r, "DELETED")
}

// kick kicks up to n jobs of the used tube and returns how many.
func (c *conn) kick(n int) (int, error) {
	r, err := c.line("kick " + strconv.Itoa(n))
	if err != nil {
		return 0, err
	}
	k, ok := strings.CutPrefix(r, "KICKED ")
	if !ok {
		return 0, expect("kick", r, "KICKED")
	}
	return strconv.Atoi(k)
}
