// Package client is a Go client of hourglass's HTTP API (package api
// describes it). A [Client] sends each call as one HTTP request with the
// caller's context, and turns error answers into [*Error] values that
// errors.Is matches against the sentinels [ErrInvalid], [ErrNotFound] and
// the others, one per status.
//
// Every call has a deadline, also when the caller's context has none:
// [Options.Timeout] (default 30 s) from its start for the whole answer,
// and for a reserve that waits, its wait plus Timeout, since its answer
// comes only at the end of the wait. A server that accepts a connection
// and never answers (a peer gone without a word, a blackholing firewall)
// thus holds a call no longer than that. Without [Options.HTTPClient],
// the connections are also bounded step by step: 5 s to connect, 5 s for
// the TLS handshake, and an HTTP/2 connection silent for 30 s is pinged
// and closed if the ping gets no answer within 15 s.
//
// [IsTransient] and [IsPermanent] sort a call's errors for retry loops:
// a timeout, a refused connection or a 503 may heal by waiting; a 401, a
// 403 or a certificate the client does not trust will not.
//
//	c, err := client.New("http://127.0.0.1:7070", client.Options{Token: token})
//	t, created, err := c.Put(ctx, "emails", api.PutRequest{Payload: body, Delay: new(api.Duration(time.Minute))})
//	tasks, err := c.Reserve(ctx, "emails", 10, 30*time.Second)
//	err = c.Ack(ctx, "emails", tasks[0].ID, tasks[0].Lease)
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/hourglass-go/hourglass/api"
)

// Client calls one hourglass server. It is safe for concurrent use by
// multiple goroutines.
type Client struct {
	base    string // scheme, host and path prefix, without a trailing "/"
	token   string
	timeout time.Duration
	hc      *http.Client
}

// Options configure a [Client].
type Options struct {
	// Token is sent as "Authorization: Bearer TOKEN" when set.
	Token string
	// Timeout is each call's deadline: its whole answer must have come
	// within Timeout of its start, or within its wait plus Timeout for a
	// reserve that waits. A call past it fails with an error matching
	// context.DeadlineExceeded (and [IsTransient]). The caller's context
	// may end it sooner. Default [DefaultTimeout].
	Timeout time.Duration
	// HTTPClient sends the requests; nil: a client whose transport bounds
	// the connection's steps (see the package's doc). Its Timeout should
	// be zero or longer than the longest reserve wait (api.MaxWait) plus
	// Timeout: the calls' deadlines bound them instead.
	HTTPClient *http.Client
}

// DefaultTimeout is the default of [Options.Timeout].
const DefaultTimeout = 30 * time.Second

// The bounds of the steps of a connection of the default transport.
// Each is well within DefaultTimeout, so that a dead address or peer
// fails a call with the step's error rather than the call's deadline.
const (
	dialTimeout = 5 * time.Second
	tlsTimeout  = 5 * time.Second
	// keepAlive is the period of the TCP keep-alive probes of an idle
	// connection, which find a peer gone between calls.
	keepAlive = 30 * time.Second
	// pingAfter and pingTimeout: an HTTP/2 connection on which nothing
	// came for pingAfter is pinged, and closed when the ping gets no
	// answer within pingTimeout: the calls multiplexed on a dead
	// connection fail at once rather than each at its deadline.
	pingAfter   = 30 * time.Second
	pingTimeout = 15 * time.Second
)

// defaultHTTP sends the requests of the clients made without
// Options.HTTPClient; its connections are shared by them, as those of
// http.DefaultClient are. It sets no ResponseHeaderTimeout: a reserve's
// answer, headers included, comes only at the end of its wait (up to
// api.MaxWait); the calls' deadlines bound the answers instead.
var defaultHTTP = &http.Client{Transport: &http.Transport{
	Proxy:                 http.ProxyFromEnvironment,
	DialContext:           (&net.Dialer{Timeout: dialTimeout, KeepAlive: keepAlive}).DialContext,
	TLSHandshakeTimeout:   tlsTimeout,
	ForceAttemptHTTP2:     true,
	HTTP2:                 &http.HTTP2Config{SendPingTimeout: pingAfter, PingTimeout: pingTimeout},
	MaxIdleConns:          100,
	IdleConnTimeout:       90 * time.Second,
	ExpectContinueTimeout: time.Second,
}}

// maxAnswer bounds how much of an answer the client reads: a batch of
// 1000 tasks with 1 MiB payloads would be far less.
const maxAnswer = 1 << 30

// New returns a Client of the server at the URL server, such as
// "http://127.0.0.1:7070" or "https://example.com/hourglass".
// New fails at once on a URL that no call could reach: another scheme,
// no host, a port that is not a number from 1 to 65535.
func New(server string, opts Options) (*Client, error) {
	u, err := url.Parse(server)
	if err != nil || u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return nil, fmt.Errorf("hourglass: bad server URL %q: want a URL such as %s", server, exampleURL(server))
	}
	if u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return nil, fmt.Errorf("hourglass: bad server URL %q: no user, query or fragment", server)
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return nil, fmt.Errorf("hourglass: bad server URL %q: port %s is not from 1 to 65535", server, p)
		}
	}
	hc := opts.HTTPClient
	if hc == nil {
		hc = defaultHTTP
	}
	timeout := opts.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	return &Client{base: strings.TrimSuffix(u.String(), "/"), token: opts.Token, timeout: timeout, hc: hc}, nil
}

// exampleURL suggests a server URL in place of server: server with
// "http://" before it when it is a HOST:PORT, and the default address
// otherwise.
func exampleURL(server string) string {
	if _, port, err := net.SplitHostPort(server); err == nil && port != "" && !strings.Contains(server, "/") {
		return "http://" + server
	}
	return "http://127.0.0.1:7070"
}

// path joins segments into a path under /v1, escaping each.
func path(segments ...string) string {
	var b strings.Builder
	b.WriteString("/v1")
	for _, s := range segments {
		b.WriteByte('/')
		b.WriteString(url.PathEscape(s))
	}
	return b.String()
}

// do sends a request with in as its JSON body (none if nil) and decodes a
// successful answer into out (if not nil), within the client's timeout.
// An answer with a status of 400 or more is returned as an *Error.
func (c *Client) do(ctx context.Context, method, path string, in, out any) (status int, err error) {
	return c.doWait(ctx, 0, method, path, in, out)
}

// doWait is do for a call whose answer may take wait more than the
// timeout: a reserve's long poll.
func (c *Client) doWait(ctx context.Context, wait time.Duration, method, path string, in, out any) (status int, err error) {
	limit := wait + c.timeout
	callCtx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	// failed wraps a failure of the request or of its answer's way back,
	// saying when the call's own deadline, rather than ctx, ended it.
	failed := func(what string, err error) error {
		if ctx.Err() == nil && callCtx.Err() != nil {
			what = fmt.Sprintf("no answer within %s: %s", limit, what)
		}
		return &transportError{msg: fmt.Sprintf("hourglass: %s %s: %s%v", method, path, what, err), err: err}
	}
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return 0, fmt.Errorf("hourglass: encoding the request: %w", err)
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(callCtx, method, c.base+path, body)
	if err != nil {
		return 0, fmt.Errorf("hourglass: %w", err)
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return 0, failed("", err)
	}
	defer resp.Body.Close()
	data, err := readAnswer(resp)
	if err != nil {
		return resp.StatusCode, failed("reading the answer: ", err)
	}
	if resp.StatusCode >= 400 {
		return resp.StatusCode, answerError(resp.StatusCode, data)
	}
	if out != nil && resp.StatusCode != http.StatusNoContent {
		if err := unmarshal(data, out); err != nil {
			return resp.StatusCode, fmt.Errorf("hourglass: %s %s: decoding the answer: %w", method, path, err)
		}
	}
	return resp.StatusCode, nil
}

// readAnswer reads resp's body, at most maxAnswer bytes, into a buffer
// of its Content-Length when it has one: io.ReadAll would grow its
// buffer (and copy) a dozen times for a reserve's answer of 64 tasks.
func readAnswer(resp *http.Response) ([]byte, error) {
	body := io.LimitReader(resp.Body, maxAnswer)
	if n := resp.ContentLength; n > 0 && n < maxAnswer {
		// One byte more, so that the read that finds the end does not
		// grow the buffer.
		buf := bytes.NewBuffer(make([]byte, 0, n+1))
		_, err := buf.ReadFrom(body)
		return buf.Bytes(), err
	}
	return io.ReadAll(body)
}

// unmarshal decodes an answer into out as json.Unmarshal does; data is
// out's to keep (a reserve's payloads are slices of it).
func unmarshal(data []byte, out any) error {
	if r, ok := out.(*api.ReserveResponse); ok {
		return decodeReserve(data, r)
	}
	return json.Unmarshal(data, out)
}

// URL returns the server's URL as New was given it, without a trailing
// "/".
func (c *Client) URL() string { return c.base }
