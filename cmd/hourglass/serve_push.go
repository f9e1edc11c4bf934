package main

import (
	"context"
	"flag"
	"log/slog"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hourglass-go/hourglass/pusher"
	"github.com/hourglass-go/hourglass/service"
)

// Push queues: serve runs a pusher (package pusher) over either engine,
// from the moment the service is ready until the shutdown begins.

// pushStopTimeout is how long the pushes under way at a shutdown may run
// on before they are cancelled and their tasks released, within the
// shutdown's stopTimeout (their releases take a few milliseconds more).
const pushStopTimeout = 5 * time.Second

// pushRefresh is how often a pusher reads the push queues again: a
// second on the embedded store, whose Queues is read from memory; a
// minute on a cluster, whose Queues counts the tasks of every queue in
// the database (each node reads it, in time that grows with the tasks
// pending) and
// whose nodes are told of a policy changed on any of them as it commits
// (cluster.Node.NotifyPolicies), so the refresh is only a backstop.
func pushRefresh(o serveOptions) time.Duration {
	if o.pg.url != "" {
		return time.Minute
	}
	return time.Second
}

// pushOptions are serve's push flags.
type pushOptions struct {
	// allow is --push-allow as given, comma-separated; targets it
	// parsed (nil: no list), until serve makes them the server's
	// (pushTargets).
	allow   []string
	targets *pusher.Targets
}

// pushFlags defines serve's --push-allow flag.
func pushFlags(fs *flag.FlagSet, o *pushOptions) {
	fs.Func("push-allow", "hosts push queues may POST to: host names, IP addresses and CIDRs (repeat it, or separate them by commas). Default: any host on a loopback --http, none beyond loopback. The cloud metadata endpoints (169.254.0.0/16, fe80::/10, fd00:ec2::254, 100.100.100.200, metadata.google.internal, ...) and this server's own addresses are refused unless named exactly", func(s string) error {
		o.allow = append(o.allow, s)
		t, err := pusher.ParseTargets(strings.Join(o.allow, ","))
		if err != nil {
			return err
		}
		o.targets = t
		return nil
	})
}

// pushTargets returns the hosts the server's pushes may reach: those of
// --push-allow, none but them beyond loopback (o.loopback false), and
// never the server's own listen addresses (httpAddr, the address its
// HTTP API listens on, and --beanstalk's) unless named. It logs which
// rule is in force, once.
func pushTargets(o serveOptions, httpAddr string, log *slog.Logger) *pusher.Targets {
	listen := []string{httpAddr}
	if o.beanstalk != "" {
		listen = append(listen, o.beanstalk)
	}
	t := o.push.targets.Serving(o.loopback, listen...)
	log.Info("push targets", "rule", t.Rule())
	return t
}

// startPusher starts pushing the push queues of b.
func startPusher(b service.Service, o serveOptions, log *slog.Logger, reg prometheus.Registerer) *pusher.Pusher {
	p := pusher.New(b, pusher.Options{
		Targets:    o.push.targets,
		Refresh:    pushRefresh(o),
		MaxDelay:   o.maxDelay,
		Logger:     log,
		Registerer: reg,
	})
	p.Start()
	return p
}

// stopPusher begins stopping p (nil: none was started) and returns a
// channel closed once it has stopped: within pushStopTimeout, then the
// releases of what was cut short.
func stopPusher(p *pusher.Pusher, log *slog.Logger) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		if p == nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), pushStopTimeout)
		defer cancel()
		if err := p.Stop(ctx); err != nil {
			log.Warn("push: pushes still running at the shutdown deadline; cancelled and their tasks released")
		}
	}()
	return done
}
