package pusher

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/hourglass-go/hourglass/api"
	"github.com/hourglass-go/hourglass/push"
	"github.com/hourglass-go/hourglass/service"
	"github.com/hourglass-go/hourglass/task"
)

// Bounds of reading an answer.
const (
	// errorBody is how much of a failed answer's body its last error
	// keeps, where the target may echo one (Targets.echoes).
	errorBody = 200
	// drainBody is how much more of an answer's body is read, and thrown
	// away, so that its connection can serve the next push; a longer
	// body's connection is closed.
	drainBody = 64 << 10
)

// outcome is what a push came to.
type outcome struct {
	kind   string        // "acked", "retry_after", "failed", "released" or "cancelled"
	status int           // the HTTP status the push got; 0 for none
	delay  time.Duration // a nack's: task.RetryDelay or a Retry-After
	reason string        // the nack's last error
}

// newClient returns the HTTP client of pushes: one transport whose
// connections each target keeps alive (up to conns idle ones per host,
// as many as pushes may run at once), dialling through targets' checks,
// reaching no proxy (a proxy would dial where the checks cannot see) and
// following no redirect (a POST redirected is an answer like any other:
// a failed attempt).
func newClient(targets *Targets, conns int) *http.Client {
	tr := &http.Transport{
		Proxy:                 nil,
		DialContext:           targets.dialer(newDialer()),
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          4 * conns,
		MaxIdleConnsPerHost:   conns,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
	return &http.Client{
		Transport:     tr,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// pushJob is a reserved task, the endpoint of its queue and its target
// (targetOf), whose slot it holds.
type pushJob struct {
	t      task.Task
	end    task.Push
	target string
}

// pushLoop is a push goroutine: it pushes the tasks run hands it, one at
// a time, until run closes p.work.
func (p *Pusher) pushLoop() {
	for j := range p.work {
		p.push(j.t, j.end)
		p.done(j.t.Queue, j.target)
	}
}

// push pushes t to end and settles it. A task taken after Stop was
// called is released unpushed.
func (p *Pusher) push(t task.Task, end task.Push) {
	if p.ctx.Err() != nil || end.URL == "" {
		p.settle(t, outcome{kind: "released"})
		return
	}
	timeout := cmp.Or(end.Timeout, task.DefaultPushTimeout)
	ctx, cancel := context.WithTimeout(p.pushes, timeout)
	defer cancel()
	ctx, abort := context.WithCancelCause(ctx)
	defer abort(nil)
	defer p.watchLease(t.Lease, func() { abort(errCancelled) })()
	// A cancel between the reserve and the watch is in the service's
	// memory of leases ended (a cancel after it calls the watch).
	if ended, _ := p.s.CancelledLeases([]string{t.Lease}); len(ended) > 0 {
		abort(errCancelled)
	}
	stopKeep := func() {}
	if t.TTR > 0 && t.TTR < timeout+leaseMargin {
		var keepCtx context.Context
		keepCtx, stopKeep = context.WithCancel(context.Background())
		p.wg.Add(1)
		go p.keep(keepCtx, t)
	}
	start := time.Now()
	out := p.deliver(ctx, t, end, timeout)
	p.metrics.seconds.Observe(time.Since(start).Seconds())
	stopKeep()
	p.settle(t, out)
}

// deliver makes one push of t to end within ctx, which ends after
// timeout, and returns its outcome.
func (p *Pusher) deliver(ctx context.Context, t task.Task, end task.Push, timeout time.Duration) outcome {
	if context.Cause(ctx) == errCancelled {
		return outcome{kind: "cancelled"}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, end.URL, bytes.NewReader(t.Payload))
	if err != nil {
		return outcome{kind: "failed", delay: task.RetryDelay, reason: "push: " + err.Error()}
	}
	h := req.Header
	h.Set("Content-Type", "application/json")
	h.Set(api.PushQueueHeader, t.Queue)
	h.Set(api.PushTaskIDHeader, t.ID)
	h.Set(api.PushJobIDHeader, strconv.FormatUint(t.JobID, 10))
	h.Set(api.PushAttemptHeader, strconv.Itoa(t.Attempts))
	h.Set(api.PushDueHeader, t.Due.UTC().Format(time.RFC3339Nano))
	for k, v := range end.Headers {
		h.Set(k, v)
	}
	// The producer's trace context, as it was put, so that the receiver
	// continues its trace (api.TraceparentHeader); it wins over an
	// endpoint's header of the same name.
	if t.Trace.Parent != "" {
		h.Set(api.TraceparentHeader, t.Trace.Parent)
		if t.Trace.State != "" {
			h.Set(api.TracestateHeader, t.Trace.State)
		} else {
			h.Del(api.TracestateHeader)
		}
	}
	id, now := webhookID(t), time.Now()
	h.Set(api.PushIDHeader, id)
	h.Set(api.PushTimestampHeader, strconv.FormatInt(now.Unix(), 10))
	if secrets := pushSecrets(end); len(secrets) > 0 {
		if push.SetHeaders(h, id, now, t.Payload, secrets...) != nil {
			// A policy stored before service.CheckPush refused such a
			// secret: the attempt fails, saying why, rather than go
			// unsigned.
			return outcome{kind: "failed", delay: task.RetryDelay, reason: "push: the policy's secret is not valid (whsec_ and standard base64): set it again"}
		}
	}
	resp, err := p.client.Do(req)
	if err != nil {
		switch {
		case context.Cause(ctx) == errCancelled:
			return outcome{kind: "cancelled"}
		case p.pushes.Err() != nil:
			return outcome{kind: "released"}
		case errors.Is(ctx.Err(), context.DeadlineExceeded) || isTimeout(err):
			return outcome{kind: "failed", delay: task.RetryDelay, reason: fmt.Sprintf("push: timeout after %s", timeout)}
		}
		var refused refusedError
		if !errors.As(err, &refused) && !p.targets.echoes(req.URL.Hostname()) {
			return outcome{kind: "failed", delay: task.RetryDelay, reason: "push: the connection failed"}
		}
		return outcome{kind: "failed", delay: task.RetryDelay, reason: "push: " + unwrapURL(err).Error()}
	}
	defer resp.Body.Close()
	var head []byte
	if resp.StatusCode/100 != 2 {
		head, _ = io.ReadAll(io.LimitReader(resp.Body, errorBody))
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, drainBody))
	if resp.StatusCode/100 == 2 {
		return outcome{kind: "acked", status: resp.StatusCode}
	}
	reason := service.PushHTTPPrefix + strconv.Itoa(resp.StatusCode)
	if head = trimRune(head); len(head) > 0 && p.targets.echoes(req.URL.Hostname()) {
		reason += ": " + sanitize(head)
	}
	if resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable {
		if d, ok := retryAfter(resp.Header.Get("Retry-After"), time.Now()); ok {
			return outcome{kind: "retry_after", status: resp.StatusCode, delay: min(d, p.maxDelay), reason: reason}
		}
	}
	return outcome{kind: "failed", status: resp.StatusCode, delay: task.RetryDelay, reason: reason}
}

// errCancelled is the cause of a push's context when its task was
// cancelled or deleted (watchLease).
var errCancelled = errors.New("hourglass: task cancelled")

// settle acks, nacks or releases t by out. An ack or a nack is made
// under service.WithPush, so that the engine records the attempt as a
// push's, with its status.
func (p *Pusher) settle(t task.Task, out outcome) {
	ctx, cancel := context.WithTimeout(service.WithPush(context.Background(), out.status), settleTimeout)
	defer cancel()
	var err error
	switch out.kind {
	case "cancelled":
		// The task is gone: nothing to settle.
	case "acked":
		err = p.s.Ack(ctx, t.Queue, t.ID, t.Lease)
	case "released":
		_, err = p.s.Release(ctx, t.Queue, t.ID, t.Lease, 0)
	default:
		_, err = p.s.Nack(ctx, t.Queue, t.ID, t.Lease, out.delay, out.reason)
	}
	if err != nil {
		// The lease ran out meanwhile (the task is another push's now), or
		// the service failed: the task's lease settles it.
		p.metrics.pushes.WithLabelValues("lost").Inc()
		p.settleFails.Failed(err, "queue", t.Queue, "id", t.ID, "outcome", out.kind)
		return
	}
	p.settleFails.OKShared()
	p.metrics.pushes.WithLabelValues(out.kind).Inc()
}

// keep touches t's lease every half ttr until ctx ends: a push whose
// timeout its ttr does not cover. A touch that fails is tried again at
// the next tick (a wait no longer, or the lease would run out), and the
// failures of every push's touches are logged together, about once a
// second with a count (p.touchFails).
func (p *Pusher) keep(ctx context.Context, t task.Task) {
	defer p.wg.Done()
	tick := time.NewTicker(max(t.TTR/2, time.Millisecond))
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		tctx, cancel := context.WithTimeout(ctx, max(t.TTR/2, time.Second))
		_, err := p.s.Touch(tctx, t.Queue, t.ID, t.Lease)
		cancel()
		switch {
		case err == nil:
			p.touchFails.OKShared()
		case ctx.Err() == nil:
			p.touchFails.Failed(err, "queue", t.Queue, "id", t.ID)
			if errors.Is(err, task.ErrLease) || errors.Is(err, task.ErrNotFound) {
				return
			}
		}
	}
}

// webhookID returns the webhook-id of t's pushes (api.Push): "msg_",
// its job id, "_" and its creation time in Unix nanoseconds. The job id
// is unique in a store and never reused, on both engines (a re-put under
// the same id is a new job); the creation time tells apart the tasks of
// a store started anew. Both are kept with the task, so every attempt,
// before and after a restart, has the same id.
func webhookID(t task.Task) string {
	return "msg_" + strconv.FormatUint(t.JobID, 10) + "_" + strconv.FormatInt(t.Created.UnixNano(), 10)
}

// pushSecrets returns the secrets end's pushes are signed with: the
// secret, then the next one while a key is rotated; none without a
// secret.
func pushSecrets(end task.Push) []string {
	switch {
	case end.Secret == "":
		return nil
	case end.NextSecret == "":
		return []string{end.Secret}
	}
	return []string{end.Secret, end.NextSecret}
}

// retryAfter parses a Retry-After value, delay-seconds or an HTTP date
// (RFC 9110 §10.2.3), as a delay from now; a date past is 0.
func retryAfter(v string, now time.Time) (time.Duration, bool) {
	if v == "" {
		return 0, false
	}
	if n, err := strconv.ParseUint(v, 10, 32); err == nil {
		return time.Duration(n) * time.Second, true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0), true
	}
	return 0, false
}

// isTimeout reports whether err is a timeout of the network.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// unwrapURL returns the error inside a client's *url.Error, without the
// method and URL it repeats (`Post "https://…": dial tcp …`).
func unwrapURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// sanitize returns b as a string with each control character (C0, DEL)
// but tab replaced by a space, so that a target's answer cannot forge
// lines or terminal sequences in a task's last error as logs and
// terminals show it.
func sanitize(b []byte) string {
	out := []byte(nil)
	for i, c := range b {
		if c < ' ' && c != '\t' || c == 0x7f {
			if out == nil {
				out = slices.Clone(b[:i])
			}
			c = ' '
		}
		if out != nil {
			out = append(out, c)
		}
	}
	if out == nil {
		return string(b)
	}
	return string(out)
}

// trimRune drops a UTF-8 sequence cut short at the end of b.
func trimRune(b []byte) []byte {
	for i := 0; i < utf8.UTFMax && len(b) > 0; i++ {
		if r, size := utf8.DecodeLastRune(b); r != utf8.RuneError || size != 1 {
			break
		}
		b = b[:len(b)-1]
	}
	return b
}
