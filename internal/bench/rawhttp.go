package bench

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"time"
)

// rawConn is one keep-alive HTTP/1.1 connection to a server that posts
// JSON bodies and reads answers framed by Content-Length (or without a
// body: 204), which is all the lateness load sends and `hourglass serve`
// answers. It costs the client a fraction of the CPU net/http's client
// takes per request, which matters where client and server share the
// machine's cores: what the client takes, the server waits for
// (docs/results/2026-12-06-comment-figures.md has the figures). The
// server sees the same requests either way. Not safe for concurrent use.
type rawConn struct {
	addr string
	c    net.Conn
	r    *bufio.Reader
	req  []byte // the request being written
	body []byte // the last answer's body
}

// newRawConn returns a connection to addr (HOST:PORT), dialled at the
// first post.
func newRawConn(addr string) *rawConn { return &rawConn{addr: addr} }

// errRawFraming is returned for an answer rawConn cannot read: chunked, or
// with neither a length nor a status that has no body.
var errRawFraming = errors.New("bench: an HTTP answer without Content-Length")

// post sends body to path and reads the answer, failing unless its status
// is want. The answer is valid until the next post. When ctx ends, a
// request in flight fails with ctx's error. After any error the connection
// is closed, and the next post dials again.
func (rc *rawConn) post(ctx context.Context, path string, body []byte, want int) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := rc.dial(ctx); err != nil {
		return nil, err
	}
	c := rc.c
	stop := context.AfterFunc(ctx, func() { c.SetDeadline(time.Unix(1, 0)) })
	status, err := rc.roundTrip(path, body)
	if !stop() || err != nil {
		rc.close()
		if cerr := ctx.Err(); cerr != nil {
			return nil, cerr
		}
		if err == nil {
			err = errors.New("bench: request cut short")
		}
		return nil, fmt.Errorf("POST %s: %w", path, err)
	}
	if status != want {
		return nil, fmt.Errorf("POST %s: %d %s", path, status, bytes.TrimSpace(rc.body))
	}
	return rc.body, nil
}

// dial connects, unless connected.
func (rc *rawConn) dial(ctx context.Context) error {
	if rc.c != nil {
		return nil
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", rc.addr)
	if err != nil {
		return err
	}
	rc.c, rc.r = c, bufio.NewReaderSize(c, 16<<10)
	return nil
}

// roundTrip writes the request and reads the answer's status and body.
func (rc *rawConn) roundTrip(path string, body []byte) (status int, err error) {
	rc.req = append(rc.req[:0], "POST "...)
	rc.req = append(rc.req, path...)
	rc.req = append(rc.req, " HTTP/1.1\r\nHost: "...)
	rc.req = append(rc.req, rc.addr...)
	rc.req = append(rc.req, "\r\nContent-Type: application/json\r\nContent-Length: "...)
	rc.req = strconv.AppendInt(rc.req, int64(len(body)), 10)
	rc.req = append(rc.req, "\r\n\r\n"...)
	rc.req = append(rc.req, body...)
	if _, err := rc.c.Write(rc.req); err != nil {
		return 0, err
	}
	line, err := rc.r.ReadSlice('\n')
	if err != nil {
		return 0, err
	}
	// "HTTP/1.1 200 OK\r\n"
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.")) {
		return 0, fmt.Errorf("bench: bad status line %q", line)
	}
	if status, err = strconv.Atoi(string(line[9:12])); err != nil {
		return 0, fmt.Errorf("bench: bad status line %q", line)
	}
	length := -1
	for {
		line, err := rc.r.ReadSlice('\n')
		if err != nil {
			return 0, err
		}
		line = bytes.TrimRight(line, "\r\n")
		if len(line) == 0 {
			break
		}
		name, value, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			return 0, fmt.Errorf("bench: bad header line %q", line)
		}
		switch {
		case bytes.EqualFold(name, []byte("Content-Length")):
			if length, err = strconv.Atoi(string(bytes.TrimSpace(value))); err != nil || length < 0 {
				return 0, fmt.Errorf("bench: bad Content-Length %q", value)
			}
		case bytes.EqualFold(name, []byte("Transfer-Encoding")):
			return 0, errRawFraming
		}
	}
	if length < 0 {
		if status != 204 && status != 304 && status/100 != 1 {
			return 0, errRawFraming
		}
		length = 0
	}
	if cap(rc.body) < length {
		rc.body = make([]byte, length)
	}
	rc.body = rc.body[:length]
	if _, err := io.ReadFull(rc.r, rc.body); err != nil {
		return 0, err
	}
	return status, nil
}

// close closes the connection, if open.
func (rc *rawConn) close() {
	if rc.c != nil {
		rc.c.Close()
		rc.c, rc.r = nil, nil
	}
}
