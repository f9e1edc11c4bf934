// Package client is a Go client of hourglass's HTTP API (package api
// describes it). A [Client] sends each call as one HTTP request with the
// caller's context, and turns error answers into [*Error] values that
// errors.Is matches against the sentinels [ErrInvalid], [ErrNotFound] and
// the others, one per status.
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
	"strings"

	"github.com/hourglass-go/hourglass/api"
)

// Client calls one hourglass server. It is safe for concurrent use by
// multiple goroutines.
type Client struct {
	base  string // scheme, host and path prefix, without a trailing "/"
	token string
	hc    *http.Client
}

// Options configure a [Client].
type Options struct {
	// Token is sent as "Authorization: Bearer TOKEN" when set.
	Token string
	// HTTPClient sends the requests; nil: http.DefaultClient. Its Timeout
	// should be zero or longer than the longest reserve wait (up to five
	// minutes): the contexts of the calls bound them instead.
	HTTPClient *http.Client
}

// maxAnswer bounds how much of an answer the client reads: a batch of
// 1000 tasks with 1 MiB payloads would be far less.
const maxAnswer = 1 << 30

// New returns a Client of the server at the URL server, such as
// "http://127.0.0.1:7070" or "https://example.com/hourglass".
func New(server string, opts Options) (*Client, error) {
	u, err := url.Parse(server)
	if err != nil || u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return nil, fmt.Errorf("hourglass: bad server URL %q: want a URL such as %s", server, exampleURL(server))
	}
	if u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return nil, fmt.Errorf("hourglass: bad server URL %q: no user, query or fragment", server)
	}
	hc := opts.HTTPClient
	if hc == nil {
		hc = http.DefaultClient
	}
	return &Client{base: strings.TrimSuffix(u.String(), "/"), token: opts.Token, hc: hc}, nil
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
// successful answer into out (if not nil). An answer with a status of 400
// or more is returned as an *Error.
func (c *Client) do(ctx context.Context, method, path string, in, out any) (status int, err error) {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return 0, fmt.Errorf("hourglass: encoding the request: %w", err)
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
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
		return 0, fmt.Errorf("hourglass: %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	data, err := readAnswer(resp)
	if err != nil {
		return resp.StatusCode, fmt.Errorf("hourglass: %s %s: reading the answer: %w", method, path, err)
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
