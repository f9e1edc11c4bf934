// Package loadgen drives a server of the beanstalkd protocol (beanstalkd
// itself, or hourglass's package beanstalk) for the benchmarks of
// `hourglass-bench --scenario beanstalk`, so that both are measured by
// one client over loopback:
//
//   - [Puts]: puts per second from Options.Conns connections, each putting
//     one job at a time (Options.BodySize bytes, delayed an hour) and
//     waiting for INSERTED;
//   - [RoundTrips]: reserve→delete round trips per second from
//     Options.Conns workers on a tube filled beforehand with
//     Options.Prefill ready jobs;
//   - [Lateness]: Options.Jobs jobs put to fall due within one second,
//     more than Options.Lead and a second after the start (the puts get
//     at least Options.Lead), reserved and deleted by Options.Conns
//     workers; lateness is the time a job is handed out minus its due
//     time, taken as the client's send time plus its delay (so it counts
//     the put's one-way trip too).
//
// Each measurement uses a tube of its own; Puts and RoundTrips leave jobs
// in theirs ([Drain] removes them), which a server thrown away after the
// benchmark need not mind. Every function stops when its context ends. Nothing here needs a particular server: run the
// same calls against each address.
package loadgen

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Options size the measurements. Zero fields take the defaults named on
// each.
type Options struct {
	Conns    int           // connections or workers; default 64
	BodySize int           // bytes; default 200
	Duration time.Duration // of Puts and RoundTrips; default 5 s
	Prefill  int           // ready jobs before RoundTrips; default 200,000
	Jobs     int           // jobs of Lateness; default 100,000
	Lead     time.Duration // the least time Lateness's puts get before the jobs' due second; default 10 s
}

func (o Options) withDefaults() Options {
	if o.Conns <= 0 {
		o.Conns = 64
	}
	if o.BodySize <= 0 {
		o.BodySize = 200
	}
	if o.Duration <= 0 {
		o.Duration = 5 * time.Second
	}
	if o.Prefill <= 0 {
		o.Prefill = 200_000
	}
	if o.Jobs <= 0 {
		o.Jobs = 100_000
	}
	if o.Lead <= 0 {
		o.Lead = 10 * time.Second
	}
	o.BodySize = max(o.BodySize, 16) // room for Lateness's stamp
	return o
}

// Report is what [Run] measured of one server.
type Report struct {
	PutsPerSec       float64
	RoundTripsPerSec float64
	Lateness         LatenessReport
}

// LatenessReport summarizes [Lateness]: how late the jobs were handed
// out, over Jobs jobs.
type LatenessReport struct {
	Jobs          int
	P50, P99, Max time.Duration
}

// Run takes the three measurements of addr in turn.
func Run(ctx context.Context, addr string, o Options) (Report, error) {
	var r Report
	var err error
	if r.PutsPerSec, err = Puts(ctx, addr, o); err != nil {
		return r, fmt.Errorf("puts: %w", err)
	}
	if r.RoundTripsPerSec, err = RoundTrips(ctx, addr, o); err != nil {
		return r, fmt.Errorf("round trips: %w", err)
	}
	if r.Lateness, err = Lateness(ctx, addr, o); err != nil {
		return r, fmt.Errorf("lateness: %w", err)
	}
	return r, nil
}

// Puts measures puts per second: Options.Conns connections put jobs one
// at a time for Options.Duration. The jobs are delayed an hour; [Drain]
// removes them.
func Puts(ctx context.Context, addr string, o Options) (float64, error) {
	o = o.withDefaults()
	tube := newTube("puts")
	body := make([]byte, o.BodySize)
	conns, err := dialAll(ctx, addr, o.Conns, tube, "")
	if err != nil {
		return 0, err
	}
	defer closeAll(conns)
	ctx, cancel := context.WithTimeout(ctx, o.Duration)
	defer cancel()
	var n atomic.Int64
	start := time.Now()
	err = each(conns, func(c *conn) error {
		for ctx.Err() == nil {
			if _, err := c.put(0, 3600, 60, body); err != nil {
				return err
			}
			n.Add(1)
		}
		return nil
	})
	return float64(n.Load()) / time.Since(start).Seconds(), err
}

// RoundTrips measures reserve→delete round trips per second: it puts
// Options.Prefill ready jobs into a tube, then Options.Conns workers
// reserve and delete them for Options.Duration or until the tube is
// empty. It leaves the jobs it did not reach; [Drain] removes them.
func RoundTrips(ctx context.Context, addr string, o Options) (float64, error) {
	o = o.withDefaults()
	tube := newTube("roundtrips")
	if err := Fill(ctx, addr, tube, o.Prefill, o.BodySize, 0); err != nil {
		return 0, err
	}
	return ReserveDelete(ctx, addr, tube, o)
}

// ReserveDelete is [RoundTrips] on a tube already filled: Options.Conns
// workers reserve and delete jobs of tube for Options.Duration or until
// it is empty, and it returns the round trips per second.
func ReserveDelete(ctx context.Context, addr, tube string, o Options) (float64, error) {
	o = o.withDefaults()
	conns, err := dialAll(ctx, addr, o.Conns, "", tube)
	if err != nil {
		return 0, err
	}
	defer closeAll(conns)
	mctx, cancel := context.WithTimeout(ctx, o.Duration)
	defer cancel()
	var n atomic.Int64
	var empty atomic.Bool
	start := time.Now()
	var end time.Time
	var endOnce sync.Once
	err = each(conns, func(c *conn) error {
		for mctx.Err() == nil && !empty.Load() {
			id, _, ok, err := c.reserve(0)
			if err != nil {
				return err
			}
			if !ok {
				empty.Store(true)
				endOnce.Do(func() { end = time.Now() })
				return nil
			}
			if err := c.delete(id); err != nil {
				return err
			}
			n.Add(1)
		}
		return nil
	})
	endOnce.Do(func() { end = time.Now() })
	return float64(n.Load()) / end.Sub(start).Seconds(), err
}

// Lateness puts Options.Jobs jobs due within one wall-clock second, the
// second that begins more than Options.Lead plus one second from now
// (each put's delay is the whole seconds from its send to that second,
// and at least one), while Options.Conns workers wait to reserve and
// delete them. It fails if the puts take longer than the lead. (Due the
// second that begins Options.Lead from now, as it was, the puts had
// between nothing and the lead less a second, by the clock's fraction
// of a second at the start.)
func Lateness(ctx context.Context, addr string, o Options) (LatenessReport, error) {
	o = o.withDefaults()
	tube := newTube("lateness")
	producers, err := dialAll(ctx, addr, o.Conns, tube, "")
	if err != nil {
		return LatenessReport{}, err
	}
	defer closeAll(producers)
	workers, err := dialAll(ctx, addr, o.Conns, "", tube)
	if err != nil {
		return LatenessReport{}, err
	}
	defer closeAll(workers)
	due := time.Now().Add(o.Lead + time.Second).Truncate(time.Second).Add(time.Second)
	deadline := due.Add(2 * time.Minute) // bounds the wait for stragglers

	var mu sync.Mutex
	late := make([]time.Duration, 0, o.Jobs)
	var taken atomic.Int64
	wctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	werr := make(chan error, 1)
	go func() {
		werr <- each(workers, func(c *conn) error {
			mine := make([]time.Duration, 0, o.Jobs/o.Conns+1)
			defer func() {
				mu.Lock()
				late = append(late, mine...)
				mu.Unlock()
			}()
			for taken.Load() < int64(o.Jobs) && wctx.Err() == nil {
				id, body, ok, err := c.reserve(1)
				if err != nil {
					return err
				}
				if !ok {
					continue
				}
				now := time.Now()
				sent := int64(binary.LittleEndian.Uint64(body))
				delay := time.Duration(binary.LittleEndian.Uint32(body[8:])) * time.Second
				mine = append(mine, now.Sub(time.Unix(0, sent).Add(delay)))
				taken.Add(1)
				if err := c.delete(id); err != nil {
					return err
				}
			}
			return nil
		})
	}()

	// Producers pipeline their puts in batches: the put phase is not what
	// is measured, and must end within the lead.
	const batch = 32
	var next atomic.Int64
	perr := each(producers, func(c *conn) error {
		bodies := make([][]byte, batch)
		for i := range bodies {
			bodies[i] = make([]byte, o.BodySize)
		}
		for {
			first := int(next.Add(batch)) - batch
			if first >= o.Jobs {
				return nil
			}
			var tooLate bool
			err := c.putMany(min(batch, o.Jobs-first), func(i int) (uint32, []byte) {
				now := time.Now()
				left := due.Sub(now)
				tooLate = tooLate || left < time.Second
				delay := uint32(max(left+time.Second-1, 0) / time.Second) // due in [due, due+1s)
				binary.LittleEndian.PutUint64(bodies[i], uint64(now.UnixNano()))
				binary.LittleEndian.PutUint32(bodies[i][8:], delay)
				return delay, bodies[i]
			})
			if err != nil {
				return err
			}
			if tooLate {
				return fmt.Errorf("hourglass: loadgen: %d jobs not put within the lead of %s", o.Jobs, o.Lead)
			}
		}
	})
	if perr != nil {
		cancel()
		<-werr
		return LatenessReport{}, perr
	}
	if err := <-werr; err != nil {
		return LatenessReport{}, err
	}
	if len(late) < o.Jobs {
		return LatenessReport{}, fmt.Errorf("hourglass: loadgen: %d of %d jobs handed out within 2 minutes of their due time", len(late), o.Jobs)
	}
	slices.Sort(late)
	q := func(p float64) time.Duration { return late[min(len(late)-1, int(p*float64(len(late))))] }
	return LatenessReport{Jobs: len(late), P50: q(0.50), P99: q(0.99), Max: late[len(late)-1]}, nil
}

// Fill puts n jobs of size bytes, delayed delay seconds, into tube, from
// 16 connections that pipeline their puts in batches. It is for filling
// a server before a measurement (RoundTrips) or to compare memory.
func Fill(ctx context.Context, addr, tube string, n, size int, delay uint32) error {
	const conns, batch = 16, 256
	cs, err := dialAll(ctx, addr, conns, tube, "")
	if err != nil {
		return err
	}
	defer closeAll(cs)
	body := make([]byte, size)
	var next atomic.Int64
	return ctxErr(ctx, each(cs, func(c *conn) error {
		for ctx.Err() == nil {
			first := int(next.Add(batch)) - batch
			if first >= n {
				return nil
			}
			if err := c.putMany(min(batch, n-first), func(int) (uint32, []byte) { return delay, body }); err != nil {
				return err
			}
		}
		return ctx.Err()
	}))
}

// Drain deletes every ready, delayed and buried job of tube: it kicks the
// delayed and buried ones, and 64 connections reserve and delete until
// the tube is empty.
func Drain(ctx context.Context, addr, tube string) error {
	c, err := dial(ctx, addr)
	if err != nil {
		return err
	}
	defer closeAll([]*conn{c})
	if err := c.use(tube); err != nil {
		return err
	}
	workers, err := dialAll(ctx, addr, 64, "", tube)
	if err != nil {
		return err
	}
	defer closeAll(workers)
	for ctx.Err() == nil {
		n, err := c.kick(1 << 30)
		if err != nil {
			return err
		}
		err = each(workers, func(w *conn) error {
			for {
				id, _, ok, err := w.reserve(0)
				if err != nil || !ok {
					return err
				}
				if err := w.delete(id); err != nil {
					return err
				}
			}
		})
		if err != nil || n == 0 {
			return err
		}
	}
	return ctx.Err()
}

// newTube names a fresh tube for one measurement.
func newTube(what string) string {
	var b [4]byte
	rand.Read(b[:])
	return "bench-" + what + "-" + hex.EncodeToString(b[:])
}

// each runs f on every connection at once and returns the first error.
func each(conns []*conn, f func(*conn) error) error {
	errs := make([]error, len(conns))
	var wg sync.WaitGroup
	for i, c := range conns {
		wg.Go(func() { errs[i] = f(c) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// ctxErr returns err, or ctx's error when ctx has ended: the connections
// are closed then, and their "use of closed network connection" would
// hide that the time was up.
func ctxErr(ctx context.Context, err error) error {
	if err != nil && ctx.Err() != nil {
		return fmt.Errorf("hourglass: loadgen: %w", ctx.Err())
	}
	return err
}
