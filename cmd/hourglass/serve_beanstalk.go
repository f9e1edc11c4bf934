package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"

	"github.com/hourglass-go/hourglass/beanstalk"
	"github.com/hourglass-go/hourglass/service"
)

// beanstalkFlags defines serve's --beanstalk flag.
func beanstalkFlags(fs *flag.FlagSet, addr *string) {
	fs.StringVar(addr, "beanstalk", "", "also serve the beanstalkd protocol on this address, HOST:PORT (default off)")
}

// checkBeanstalk checks --beanstalk against the other flags: the protocol
// has no authentication, so a non-loopback address needs --insecure. It
// serves the embedded store and a cluster node alike.
func checkBeanstalk(o serveOptions) error {
	if o.beanstalk == "" {
		return nil
	}
	lo, err := loopback(o.beanstalk)
	if err != nil {
		return fmt.Errorf("invalid value %q for flag --beanstalk: %v", o.beanstalk, err)
	}
	if !lo && !o.insecure {
		return fmt.Errorf("refusing to serve the beanstalkd protocol, which has no authentication, on %s, which is not a loopback address: give --insecure", o.beanstalk)
	}
	return nil
}

// beanstalkListener is the beanstalkd protocol's side of serve: listening
// from the start (so a taken address fails at once), serving once the
// broker is ready.
type beanstalkListener struct {
	ln  net.Listener
	srv *beanstalk.Server
	log *slog.Logger
}

// listenBeanstalk opens addr, or returns nil for "".
func listenBeanstalk(addr string, log *slog.Logger) (*beanstalkListener, error) {
	if addr == "" {
		return nil, nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("hourglass: beanstalk: %w", err)
	}
	log.Info("beanstalk listening", "addr", ln.Addr().String())
	return &beanstalkListener{ln: ln, log: log}, nil
}

// start serves the protocol over b, on either engine.
func (l *beanstalkListener) start(b service.Service, maxPayload int) {
	if l == nil {
		return
	}
	l.srv = beanstalk.NewServer(b, beanstalk.Options{MaxJobSize: max(maxPayload, 65535), Logger: l.log})
	go func() {
		if err := l.srv.Serve(l.ln); err != nil && !errors.Is(err, beanstalk.ErrServerClosed) {
			l.log.Error("beanstalk: serve", "err", err)
		}
	}()
}

// stop shuts the protocol down (before the broker closes).
func (l *beanstalkListener) stop(ctx context.Context) {
	if l == nil {
		return
	}
	if l.srv == nil {
		l.ln.Close()
		return
	}
	if err := l.srv.Shutdown(ctx); err != nil {
		l.log.Warn("beanstalk: connections still open at the shutdown deadline", "err", err)
	}
}
