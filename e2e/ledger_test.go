package e2e_test

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/api"
)

// ledger accounts for every request of the crash test and checks the
// promises of the issue as the answers come in:
//
//   - An answered put (201 or 200) is durable: its job is delivered
//     eventually (checked by missing, after the drain).
//   - An answered ack (204) is durable: the job is never delivered again.
//     A delivery of an acked job is a failure if its reserve was sent
//     after the ack's answer came, or if it is a later attempt than the
//     acked delivery (attempts only grow, so it came after).
//   - No task is handed out before its due time: the time the client had
//     the reserve's answer is at or after the task's due, and that due is
//     the one the put answered (the crash test never nacks).
//   - Every delivery is of a task some put asked for, with its payload.
//
// Requests that got no answer (the connection refused or cut by a kill)
// are unknown: a put without an answer is retried with the same id until
// one comes (idempotent: 200 with the task if the first one happened, 201
// otherwise, or a new job if the first one's job was already delivered
// and acknowledged), so a job of an id with an unknown put may be
// delivered without any put answering it; an ack without an answer may be
// followed by a redelivery.
//
// A ledger is safe for concurrent use.
type ledger struct {
	mu sync.Mutex
	// put holds every job a put answered, by job id.
	put map[uint64]putRecord
	// payload is the payload asked for each id put.
	payload map[string]string
	// unknownPut holds the ids with a put that got no answer.
	unknownPut map[string]bool
	// acked holds every job whose ack answered 204.
	acked map[uint64]ackRecord
	// ackUnknown holds the jobs with an ack that got no answer; gone
	// holds those of them the server no longer has (GET answered 404), so
	// that ack did happen.
	ackUnknown, gone map[uint64]bool
	// delivered holds the deliveries of each job, in the order recorded.
	delivered map[uint64][]delivery
	// short holds the reserves that answered fewer tasks than asked for.
	short []shortReserve
	// failures are the broken promises, as messages.
	failures []string

	putsAnswered, putsCreated, putsExisting    int // putsAnswered counts batch items too
	putsUnknown, reservesUnknown, acksUnknown  int
	acks, acksRefused, deliveries, redelivered int
	maxLateness, maxReadyLateness              time.Duration
	readyLatenessFrom                          string          // the delivery of maxReadyLateness
	readyLateness                              []time.Duration // of every first hand-over
}

// putRecord is an answered put.
type putRecord struct {
	job      uint64
	id       string
	due      time.Time
	answered time.Time // when the answer came
}

// shortReserve is a reserve that answered fewer tasks than it asked for,
// sent and answered while one server run served.
type shortReserve struct {
	sent, got time.Time
	n         int // tasks answered
}

// readySlack is how long after its due time a task must be ready at the
// latest for [ledger.check] to expect it in a short reserve's answer:
// room for the server's timers on a loaded machine under -race, and far
// below anything a server waiting for a poller or a lease after a restart
// would show.
const readySlack = time.Second

// ackRecord is an answered ack.
type ackRecord struct {
	at       time.Time // when the 204 came
	attempts int       // of the delivery acked
}

// delivery is one task handed out.
type delivery struct {
	id       string
	attempts int
	due      time.Time // as the reserve answered it
	sent     time.Time // when the reserve was sent
	got      time.Time // when its answer came
}

func newLedger() *ledger {
	return &ledger{
		put:        map[uint64]putRecord{},
		payload:    map[string]string{},
		unknownPut: map[string]bool{},
		acked:      map[uint64]ackRecord{},
		ackUnknown: map[uint64]bool{},
		gone:       map[uint64]bool{},
		delivered:  map[uint64][]delivery{},
	}
}

// fail records a broken promise.
func (l *ledger) fail(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.failLocked(format, args...)
}

func (l *ledger) failLocked(format string, args ...any) {
	l.failures = append(l.failures, fmt.Sprintf(format, args...))
}

// asking notes the payload a put of id asks for, before it is sent.
func (l *ledger) asking(id, payload string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.payload[id] = payload
}

// Whether a put's answer says the task is new: a single put says (201 or
// 200), a batch's item does not.
const (
	putNew = iota
	putExisting
	putInBatch
)

// answered records a put's answer; the put was sent at sent.
func (l *ledger) answered(t api.Task, created int, sent time.Time) {
	got := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.putsAnswered++
	switch created {
	case putNew:
		l.putsCreated++
	case putExisting:
		l.putsExisting++
		if !l.unknownPut[t.ID] {
			l.failLocked("put of %s answered 200 (existing) though no earlier put of that id was sent", t.ID)
		}
	}
	if p, ok := l.put[t.JobID]; ok && (p.id != t.ID || !p.due.Equal(t.Due)) {
		l.failLocked("put of %s answered job %d due %v; an earlier put answered it as %s due %v", t.ID, t.JobID, t.Due, p.id, p.due)
	}
	if a, ok := l.acked[t.JobID]; ok && sent.After(a.at) {
		l.failLocked("put of %s sent at %v answered job %d, whose ack answered 204 at %v", t.ID, sent.Format(time.StampMicro), t.JobID, a.at.Format(time.StampMicro))
	}
	l.put[t.JobID] = putRecord{t.JobID, t.ID, t.Due, got}
}

// unknownPutOf records a put of id without an answer.
func (l *ledger) unknownPutOf(id string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.putsUnknown++
	l.unknownPut[id] = true
}

// unknownReserve records a reserve without an answer.
func (l *ledger) unknownReserve() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.reservesUnknown++
}

// deliver records a task handed out by a reserve sent at sent and
// answered at got, while the server run that became ready at ready
// served.
func (l *ledger) deliver(t api.Task, sent, got, ready time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.deliveries++
	d := delivery{t.ID, t.Attempts, t.Due, sent, got}
	if got.Before(t.Due) {
		l.failLocked("job %d (%s) handed out at %v, %v before its due time %v", t.JobID, t.ID, got, t.Due.Sub(got), t.Due)
	}
	late := got.Sub(t.Due)
	l.maxLateness = max(l.maxLateness, late)
	if t.Attempts == 1 {
		// A first hand-over: late only by the time since the task fell
		// due or the server became ready, whichever came last.
		rl := got.Sub(later(t.Due, ready))
		l.readyLateness = append(l.readyLateness, rl)
		if rl > l.maxReadyLateness {
			l.maxReadyLateness = rl
			l.readyLatenessFrom = fmt.Sprintf("job %d due %v, server ready %v, handed out %v", t.JobID, t.Due.Format(time.StampMicro), ready.Format(time.StampMicro), got.Format(time.StampMicro))
		}
	}
	if want, ok := l.payload[t.ID]; !ok {
		l.failLocked("job %d: id %q was never put", t.JobID, t.ID)
	} else if string(t.Payload) != want {
		l.failLocked("job %d (%s): payload %s, want %s", t.JobID, t.ID, t.Payload, want)
	}
	if a, ok := l.acked[t.JobID]; ok && (sent.After(a.at) || t.Attempts > a.attempts) {
		l.failLocked("job %d (%s) delivered again (attempt %d, reserve sent %v) after its ack of attempt %d answered 204 at %v",
			t.JobID, t.ID, t.Attempts, sent.Format(time.StampMicro), a.attempts, a.at.Format(time.StampMicro))
	}
	if len(l.delivered[t.JobID]) > 0 {
		l.redelivered++
	}
	l.delivered[t.JobID] = append(l.delivered[t.JobID], d)
}

// shortAnswer records a reserve sent at sent that answered n tasks, fewer
// than it asked for, at got, with no kill in between.
func (l *ledger) shortAnswer(sent, got time.Time, n int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.short = append(l.short, shortReserve{sent, got, n})
}

// ack records an ack of the delivery of job with attempts answered 204
// at at.
func (l *ledger) ack(job uint64, attempts int, at time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.acks++
	if a, ok := l.acked[job]; ok {
		l.failLocked("job %d acknowledged twice (attempts %d and %d)", job, a.attempts, attempts)
	}
	for _, d := range l.delivered[job] {
		if d.attempts > attempts {
			l.failLocked("job %d: ack of attempt %d answered 204 after attempt %d was handed out (a stale lease accepted)", job, attempts, d.attempts)
		}
	}
	l.acked[job] = ackRecord{at, attempts}
}

// ackRefused records an ack answered 409 or 404: the lease had run out,
// and the task was (or will be) handed out again.
func (l *ledger) ackRefused() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.acksRefused++
}

// unknownAck records an ack of job without an answer.
func (l *ledger) unknownAck(job uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.acksUnknown++
	l.ackUnknown[job] = true
}

// settled reports whether the answered job is done with: acknowledged
// (204), or delivered, acknowledged without an answer, and gone from the
// server.
func (l *ledger) settled(job uint64) bool {
	_, acked := l.acked[job]
	return acked || l.gone[job]
}

// missing returns the answered jobs not settled yet, described, at most n
// of them; how many there are; and those of them whose ack went
// unanswered, which the server may have acknowledged: the caller asks the
// server about them and reports the ones it no longer has with [ledger.goneJob].
func (l *ledger) missing(n int) (desc []string, count int, ask []putRecord) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for job, p := range l.put {
		if l.settled(job) {
			continue
		}
		count++
		if l.ackUnknown[job] {
			ask = append(ask, p)
		}
		if len(desc) < n {
			desc = append(desc, fmt.Sprintf("job %d (%s, due %v, %d deliveries, ack unanswered %v)", job, p.id, p.due.Format(time.StampMicro), len(l.delivered[job]), l.ackUnknown[job]))
		}
	}
	slices.Sort(desc)
	return desc, count, ask
}

// goneJob records that the server no longer has the task of job, whose
// ack went unanswered: that ack happened.
func (l *ledger) goneJob(job uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.gone[job] = true
}

// check makes the checks that need every answer: each delivery's due is
// its put's; each delivered job was answered by a put or has an id whose
// put got no answer; and no reserve answered nothing while a task was
// ready (see notReady). It returns every failure.
func (l *ledger) check() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.notReady()
	for job, ds := range l.delivered {
		p, ok := l.put[job]
		if !ok {
			if !l.unknownPut[ds[0].id] {
				l.failLocked("job %d (%s) delivered, but no put answered it and no put of its id went unanswered", job, ds[0].id)
			}
			continue
		}
		for _, d := range ds {
			if !d.due.Equal(p.due) {
				l.failLocked("job %d (%s) handed out with due %v; its put answered %v", job, p.id, d.due, p.due)
			}
		}
	}
	return l.failures
}

// notReady checks that no reserve answered fewer tasks than it asked for
// while a task was ready that it did not get: a task whose put was
// answered before the reserve was sent, due readySlack before that, and
// not handed out before (its first hand-over, attempt 1, was sent after
// the short answer came). A reserve takes the ready tasks at one moment
// between its sending and its answer, so such a task would have been
// among them. This holds whatever the load, unlike lateness, which grows
// with the consumers' backlog, and it is what "tasks due while the server
// was down are ready at once" comes to under load. It takes O(short
// reserves × delivered jobs). l.mu is held.
func (l *ledger) notReady() {
	type first struct {
		sent     time.Time
		attempts int
	}
	firsts := make(map[uint64]first, len(l.delivered))
	for job, ds := range l.delivered {
		f := first{ds[0].sent, ds[0].attempts}
		for _, d := range ds[1:] {
			if d.sent.Before(f.sent) {
				f = first{d.sent, d.attempts}
			}
		}
		firsts[job] = f
	}
	type candidate struct {
		putRecord
		firstSent time.Time
	}
	var cands []candidate
	for job, p := range l.put {
		if f, ok := firsts[job]; ok && f.attempts == 1 {
			cands = append(cands, candidate{p, f.sent})
		}
	}
	var found []string
	for _, e := range l.short {
		for _, c := range cands {
			if !c.firstSent.After(e.got) || !c.answered.Before(e.sent) || !c.due.Add(readySlack).Before(e.sent) {
				continue
			}
			found = append(found, fmt.Sprintf("reserve sent %v answered %d tasks at %v, without job %d (%s), due at %v, put (answered %v), and first handed out only by a reserve sent %v",
				e.sent.Format(time.StampMicro), e.n, e.got.Format(time.StampMicro), c.job, c.id, c.due.Format(time.StampMicro), c.answered.Format(time.StampMicro), c.firstSent.Format(time.StampMicro)))
		}
	}
	if len(found) > 0 {
		slices.Sort(found)
		l.failLocked("%d times a due task was not handed out:\n%s", len(found), firstLines(found, 5))
	}
}

// summary is the line the crash test prints.
func (l *ledger) summary(kills int) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	rl := slices.Sorted(slices.Values(l.readyLateness))
	pct := func(p int) time.Duration {
		if len(rl) == 0 {
			return 0
		}
		return rl[min(len(rl)-1, len(rl)*p/100)].Round(time.Microsecond)
	}
	return fmt.Sprintf("puts answered %d (single puts: %d new, %d existing on retry), put calls unanswered %d; deliveries %d (%d again); acks %d, refused %d, unanswered %d (%d found done); reserves unanswered %d, short %d; kills %d; max lateness %v; first hand-overs after due or restart: p50 %v, p99 %v, max %v",
		l.putsAnswered, l.putsCreated, l.putsExisting, l.putsUnknown, l.deliveries, l.redelivered,
		l.acks, l.acksRefused, l.acksUnknown, len(l.gone), l.reservesUnknown, len(l.short), kills,
		l.maxLateness.Round(time.Microsecond), pct(50), pct(99), l.maxReadyLateness.Round(time.Microsecond))
}

// later returns the later of a and b.
func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// firstLines returns the first n of lines, and how many were left out.
func firstLines(lines []string, n int) string {
	if len(lines) <= n {
		return strings.Join(lines, "\n")
	}
	return strings.Join(lines[:n], "\n") + fmt.Sprintf("\n... and %d more", len(lines)-n)
}

// TestLedger shows that the crash test's checks can fail: an honest
// history passes, and each broken promise fed to a ledger is reported.
func TestLedger(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	task := func(job uint64, id string, attempts int, due time.Time, payload string) api.Task {
		return api.Task{JobID: job, ID: id, Attempts: attempts, Due: due, Payload: []byte(payload)}
	}
	honest := func() *ledger {
		l := newLedger()
		l.asking("a", `1`)
		l.answered(task(1, "a", 0, at(100), ""), putNew, at(0))
		l.deliver(task(1, "a", 1, at(100), `1`), at(90), at(101), at(0))
		l.ack(1, 1, at(110))
		// b: the put is cut by a kill, delivered, the retry finds it.
		l.asking("b", `2`)
		l.unknownPutOf("b")
		l.deliver(task(2, "b", 1, at(200), `2`), at(150), at(201), at(0))
		l.answered(task(2, "b", 0, at(200), ""), putExisting, at(180))
		l.unknownAck(2)
		l.deliver(task(2, "b", 2, at(200), `2`), at(300), at(301), at(250))
		l.ack(2, 2, at(310))
		return l
	}
	if f := honest().check(); len(f) != 0 {
		t.Fatalf("an honest history fails: %v", f)
	}
	// An empty reserve while the due tasks were handed out already (a)
	// or not yet due (b) is no failure.
	l := honest()
	l.shortAnswer(at(120), at(420), 0)
	if f := l.check(); len(f) != 0 {
		t.Errorf("an empty reserve with nothing ready fails: %v", f)
	}
	for _, c := range []struct {
		name   string
		breaks func(l *ledger)
	}{
		{"early", func(l *ledger) { l.deliver(task(3, "a", 1, at(500), `1`), at(400), at(499), at(0)) }},
		{"after ack", func(l *ledger) { l.deliver(task(1, "a", 1, at(100), `1`), at(111), at(112), at(0)) }},
		{"later attempt than acked", func(l *ledger) { l.deliver(task(1, "a", 2, at(100), `1`), at(105), at(106), at(0)) }},
		{"stale ack", func(l *ledger) {
			l.deliver(task(2, "b", 3, at(200), `2`), at(302), at(303), at(250))
			l.ack(2, 2, at(304))
		}},
		{"payload", func(l *ledger) { l.deliver(task(4, "a", 1, at(100), `9`), at(150), at(151), at(0)) }},
		{"never put", func(l *ledger) { l.deliver(task(5, "zz", 1, at(100), `1`), at(150), at(151), at(0)) }},
		{"unknown job", func(l *ledger) { l.deliver(task(6, "a", 1, at(100), `1`), at(150), at(151), at(0)) }},
		{"due changed", func(l *ledger) { l.deliver(task(1, "a", 1, at(90), `1`), at(95), at(96), at(0)) }},
		{"put of an acked job", func(l *ledger) { l.answered(task(1, "a", 0, at(100), ""), putExisting, at(120)) }},
		{"nothing while due", func(l *ledger) {
			l.asking("e", `5`)
			l.answered(task(9, "e", 0, at(-1000), ""), putNew, at(-2000))
			l.shortAnswer(time.Now().Add(time.Second), time.Now().Add(2*time.Second), 3)
			l.deliver(task(9, "e", 1, at(-1000), `5`), time.Now().Add(3*time.Second), time.Now().Add(4*time.Second), at(0))
		}},
		{"existing without a first put", func(l *ledger) {
			l.asking("c", `3`)
			l.answered(task(7, "c", 0, at(100), ""), putExisting, at(120))
		}},
	} {
		l := honest()
		c.breaks(l)
		if f := l.check(); len(f) == 0 {
			t.Errorf("%s: not reported", c.name)
		}
	}
	l = honest()
	if _, n, _ := l.missing(10); n != 0 {
		t.Errorf("honest history: %d jobs missing", n)
	}
	l.asking("d", `4`)
	l.answered(task(8, "d", 0, at(100), ""), putNew, at(0))
	if _, n, _ := l.missing(10); n != 1 {
		t.Errorf("an answered put never delivered is not missing")
	}
}
