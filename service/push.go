package service

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/hourglass-go/hourglass/push"
	"github.com/hourglass-go/hourglass/task"
)

// A push queue (task.Policy.Push) has its tasks POSTed to an endpoint by
// the service itself (package pusher). CheckPush is the part of
// CheckPolicy that checks the endpoint's fields, the same on both
// engines; which hosts a server may reach (hourglass serve --push-allow,
// the cloud metadata endpoints and the server's own addresses refused,
// none but those named beyond loopback) is the server's, checked by
// package pusher (pusher.Targets) at SetPolicy time over HTTP and again
// at each dial.

// CheckPush returns an error wrapping task.ErrInvalid that names the
// field if p is not a valid push endpoint: an absolute http or https URL
// with a host, of at most task.MaxPushURL bytes; a timeout of 0 (the
// default, task.DefaultPushTimeout) or 1ms..task.MaxPushTimeout; at most
// task.MaxPushHeaders headers, each a valid HTTP field name (a token of
// RFC 9110 §5.6.2) with a value free of control characters, name and
// value together at most task.MaxPushHeaderLen bytes, and none that the
// service sets itself or that HTTP reserves to the connection
// (Hourglass-*, Standard Webhooks' webhook-id, webhook-timestamp and
// webhook-signature, Host, Content-Length, hop-by-hop headers); a secret of
// at most task.MaxPushSecret bytes, "whsec_" and standard base64 or
// without that prefix (push.Key), and a next secret by the same rules,
// only beside a secret. A nil p is valid. The cost is linear in the size
// of p.
func CheckPush(p *task.Push) error {
	if p == nil {
		return nil
	}
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: policy: push.%s", task.ErrInvalid, fmt.Sprintf(format, args...))
	}
	if p.URL == "" {
		return bad("url is missing: give an http or https URL")
	}
	if len(p.URL) > task.MaxPushURL {
		return bad("url is %d bytes long, more than %d", len(p.URL), task.MaxPushURL)
	}
	u, err := url.Parse(p.URL)
	if err != nil {
		return bad("url %q: %v", p.URL, unwrapURLError(err))
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return bad("url %q: scheme %q, want http or https", p.URL, u.Scheme)
	}
	if u.Opaque != "" || u.Hostname() == "" {
		return bad("url %q has no host: give an absolute URL such as https://app.internal/hooks", p.URL)
	}
	if p.Timeout < 0 || p.Timeout > task.MaxPushTimeout || p.Timeout > 0 && p.Timeout < time.Millisecond {
		return bad("timeout %s out of range 1ms..%s (0: %s)", p.Timeout, task.MaxPushTimeout, task.DefaultPushTimeout)
	}
	if len(p.Headers) > task.MaxPushHeaders {
		return bad("headers: %d headers, more than %d", len(p.Headers), task.MaxPushHeaders)
	}
	for name, value := range p.Headers {
		switch {
		case !validHeaderName(name):
			return bad("headers: %q is not a valid header name", name)
		case reservedHeader(name):
			return bad("headers: %q is set by the service or by HTTP itself, and cannot be configured", name)
		case !validHeaderValue(value):
			return bad("headers: the value of %q holds a control character", name)
		case len(name)+len(value) > task.MaxPushHeaderLen:
			return bad("headers: %q and its value are %d bytes long, more than %d", name, len(name)+len(value), task.MaxPushHeaderLen)
		}
	}
	for _, sec := range []struct{ name, s string }{{"secret", p.Secret}, {"next_secret", p.NextSecret}} {
		if len(sec.s) > task.MaxPushSecret {
			return bad("%s is %d bytes long, more than %d", sec.name, len(sec.s), task.MaxPushSecret)
		}
		if _, err := push.Key(sec.s); sec.s != "" && err != nil {
			return bad("%s: %q and then the standard base64 (padded) of a key of one byte or more, or a secret without that prefix, used as it is", sec.name, push.SecretPrefix)
		}
	}
	if p.NextSecret != "" && p.Secret == "" {
		return bad("next_secret without a secret: a key is rotated in beside the current one")
	}
	return nil
}

// unwrapURLError returns the reason of a url.Parse error without the
// URL, which the caller names already.
func unwrapURLError(err error) error {
	if e, ok := err.(*url.Error); ok {
		return e.Err
	}
	return err
}

// validHeaderName reports whether name is a token (RFC 9110 §5.6.2):
// one or more of the visible ASCII characters other than delimiters, as
// golang.org/x/net/http/httpguts.ValidHeaderFieldName checks.
func validHeaderName(name string) bool {
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}

// validHeaderValue reports whether value holds no control character but
// horizontal tab (RFC 9110 §5.5; httpguts.ValidHeaderFieldValue).
func validHeaderValue(value string) bool {
	for i := 0; i < len(value); i++ {
		if c := value[i]; c < ' ' && c != '\t' || c == 0x7f {
			return false
		}
	}
	return true
}

// reservedHeader reports whether name, in any case, is a header the
// service sets on every push (Hourglass-*, the three webhook-* of
// Standard Webhooks), or one that belongs to the
// connection rather than the request (RFC 9110 §7.6.1: hop-by-hop
// headers; Host and Content-Length, which the transport writes).
func reservedHeader(name string) bool {
	n := strings.ToLower(name)
	if strings.HasPrefix(n, "hourglass-") {
		return true
	}
	switch n {
	case "webhook-id", "webhook-timestamp", "webhook-signature",
		"host", "content-length", "connection", "keep-alive", "proxy-connection",
		"proxy-authenticate", "proxy-authorization", "te", "trailer", "trailers",
		"transfer-encoding", "upgrade":
		return true
	}
	return false
}

// A push's attempt has outcomes of its own in the history:
// task.AttemptPushed for a 2xx, task.AttemptPushFailed for anything else
// (another status, a 429 or 503 with Retry-After included, a timeout, an
// error of the connection), with the HTTP status the push got
// (task.Attempt.Status). The pusher settles a push with the Service's Ack
// and Nack, which carry no status: it calls them under a context from
// [WithPush], and each engine, where it records the attempt that an Ack
// or a Nack ends, asks [AttemptOutcome]. What a push makes of the task is
// unchanged: a 2xx acks it (task.FinishedAcked), a failure is a failed
// attempt under the queue's retry policy. A lease that runs out during a
// push, and a push cut short by a shutdown (a Release), keep their
// outcomes, expired and released: the push got no answer of its own.

// pushKey keys the HTTP status of a push in a context (WithPush).
type pushKey struct{}

// WithPush returns ctx for the Ack or Nack that settles a push answered
// with the HTTP status status (0: no answer, a timeout or an error of the
// connection), so that the attempt it ends is recorded as the push's
// (AttemptOutcome).
func WithPush(ctx context.Context, status int) context.Context {
	return context.WithValue(ctx, pushKey{}, status)
}

// AttemptOutcome returns the outcome and HTTP status an engine records
// for the attempt that an Ack or a Nack made under ctx ends, given
// outcome, the attempt's outcome for a worker (task.AttemptAcked or
// task.AttemptNacked): under [WithPush], task.AttemptPushed for an ack
// and task.AttemptPushFailed for a nack, with the push's status;
// otherwise outcome itself and 0. Its cost is a lookup in ctx.
func AttemptOutcome(ctx context.Context, outcome string) (string, int) {
	status, ok := ctx.Value(pushKey{}).(int)
	if !ok {
		return outcome, 0
	}
	if outcome == task.AttemptAcked {
		return task.AttemptPushed, status
	}
	return task.AttemptPushFailed, status
}

// PolicyNotifier is implemented by an engine whose queues' policies may
// change without a call through this process: a node of a cluster, whose
// peers set them too. NotifyPolicies registers f, to be called after a
// queue's policy changed, on any node, with the queue's name, and with ""
// when changes may have been missed (its notifications were lost); f is
// called from a goroutine of the engine's and must not block. The pusher
// registers one, so that a push queue set, changed or deleted on another
// node is served as such at once rather than at its next refresh of the
// push queues.
type PolicyNotifier interface {
	NotifyPolicies(f func(queue string))
}

// PushHTTPPrefix begins the last error of a push answered with a status
// other than 2xx: "push: HTTP 500", then ": " and the first 200 bytes of
// the answer's body (control characters blanked) where the server may
// echo the target's answers to the API's callers (pusher.Targets).
const PushHTTPPrefix = "push: HTTP "
