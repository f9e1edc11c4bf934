package cluster

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hourglass-go/hourglass/service"
	"github.com/hourglass-go/hourglass/task"
)

// A queue's policy (task.Policy, its rules in service/policy.go) is the
// columns of its row in hourglass_queues (migration 005), read by the
// statements that need it in the same statement, so that every node
// applies the policy that SetPolicy last committed, with no cache to
// invalidate:
//
//   - a put fills its ttr and max_attempts from the row (sqlInsert);
//   - a nack, bury or release reads the row with the task, decides with
//     service.AfterFailure and settles the task in a second statement
//     conditioned on its lease (failure.go);
//   - the flush settles the expired leases of queues whose policy has a
//     retry back-off, a dead-letter queue or a concurrency limit (the
//     row's on_failure) the same way, the others in its own statement,
//     by service.Expired's verdicts on their counters (sqlDies,
//     failure.go);
//   - a reserve leaves queues with a rate or concurrency limit (limited)
//     out of its statement and takes their tasks in a transaction that
//     locks their rows (limits.go).
//
// A NULL retry_initial is no retry policy: the default back-off
// (service.DefaultRetry) for a nack, at once for a lease that ran out
// (service.ExpiryDelay); 0 asks for immediate retries (on_failure is
// then true, and the owner settles the queue's expired leases, with no
// delay). A max_attempts of 0 is service.DefaultMaxAttempts, -1
// (task.UnlimitedAttempts) no limit: a put records the result
// (sqlInsert). A row written before either existed reads as the
// defaults.
//
// A push queue's endpoint (task.Push) is the column push (migration
// 006), JSON, its secret as given: the database holds it in the clear,
// and whoever reads the database (or its backups) reads it.
//
// What a node keeps of the policies is only a hint for waking reservers:
// the queues with a concurrency limit (Node.capped), whose reservers wait
// for a reserved task to be acked, given back or expired. It is loaded at
// Open and after a lost listen connection, and kept up to date by the
// notifications of chanPolicies: a stale hint delays a wake-up by at most
// capPoll, and never lets a limit be exceeded.

// policyColumns are the policy's columns of hourglass_queues, in the
// order policyRow.dest reads them.
const policyColumns = `retry_initial, retry_max, retry_multiplier, retry_jitter, max_attempts, ttr,
	rate_limit, rate_per, rate_burst, concurrency, dead_letter, push, dedupe,
	per_key_concurrency, per_key_rate_limit, per_key_rate_per, per_key_rate_burst`

// policyColumnsOf is policyColumns of the table aliased as alias.
func policyColumnsOf(alias string) string {
	cols := strings.Split(policyColumns, ",")
	for i, c := range cols {
		cols[i] = alias + "." + strings.TrimSpace(c)
	}
	return strings.Join(cols, ", ")
}

// policyRow is a policy as hourglass_queues records it; every field is a
// pointer, so that a LEFT JOIN that found no row reads the zero Policy.
type policyRow struct {
	retryInitial, retryMax        *int64
	retryMultiplier, retryJitter  *float64
	maxAttempts, ttr              *int64
	rateLimit, ratePer, rateBurst *int64
	concurrency                   *int64
	deadLetter                    *string
	push                          *pushJSON
	dedupe                        *int64
	// perKeyConcurrency and perKeyRate* are task.PerKey's (014).
	perKeyConcurrency                               *int64
	perKeyRateLimit, perKeyRatePer, perKeyRateBurst *int64
}

// pushJSON is a task.Push as the column push records it. Headers is
// written as given: a nil map as null, an empty one as {}, so that a
// policy reads back as it was set.
type pushJSON struct {
	URL     string            `json:"url"`
	Timeout int64             `json:"timeout_ns"`
	Headers map[string]string `json:"headers"`
	Secret  string            `json:"secret"`
	// NextSecret is absent from the rows written before it came: "".
	NextSecret string `json:"next_secret,omitempty"`
}

// dest returns the scan destinations of policyColumns.
func (p *policyRow) dest() []any {
	return []any{&p.retryInitial, &p.retryMax, &p.retryMultiplier, &p.retryJitter, &p.maxAttempts, &p.ttr,
		&p.rateLimit, &p.ratePer, &p.rateBurst, &p.concurrency, &p.deadLetter, &p.push, &p.dedupe,
		&p.perKeyConcurrency, &p.perKeyRateLimit, &p.perKeyRatePer, &p.perKeyRateBurst}
}

// policy returns the recorded policy.
func (p *policyRow) policy() task.Policy {
	i := func(v *int64) int64 {
		if v == nil {
			return 0
		}
		return *v
	}
	f := func(v *float64) float64 {
		if v == nil {
			return 0
		}
		return *v
	}
	var out task.Policy
	if p.retryInitial != nil {
		out.Retry = &task.Retry{
			Initial: time.Duration(*p.retryInitial), Max: time.Duration(i(p.retryMax)),
			Multiplier: f(p.retryMultiplier), Jitter: f(p.retryJitter),
		}
	}
	out.MaxAttempts = int(i(p.maxAttempts))
	out.TTR = time.Duration(i(p.ttr))
	if p.rateLimit != nil {
		out.Rate = &task.Rate{Limit: int(*p.rateLimit), Per: time.Duration(i(p.ratePer)), Burst: int(i(p.rateBurst))}
	}
	out.Concurrency = int(i(p.concurrency))
	out.Dedupe = time.Duration(i(p.dedupe))
	if c := i(p.perKeyConcurrency); c > 0 || p.perKeyRateLimit != nil {
		out.PerKey = &task.PerKey{Concurrency: int(c)}
		if p.perKeyRateLimit != nil {
			out.PerKey.Rate = &task.Rate{Limit: int(*p.perKeyRateLimit), Per: time.Duration(i(p.perKeyRatePer)), Burst: int(i(p.perKeyRateBurst))}
		}
	}
	if p.deadLetter != nil {
		out.DeadLetter = *p.deadLetter
	}
	if j := p.push; j != nil {
		out.Push = &task.Push{URL: j.URL, Timeout: time.Duration(j.Timeout), Headers: j.Headers, Secret: j.Secret, NextSecret: j.NextSecret}
	}
	return out
}

// policyArgs returns p's values in the order of policyColumns.
func policyArgs(p task.Policy) []any {
	var ri, rm *int64
	var mult, jit float64
	if r := p.Retry; r != nil {
		a, b := int64(r.Initial), int64(r.Max)
		ri, rm, mult, jit = &a, &b, r.Multiplier, r.Jitter
	}
	var rl *int64
	var per, burst int64
	if r := p.Rate; r != nil {
		l := int64(r.Limit)
		rl, per, burst = &l, int64(r.Per), int64(r.Burst)
	}
	if rm == nil {
		var z int64
		rm = &z
	}
	var push *pushJSON
	if h := p.Push; h != nil {
		push = &pushJSON{URL: h.URL, Timeout: int64(h.Timeout), Headers: h.Headers, Secret: h.Secret, NextSecret: h.NextSecret}
	}
	var kc, kper, kburst int64
	var kl *int64
	if k := p.PerKey; k != nil {
		kc = int64(k.Concurrency)
		if r := k.Rate; r != nil {
			l := int64(r.Limit)
			kl, kper, kburst = &l, int64(r.Per), int64(r.Burst)
		}
	}
	return []any{ri, *rm, mult, jit, int64(p.MaxAttempts), int64(p.TTR), rl, per, burst, int64(p.Concurrency), p.DeadLetter, push, int64(p.Dedupe),
		kc, kl, kper, kburst}
}

// sqlSetPolicy writes queue $1's policy ($2 to $18, in the order of
// policyColumns), creating its row if it has none; the pause is kept.
// The buckets of a rate that changed start full, as service.Refills says,
// compared here with the row replaced, which only this statement reads:
// the queue's (tokens_at 0: service.Bucket) and, for a new per-key rate,
// every key's (the queue's rows of hourglass_key_buckets, 016, deleted).
const sqlSetPolicy = `WITH refilled AS (
		DELETE FROM hourglass_key_buckets kb WHERE kb.queue = $1 AND NOT EXISTS (SELECT 1 FROM hourglass_queues p
			WHERE p.queue = $1 AND (p.per_key_rate_limit, p.per_key_rate_per, p.per_key_rate_burst) IS NOT DISTINCT FROM
				($16::bigint, $17::bigint, $18::bigint))
	)
	INSERT INTO hourglass_queues AS q (queue, ` + policyColumns + `)
	VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18)
	ON CONFLICT (queue) DO UPDATE SET
		tokens_at = CASE WHEN (q.rate_limit, q.rate_per, q.rate_burst) IS NOT DISTINCT FROM
			(EXCLUDED.rate_limit, EXCLUDED.rate_per, EXCLUDED.rate_burst) THEN q.tokens_at ELSE 0 END,
		retry_initial = EXCLUDED.retry_initial, retry_max = EXCLUDED.retry_max,
		retry_multiplier = EXCLUDED.retry_multiplier, retry_jitter = EXCLUDED.retry_jitter,
		max_attempts = EXCLUDED.max_attempts, ttr = EXCLUDED.ttr, rate_limit = EXCLUDED.rate_limit,
		rate_per = EXCLUDED.rate_per, rate_burst = EXCLUDED.rate_burst, concurrency = EXCLUDED.concurrency,
		dead_letter = EXCLUDED.dead_letter, push = EXCLUDED.push, dedupe = EXCLUDED.dedupe,
		per_key_concurrency = EXCLUDED.per_key_concurrency, per_key_rate_limit = EXCLUDED.per_key_rate_limit,
		per_key_rate_per = EXCLUDED.per_key_rate_per, per_key_rate_burst = EXCLUDED.per_key_rate_burst`

// SetQueue changes queue's settings, a row of hourglass_queues, as c
// says (service.Engine), durably (the answer follows the commit), for
// every node: each reads them from the queue's row in the statements
// that apply them. A policy (setPolicy) or a pause (pause), one
// statement; it returns the policy as recorded.
func (n *Node) SetQueue(ctx context.Context, queue string, c service.QueueChange) (task.Policy, error) {
	if err := n.Err(); err != nil {
		return task.Policy{}, err
	}
	switch {
	case c.Policy != nil && c.Policy.IsZero():
		return task.Policy{}, n.deletePolicy(ctx, queue)
	case c.Policy != nil:
		return n.setPolicy(ctx, queue, *c.Policy)
	case c.Pause != nil:
		return n.pause(ctx, queue, *c.Pause)
	}
	return task.Policy{}, fmt.Errorf("%w: no queue change", task.ErrInvalid)
}

// setPolicy makes p, checked and normalised by service.New, queue's
// policy. Reservers waiting on the queue, on every node, look again
// under the new limits.
func (n *Node) setPolicy(ctx context.Context, queue string, p task.Policy) (task.Policy, error) {
	if _, err := n.db.Exec(ctx, sqlSetPolicy, append([]any{queue}, policyArgs(p)...)...); err != nil {
		return task.Policy{}, dbErr(err)
	}
	n.policyChanged(queue, p.Concurrency > 0 || p.PerKey != nil && p.PerKey.Concurrency > 0)
	return p, nil
}

// Policy returns queue's policy as recorded: the zero Policy when none
// was set. One read by primary key.
func (n *Node) Policy(ctx context.Context, queue string) (task.Policy, error) {
	if err := n.Err(); err != nil {
		return task.Policy{}, err
	}
	var p policyRow
	err := n.db.QueryRow(ctx, "SELECT "+policyColumns+" FROM hourglass_queues WHERE queue = $1", queue).Scan(p.dest()...)
	if err != nil && err != pgx.ErrNoRows {
		return task.Policy{}, dbErr(err)
	}
	return p.policy(), nil
}

// deletePolicy makes queue's policy the default again (the zero policy
// of SetQueue); the queue's pause, if any, is kept. A queue without a
// row gets none.
func (n *Node) deletePolicy(ctx context.Context, queue string) error {
	_, err := n.db.Exec(ctx, `WITH refilled AS (DELETE FROM hourglass_key_buckets WHERE queue = $1)
		UPDATE hourglass_queues SET retry_initial = NULL, retry_max = 0,
			retry_multiplier = 0, retry_jitter = 0, max_attempts = 0, ttr = 0, rate_limit = NULL,
			rate_per = 0, rate_burst = 0, concurrency = 0, dead_letter = '', push = NULL, dedupe = 0, tokens = 0, tokens_at = 0,
			per_key_concurrency = 0, per_key_rate_limit = NULL, per_key_rate_per = 0, per_key_rate_burst = 0
		WHERE queue = $1`, queue)
	if err != nil {
		return dbErr(err)
	}
	n.policyChanged(queue, false)
	return nil
}

// policyChanged follows a committed change of queue's policy: this node's
// hint is updated at once and the other nodes' by a notification
// ("1 QUEUE" or "0 QUEUE": whether it has a concurrency limit), and the
// reservers waiting on the queue on every node look again.
func (n *Node) policyChanged(queue string, capped bool) {
	n.setCapped(queue, capped)
	flag := "0 "
	if capped {
		flag = "1 "
	}
	n.notifications.send(chanPolicies, flag+queue)
	n.lookAgain(queue)
}

// lookAgain has every reserver waiting on queue, on every node, look
// again: after a change of its pause or policy. Not readied, which stops
// at what this node's waiters can take.
func (n *Node) lookAgain(queue string) {
	n.mu.Lock()
	if q := n.queues[queue]; q != nil {
		q.WakeAll()
	}
	n.mu.Unlock()
	n.notifications.lookAgain(queue)
}

// setCapped records whether queue has a concurrency limit: O(queues
// capped), a copy of the map.
func (n *Node) setCapped(queue string, capped bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	old := *n.capped.Load()
	if old[queue] == capped {
		return
	}
	m := make(map[string]bool, len(old)+1)
	for q := range old {
		m[q] = true
	}
	if capped {
		m[queue] = true
	} else {
		delete(m, queue)
	}
	n.capped.Store(&m)
}

// policyNotified acts on a notification of chanPolicies, sent by any
// node (this one included) after a change of queue's policy.
func (n *Node) policyNotified(payload string) {
	flag, queue, ok := strings.Cut(payload, " ")
	if !ok {
		return
	}
	n.setCapped(queue, flag == "1")
	n.tellPolicies(queue)
}

// NotifyPolicies registers f, called with a queue's name after its
// policy changed on any node of the cluster (once this node hears of it:
// a notification's round trip), and with "" after this node may have
// missed such changes (its listen connection was lost and is back). f
// runs on the node's listener or lease loop and must not block. It makes
// Node a [service.PolicyNotifier]. O(1); safe for concurrent use.
func (n *Node) NotifyPolicies(f func(queue string)) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.watchers = append(n.watchers, f)
}

// tellPolicies calls the functions NotifyPolicies registered with queue.
func (n *Node) tellPolicies(queue string) {
	n.mu.Lock()
	fs := n.watchers
	n.mu.Unlock()
	for _, f := range fs {
		f(queue)
	}
}

// loadCapped reads which queues have a concurrency limit (of the queue
// or per key): at Open, and
// after the listen connection was lost (notifications may have been).
func (n *Node) loadCapped(ctx context.Context) error {
	rows, err := n.db.Query(ctx, "SELECT queue FROM hourglass_queues WHERE concurrency > 0 OR per_key_concurrency > 0")
	if err != nil {
		return err
	}
	queues, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return err
	}
	capped := make(map[string]bool, len(queues))
	for _, q := range queues {
		capped[q] = true
	}
	n.mu.Lock()
	n.capped.Store(&capped)
	n.mu.Unlock()
	return nil
}

// slotFreed follows the end of a reservation of a task of queue (ack,
// nack, release, bury, delete, expiry): if the queue has a concurrency
// limit, one reserver waiting on it, here or on another node, looks
// again. Without one it costs a map lookup, without a lock.
func (n *Node) slotFreed(queue string) {
	if (*n.capped.Load())[queue] {
		n.readied(queue, 1)
	}
}
