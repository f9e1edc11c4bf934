package retry

import (
	"context"
	"log/slog"
	"time"
)

// Bounds of a prune.
const (
	// PruneBatch bounds the records one call of [PruneFunc] removes: a
	// short transaction (the cluster), or a short stop of the committer
	// between two groups (the embedded engine), which the writes arriving
	// meanwhile wait.
	PruneBatch = 1000
	// PruneEvery is the most time between two rounds; a short retention
	// prunes every quarter of it (tests), but not more often than
	// PruneMinEvery.
	PruneEvery    = 5 * time.Second
	PruneMinEvery = 10 * time.Millisecond
	// PrunePause is the pause between two batches of a round, yielding
	// the store to the writes that serve.
	PrunePause = 10 * time.Millisecond
	// PruneTimeout bounds one call of [PruneFunc].
	PruneTimeout = 30 * time.Second
)

// PruneFunc deletes up to max records older than age, oldest first,
// and returns how many it deleted; "older" is by the engine's clock (the
// cluster's is its database's). It returns within ctx's deadline.
type PruneFunc func(ctx context.Context, age time.Duration, max int) (int, error)

// Pruner removes the records older than Retention, written once for
// both engines, which supply only Prune. A round runs every
// min(PruneEvery, max(Retention/4, PruneMinEvery)) (PruneEvery when
// Retention is 0: only what an earlier run wrote is left to prune), on
// a node that Leads, and calls Prune for PruneBatch records at a time,
// PrunePause apart, until a batch comes short. After a failed round the
// next waits a [Backoff] (DefaultBase to DefaultMax) if that is longer,
// and the failures are logged by a [FailureLog].
//
// Set the fields, then call Start once and Stop once, from one
// goroutine; Stop cancels the batch in progress and returns when the
// loop has ended. A round costs Prune's cost per batch; the loop holds
// no lock of its own.
type Pruner struct {
	// What names the records in logs, e.g. "the history".
	What      string
	Retention time.Duration
	Prune     PruneFunc
	// Leads says whether this process prunes now; nil: always.
	Leads func() bool
	Log   *slog.Logger

	ctx    context.Context // cancelled by Stop
	cancel context.CancelFunc
	done   chan struct{} // closed when the loop ends
}

// Every returns the time between two rounds.
func (p *Pruner) Every() time.Duration {
	if p.Retention <= 0 {
		return PruneEvery
	}
	return min(PruneEvery, max(p.Retention/4, PruneMinEvery))
}

// Start starts the pruning goroutine.
func (p *Pruner) Start() {
	p.ctx, p.cancel = context.WithCancel(context.Background())
	p.done = make(chan struct{})
	go p.loop()
}

// Stop ends the pruning: it cancels the batch in progress and returns
// once the goroutine has ended. Stop without Start does nothing.
func (p *Pruner) Stop() {
	if p.done == nil {
		return
	}
	p.cancel()
	<-p.done
}

func (p *Pruner) loop() {
	defer close(p.done)
	retry := Backoff{Base: DefaultBase, Max: DefaultMax}
	failures := NewFailureLog(p.Log, "hourglass: pruning "+p.What+" failed; the next round retries", "hourglass: pruning "+p.What+" works again")
	wait := p.Every()
	for {
		t := time.NewTimer(wait)
		select {
		case <-p.ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		wait = p.Every()
		if p.Leads != nil && !p.Leads() {
			continue
		}
		if _, err := p.Round(p.ctx); err != nil {
			failures.Failed(err)
			wait = max(wait, retry.Next())
		} else {
			failures.OK()
			retry.Reset()
		}
	}
}

// Round removes the records due for pruning, a batch at a time, and
// returns how many; it stops early, with no error, when ctx ends.
func (p *Pruner) Round(ctx context.Context) (int, error) {
	total := 0
	for {
		bctx, cancel := context.WithTimeout(ctx, PruneTimeout)
		n, err := p.Prune(bctx, max(p.Retention, 0), PruneBatch)
		cancel()
		total += n
		if ctx.Err() != nil {
			return total, nil
		}
		if err != nil || n < PruneBatch {
			return total, err
		}
		t := time.NewTimer(PrunePause)
		select {
		case <-ctx.Done():
			t.Stop()
			return total, nil
		case <-t.C:
		}
	}
}
