package beanstalk

import (
	"slices"
	"time"
)

// A put's body is read into a buffer that grows as its bytes arrive, and
// within Options.BodyTimeout of its command line. The size a put declares
// is only a claim: a buffer of that size made before the body arrives
// lets a client that sends "put 0 0 1 1048576\r\nx" on many connections
// take a megabyte of heap for each byte it sends, and hold it for as long
// as it keeps the connection open (issue 27). Growing by doubling from
// bodyChunk, a body holds at
// most twice the bytes received, or bodyChunk, whichever is more; and the
// timeout drops a body that stops arriving.

// bodyChunk is the first size of a body's buffer, when the body is not
// already buffered whole: a 64 KiB body (the default limit) arriving in
// pieces grows it four times.
const bodyChunk = 4 << 10

// readBody reads a put's body and its CR-LF, n bytes in all. The body's
// buffer grows as it arrives (see above); what is buffered already is
// taken in one allocation. A body that has not arrived whole within
// Options.BodyTimeout fails with the socket's timeout error, and the
// connection ends.
func (c *conn) readBody(n int) ([]byte, error) {
	if c.r.Buffered() >= n {
		body := make([]byte, n)
		_, err := c.r.Read(body) // bufio copies what it holds, all of it here
		return body, err
	}
	defer c.bodyDeadline()()
	body := make([]byte, 0, min(n, max(bodyChunk, c.r.Buffered())))
	for len(body) < n {
		if len(body) == cap(body) {
			body = slices.Grow(body, min(n, 2*cap(body))-len(body))
		}
		m, err := c.r.Read(body[len(body):min(n, cap(body))])
		body = body[:len(body)+m]
		if err != nil && len(body) < n {
			return nil, err
		}
	}
	return body, nil
}

// bodyDeadline bounds the time until a body has been read by
// Options.BodyTimeout from now, and returns the function that lifts the
// bound: a connection waiting for a command line has none (workers and
// idle producers wait for as long as they like, as beanstalkd lets them).
// It is called while the connection serves a command, never while
// Shutdown may set the deadline to close it (closeIfIdle).
func (c *conn) bodyDeadline() func() {
	if c.s.opts.BodyTimeout < 0 {
		return func() {}
	}
	c.nc.SetReadDeadline(time.Now().Add(c.s.opts.BodyTimeout))
	return func() { c.nc.SetReadDeadline(time.Time{}) }
}
