package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/hourglass-go/hourglass/dashboard"
	"github.com/hourglass-go/hourglass/httpapi"
	"github.com/hourglass-go/hourglass/pusher"
	"github.com/hourglass-go/hourglass/service"
	"github.com/hourglass-go/hourglass/store/pebblestore"
	"github.com/hourglass-go/hourglass/task"
)

const serveUsage = "usage: hourglass serve [--data DIR [--cache N] | --postgres URL [--node NAME] [--lease D] [--db-timeout D]] [--http ADDR] [--beanstalk ADDR] [--token T [--metrics-without-token]] [--insecure] [--allow-origin O]... [--body-timeout D] [--max-conns N] [--log-level L] [--log-format F] [--max-payload N] [--max-delay D] [--default-ttr D] [--history D] [--push-allow LIST]"

// tokenEnv names the environment variable that gives the token when
// --token does not, for serve and for the client subcommands.
const tokenEnv = "HOURGLASS_TOKEN"

// Times of a shutdown: the whole of it must fit in stopTimeout (the
// issue's 15 s); in-flight requests get httpTimeout of it, and closing
// the broker (its last commit) and the store the rest.
const (
	stopTimeout = 15 * time.Second
	httpTimeout = 10 * time.Second
)

// maxPayloadLimit bounds --max-payload: a payload is held in memory
// while it is put and read, and a Pebble value should stay far below its
// memtable size.
const maxPayloadLimit = 64 << 20

// maxCache bounds --cache: a block cache this large is surely a typo.
const maxCache = 1 << 40

// serveOptions are the parsed flags of `hourglass serve`.
type serveOptions struct {
	data     string
	http     string
	token    string
	insecure bool
	// metricsWithoutToken serves /metrics without the token
	// (httpapi.Options.MetricsWithoutToken).
	metricsWithoutToken bool
	// allowOrigins are the browser origins allowed to write across
	// origins (--allow-origin, repeated or comma-separated).
	allowOrigins []string
	bodyTimeout  time.Duration
	maxConns     int
	// loopback is set when --http is a loopback address: requests must
	// then name a loopback Host (httpapi.Options.LoopbackHost).
	loopback   bool
	logLevel   slog.Level
	logFormat  string // "text" or "json"
	maxPayload int
	cache      int64 // Pebble's block cache, bytes
	maxDelay   time.Duration
	defaultTTR time.Duration
	pg         postgresOptions // serve_postgres.go
	beanstalk  string          // serve_beanstalk.go
	push       pushOptions     // serve_push.go

	// history is how long finished tasks and their attempts are kept
	// (--history); 0 keeps none. engineHistory turns it into the engines'
	// setting.
	history time.Duration
}

// serveFlags defines the flags of `hourglass serve`, storing into o.
func serveFlags(o *serveOptions) *flag.FlagSet {
	fs := flag.NewFlagSet("hourglass serve", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&o.data, "data", "./hourglass-data", "directory of the store, created if missing")
	fs.StringVar(&o.http, "http", "127.0.0.1:7070", "address to serve the HTTP API on, HOST:PORT")
	fs.StringVar(&o.token, "token", "", "bearer token every /v1 call and /metrics must carry (default $"+tokenEnv+")")
	fs.BoolVar(&o.insecure, "insecure", false, "allow a non-loopback --http address without a token")
	fs.BoolVar(&o.metricsWithoutToken, "metrics-without-token", false, "serve /metrics, which names every queue, without the token (by default it needs the token, as /v1 does)")
	fs.Func("allow-origin", "a browser origin, like http://localhost:3000, allowed to call the API across origins (repeat it, or separate origins by commas)", func(s string) error {
		for _, origin := range strings.Split(s, ",") {
			if origin = strings.TrimSpace(origin); origin != "" {
				o.allowOrigins = append(o.allowOrigins, origin)
			}
		}
		if httpapi.CheckOrigins(o.allowOrigins) != nil {
			return errors.New("want origins such as http://localhost:3000: scheme://host[:port], no path")
		}
		return nil
	})
	fs.DurationVar(&o.bodyTimeout, "body-timeout", httpapi.DefaultBodyTimeout, "longest time a request's body may take to arrive")
	fs.IntVar(&o.maxConns, "max-conns", defaultMaxConns, "most HTTP connections open at once: at the limit a new one closes the one idle the longest (or whose client has not read its answer for 5s), or is closed at once if there is none")
	fs.TextVar(&o.logLevel, "log-level", slog.LevelInfo, "least level logged: debug, info, warn or error")
	fs.Func("log-format", "log format on standard error: text or json (default text)", func(s string) error {
		if s != "text" && s != "json" {
			return errors.New("want text or json")
		}
		o.logFormat = s
		return nil
	})
	o.maxPayload = task.DefaultMaxPayload
	fs.Func("max-payload", "largest payload, in bytes or with KiB, MiB (default 1MiB)", func(s string) error {
		n, err := parseBytes(s)
		if err == nil && (n < 1 || n > maxPayloadLimit) {
			err = fmt.Errorf("want 1 byte to %dMiB", maxPayloadLimit>>20)
		}
		o.maxPayload = int(n)
		return err
	})
	o.cache = pebblestore.DefaultCacheSize
	fs.Func("cache", "Pebble's block cache, in bytes or with KiB, MiB, GiB (default 32MiB): raise it when reserves read tasks put long ago", func(s string) error {
		n, err := parseBytes(s)
		if err == nil && (n < 1<<20 || n > maxCache) {
			err = fmt.Errorf("want 1MiB to %dGiB", maxCache>>30)
		}
		o.cache = n
		return err
	})
	fs.DurationVar(&o.maxDelay, "max-delay", task.DefaultMaxDelay, "longest delay of a put")
	fs.DurationVar(&o.defaultTTR, "default-ttr", task.DefaultTTR, "lease of a reserved task put without a ttr")
	fs.DurationVar(&o.history, "history", task.DefaultHistory, "how long finished tasks (acked, dead, deleted) and every task's attempts are kept; 0 keeps none")
	postgresFlags(fs, &o.pg)
	beanstalkFlags(fs, &o.beanstalk)
	pushFlags(fs, &o.push)
	return fs
}

// parseServe parses the flags of `hourglass serve`. The token comes from
// getenv(tokenEnv) when --token is not given. It refuses a listen address
// that is not loopback unless there is a token or --insecure. help is true
// for -h.
func parseServe(args []string, getenv func(string) string) (o serveOptions, help bool, err error) {
	o.logFormat = "text"
	fs := serveFlags(&o)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return o, true, nil
		}
		return o, false, err
	}
	if fs.NArg() > 0 {
		return o, false, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if !flagSet(fs, "token") {
		o.token = getenv(tokenEnv)
	}
	if err := checkToken(o.token); err != nil {
		return o, false, err
	}
	if o.data == "" {
		return o, false, errors.New("--data is empty")
	}
	if err := checkPostgres(fs, o.pg); err != nil {
		return o, false, err
	}
	if err := checkBeanstalk(o); err != nil {
		return o, false, err
	}
	if o.maxDelay <= 0 {
		return o, false, fmt.Errorf("invalid value %q for flag --max-delay: want a positive duration", o.maxDelay)
	}
	if o.defaultTTR < time.Millisecond {
		return o, false, fmt.Errorf("invalid value %q for flag --default-ttr: want 1ms or more", o.defaultTTR)
	}
	if o.history < 0 {
		return o, false, fmt.Errorf("invalid value %q for flag --history: want 0s (keep none) or more", o.history)
	}
	lo, err := loopback(o.http)
	if err != nil {
		return o, false, fmt.Errorf("invalid value %q for flag --http: %v", o.http, err)
	}
	o.loopback = lo
	if o.bodyTimeout <= 0 {
		return o, false, fmt.Errorf("invalid value %q for flag --body-timeout: want a positive duration", o.bodyTimeout)
	}
	if o.maxConns < 1 {
		return o, false, fmt.Errorf("invalid value %d for flag --max-conns: want 1 or more", o.maxConns)
	}
	if !lo && o.token == "" && !o.insecure {
		return o, false, fmt.Errorf("refusing to serve on %s, which is not a loopback address, without a token: give --token (or $%s), or --insecure", o.http, tokenEnv)
	}
	return o, false, nil
}

// checkToken refuses a token no client could present: one with white
// space at either end, which the server's reading of "Authorization:
// Bearer TOKEN" trims (as HTTP trims a header value), or with a byte a
// header value cannot carry. A token with a trailing space or newline, as
// a copy from a file gives, would otherwise lock every client out.
func checkToken(token string) error {
	if token != strings.TrimSpace(token) {
		return fmt.Errorf("the token (--token or $%s) has white space at its start or end, which no client can send: remove it", tokenEnv)
	}
	for _, c := range []byte(token) {
		if c < ' ' || c == 0x7f {
			return fmt.Errorf("the token (--token or $%s) holds a control character, which no client can send", tokenEnv)
		}
	}
	return nil
}

// engineHistory returns the engines' History setting
// (broker.Config.History, cluster.Options.History) for --history d:
// their zero means the default, and a negative value keeps none.
func engineHistory(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}

// defaultMaxConns is --max-conns's default: well under the usual limit
// of file descriptors once Go has raised it to its hard limit, and far
// above what a delay queue's clients hold.
const defaultMaxConns = 4096

// listenName returns the host of the listen address addr when it is a
// name other than localhost (which httpapi allows anyway): clients
// calling the server by that name send it as Host.
func listenName(addr string) []string {
	host, _, err := net.SplitHostPort(addr)
	if err != nil || host == "" || net.ParseIP(host) != nil {
		return nil
	}
	return []string{host}
}

// flagSet reports whether the flag name was given.
func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// loopback reports whether the listen address addr (HOST:PORT) reaches
// only this machine: a loopback IP, or a name whose every address is
// loopback. An empty host listens on every interface.
func loopback(addr string) (bool, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return false, err
	}
	if _, err := net.LookupPort("tcp", port); err != nil {
		return false, err
	}
	if host == "" {
		return false, nil
	}
	if ip := net.ParseIP(host); ip != nil {
		return ip.IsLoopback(), nil
	}
	if host == "localhost" {
		return true, nil
	}
	ips, err := net.DefaultResolver.LookupIPAddr(context.Background(), host)
	if err != nil {
		return false, err
	}
	for _, ip := range ips {
		if !ip.IP.IsLoopback() {
			return false, nil
		}
	}
	return len(ips) > 0, nil
}

// parseBytes parses a size in bytes: a whole number, optionally followed
// by B, KiB, MiB or GiB (KB, MB and GB are read as the same powers of
// two).
func parseBytes(s string) (int64, error) {
	num, mult := strings.TrimSpace(s), int64(1)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"KB", 1 << 10}, {"MB", 1 << 20}, {"GB", 1 << 30}, {"B", 1}} {
		if n, ok := strings.CutSuffix(num, u.suffix); ok {
			num, mult = strings.TrimSpace(n), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n < 0 || n > (1<<62)/mult {
		return 0, errors.New("want a size like 1048576, 512KiB or 1MiB")
	}
	return n * mult, nil
}

// printServeHelp writes serve's usage line and its flags.
func printServeHelp(w io.Writer) {
	fmt.Fprintln(w, serveUsage)
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Serves the durable delay queue's HTTP API on --http, with its store in --data.")
	fmt.Fprintln(w)
	fs := serveFlags(&serveOptions{})
	fs.SetOutput(w)
	fs.PrintDefaults()
}

// runServe is `hourglass serve`: it serves until SIGINT or SIGTERM and
// returns the exit status, 0 after a clean stop, 1 if serving failed and
// 2 for a usage error.
func runServe(args []string, stdout, stderr io.Writer) int {
	o, help, err := parseServe(args, os.Getenv)
	if help {
		printServeHelp(stdout)
		return 0
	}
	if err != nil {
		return commandError(stderr, serveUsage, err)
	}
	log := newLogger(stderr, o.logFormat, o.logLevel)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		stop() // a second signal ends the process at once
	}()
	if err := serve(ctx, o, log, nil); err != nil {
		log.Error("serve failed", "err", err)
		return 1
	}
	return 0
}

// newLogger returns a logger writing to w in format ("text" or "json")
// from level up.
func newLogger(w io.Writer, format string, level slog.Level) *slog.Logger {
	opts := &slog.HandlerOptions{Level: level}
	if format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// opened is what recovery hands over: the broker and how to close it
// with its store, or why they did not open.
type opened struct {
	b     service.Service
	close func() error
	err   error
}

// serve runs the service until ctx ends: it takes the data directory
// (lockData) and listens first (healthz 200, readyz 503), then opens the
// store and the broker, whose Open recovers every task, and then serves
// the API (readyz 200). When ctx ends it drains (readyz 503, long polls
// answered), lets in-flight requests finish, closes the broker (its last
// commit) and the store, all within stopTimeout. listening, if not nil,
// is called with the address once the listener is open.
func serve(ctx context.Context, o serveOptions, log *slog.Logger, listening func(addr string)) error {
	unlock, err := lockData(o) // serve_embedded.go
	if err != nil {
		return err
	}
	defer unlock()
	ln, err := net.Listen("tcp", o.http)
	if err != nil {
		return fmt.Errorf("hourglass: %w", err)
	}
	o.push.targets = pushTargets(o, ln.Addr().String(), log) // serve_push.go
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	api := httpapi.New(httpapi.Options{
		Token:        o.token,
		MaxPayload:   o.maxPayload,
		BodyTimeout:  o.bodyTimeout,
		AllowOrigins: o.allowOrigins,
		LoopbackHost: o.loopback,
		Hosts:        listenName(o.http),
		Gatherer:     reg,
		Logger:       log,
		// A policy's push target refused is 400 (serve_push.go).
		CheckPushTarget: o.push.targets.Check,
		// /metrics needs the token unless --metrics-without-token.
		MetricsWithoutToken: o.metricsWithoutToken,
	})
	hs := &http.Server{
		Handler:           api.CheckBrowsers(dashboard.With(api)),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	bl, err := listenBeanstalk(o.beanstalk, log)
	if err != nil {
		ln.Close()
		return err
	}
	// At --max-conns, a new connection takes the place of the one idle
	// the longest (httpapi/conns.go).
	limited := httpapi.LimitListener(ln, o.maxConns, log)
	hs.ConnState = limited.ConnState
	served := make(chan error, 1)
	go func() { served <- hs.Serve(limited) }()
	if o.pg.url != "" {
		log.Info("listening", "addr", ln.Addr().String(), "engine", "postgres", "auth", o.token != "")
	} else {
		log.Info("listening", "addr", ln.Addr().String(), "engine", "embedded", "data", o.data, "auth", o.token != "")
	}
	if listening != nil {
		listening(ln.Addr().String())
	}

	recovered := make(chan opened, 1)
	go func() {
		if o.pg.url != "" {
			recovered <- openPostgres(o, log, reg)
			return
		}
		recovered <- openEmbedded(ctx, o, log, reg)
	}()

	var run opened
	var stopErr error
	var pushes *pusher.Pusher
	select {
	case run = <-recovered:
		if run.err == nil {
			pushes = startPusher(run.b, o, log, reg)
			api.SetService(pushes.Watch(run.b))
			bl.start(run.b, o.maxPayload)
			select {
			case <-ctx.Done():
			case stopErr = <-served:
			}
		}
	case <-ctx.Done():
	case stopErr = <-served:
	}
	deadline := time.Now().Add(stopTimeout)
	log.Info("stopping")
	pushesStopped := stopPusher(pushes, log)
	api.Drain()
	httpCtx, cancel := context.WithDeadline(context.Background(), time.Now().Add(httpTimeout))
	defer cancel()
	if err := hs.Shutdown(httpCtx); err != nil {
		log.Warn("requests still running at the shutdown deadline; closing their connections", "err", err)
		hs.Close()
	}
	bl.stop(httpCtx)
	<-pushesStopped
	if run.b == nil && run.err == nil {
		// Stopping during recovery: wait for it, to close what it opened.
		select {
		case run = <-recovered:
		case <-time.After(time.Until(deadline)):
			return errors.New("hourglass: recovery still running at the shutdown deadline; exiting without closing the store")
		}
	}
	if run.err != nil {
		return run.err
	}
	if err := errors.Join(stopErr, run.close()); err != nil {
		return err
	}
	log.Info("stopped")
	return nil
}
