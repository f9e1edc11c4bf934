package main

import (
	"context"
	"errors"
	"log/slog"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hourglass-go/hourglass/broker"
	"github.com/hourglass-go/hourglass/internal/retry"
	"github.com/hourglass-go/hourglass/service"
	"github.com/hourglass-go/hourglass/store/pebblestore"
)

// Waits between tries to open the embedded store on a full disk: from
// fullDiskFirst doubling to fullDiskMax (±retry.Jitter), so that a
// server started on a full disk is ready within fullDiskMax of space
// being freed (untilRoom).
const (
	fullDiskFirst = time.Second
	fullDiskMax   = 30 * time.Second
)

// lockData takes the --data directory for this process
// (pebblestore.LockDir) before serve listens, so that a second server on
// it fails at once, saying which process holds it, and never listens. It
// returns the function that lets the directory go, after the store has
// closed. A cluster node has no data directory and takes nothing.
func lockData(o serveOptions) (unlock func(), err error) {
	if o.pg.url != "" {
		return func() {}, nil
	}
	l, err := pebblestore.LockDir(o.data)
	if err != nil {
		return nil, err
	}
	return func() { l.Close() }, nil
}

// openEmbedded opens the store in o.data and the broker over it, whose
// Open recovers every task, trying again while the disk is full
// (untilRoom). The server stays not ready meanwhile and is ready by
// itself once space is freed.
func openEmbedded(ctx context.Context, o serveOptions, log *slog.Logger, reg prometheus.Registerer) opened {
	return untilRoom(ctx, log, func() opened { return openEmbeddedOnce(o, log, reg) })
}

// untilRoom calls open until it succeeds, fails for another reason than
// a full disk (an error wrapping ENOSPC: Pebble could not write its
// manifest or log, or the broker's recovery could not commit), or ctx
// ends, and returns its last result. Between tries it waits
// internal/retry's back-off from fullDiskFirst doubling to fullDiskMax,
// logging the failures about once a second with a count, and once
// when the store opens after them.
func untilRoom(ctx context.Context, log *slog.Logger, open func() opened) opened {
	backoff := retry.Backoff{Base: fullDiskFirst, Max: fullDiskMax}
	failures := retry.NewFailureLog(log, "hourglass: the store's disk is full; not ready, trying again", "hourglass: the store's disk has room again")
	for {
		run := open()
		if run.err == nil || !errors.Is(run.err, syscall.ENOSPC) {
			if backoff.Failures() > 0 && run.err == nil {
				failures.OK()
			}
			return run
		}
		wait := backoff.Next()
		failures.Failed(run.err, "in", wait.String())
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return run
		case <-t.C:
		}
	}
}

// openEmbeddedOnce opens the store and the broker once, closing the
// store (and taking its metrics back) if the broker does not open.
func openEmbeddedOnce(o serveOptions, log *slog.Logger, reg prometheus.Registerer) opened {
	start := time.Now()
	st, err := pebblestore.Open(o.data, pebblestore.Options{CacheSize: o.cache, Logger: log})
	if err != nil {
		return opened{err: err}
	}
	c := st.Collector()
	if err := reg.Register(c); err != nil {
		log.Warn("store metrics not registered", "err", err)
	}
	b, err := broker.Open(st, broker.Config{
		MaxDelay:   o.maxDelay,
		MaxPayload: o.maxPayload,
		DefaultTTR: o.defaultTTR,
		History:    engineHistory(o.history),
		Logger:     log,
		Registerer: reg,
	})
	if err != nil {
		reg.Unregister(c)
		st.Close()
		return opened{err: err}
	}
	log.Info("ready", "recovery", time.Since(start).Round(time.Millisecond).String())
	return opened{b: service.New(b), close: func() error { return errors.Join(b.Close(), st.Close()) }}
}
