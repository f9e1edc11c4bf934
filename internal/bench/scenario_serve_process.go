package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// serveBinary, when set, is the hourglass binary the scenarios of the
// service run as their servers: --hourglass (see [ServeFlags]), or a
// binary a test builds, since a test binary cannot serve.
var serveBinary string

// ServeFlags defines --hourglass on fs, the hourglass binary the
// scenarios of the service run as `hourglass serve`. Without it they run
// the hourglass next to the running executable (go install and
// `go build -o DIR/ ./cmd/...` put both there), or else one built once
// per [Run] with `go build` from the module in the working directory.
func ServeFlags(fs *flag.FlagSet) {
	fs.StringVar(&serveBinary, "hourglass", "", "the hourglass binary the service's scenarios run as servers (default: the hourglass next to this executable, else one built by go build from the working directory's module)")
}

// serverPackage is what go build builds when no hourglass binary is at
// hand.
const serverPackage = "github.com/hourglass-go/hourglass/cmd/hourglass"

// serveBuildTimeout bounds that go build.
const serveBuildTimeout = 10 * time.Minute

// built is the hourglass binary go build made for this run, once: its
// directory is removed at the end of [Run] (removeBuilt). It is used by
// one goroutine at a time, as the whole package is.
var built struct {
	dir, bin, skip string
	tried          bool
}

// serveCommand returns the binary that runs `serve`, or a note saying why
// there is none.
func serveCommand() (bin, skip string) {
	if serveBinary != "" {
		return serveBinary, ""
	}
	if testing.Testing() {
		return "", "skipped: a test binary cannot run `hourglass serve` (TestServeScenario builds one)"
	}
	exe, err := os.Executable()
	if err != nil {
		exe = ""
	}
	return findServer(exe)
}

// findServer returns the hourglass binary in the directory of exe (the
// running executable; "" when unknown), or else the one buildServer
// makes, once per run.
func findServer(exe string) (bin, skip string) {
	if exe != "" {
		name := "hourglass"
		if runtime.GOOS == "windows" {
			name += ".exe"
		}
		sibling := filepath.Join(filepath.Dir(exe), name)
		if fi, err := os.Stat(sibling); err == nil && fi.Mode().IsRegular() {
			return sibling, ""
		}
	}
	if !built.tried {
		built.tried = true
		built.dir, built.bin, built.skip = buildServer()
	}
	return built.bin, built.skip
}

// buildServer builds the hourglass binary into a new temporary
// directory with go build, from the module in the working directory.
func buildServer() (dir, bin, skip string) {
	dir, err := os.MkdirTemp("", "hourglass-bench-")
	if err != nil {
		return "", "", "skipped: no hourglass binary: " + err.Error()
	}
	bin = filepath.Join(dir, "hourglass")
	ctx, cancel := context.WithTimeout(context.Background(), serveBuildTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, serverPackage).CombinedOutput()
	if err != nil {
		os.RemoveAll(dir)
		return "", "", fmt.Sprintf("skipped: no hourglass binary next to this one, and go build %s: %v: %s (name one with --hourglass)",
			serverPackage, err, bytes.TrimSpace(out))
	}
	return dir, bin, ""
}

// removeBuilt removes the binary buildServer made, if any, so that the
// next run builds afresh.
func removeBuilt() {
	if built.dir != "" {
		os.RemoveAll(built.dir)
	}
	built.dir, built.bin, built.skip, built.tried = "", "", "", false
}

// serveJob is a job of a scenario that runs `hourglass serve`: f runs
// with the binary serveCommand finds, a missing one makes the row a note
// and an error a failed row.
func serveJob(scenario, structure string, n int, cs string, f func(bin string) (Result, error)) Job {
	return Job{Scenario: scenario, Structure: structure, N: n, Case: cs, run: func() Result {
		bin, skip := serveCommand()
		if skip != "" {
			return Result{Note: skip}
		}
		r, err := f(bin)
		if err != nil {
			return failed(err)
		}
		return r
	}}
}

// Times that bound one server process.
const (
	// serveReadyTimeout bounds a start, recovery included: 10M tasks are
	// recovered in seconds.
	serveReadyTimeout = 2 * time.Minute
	// serveStopTimeout bounds a SIGTERM stop; the server's own bound is
	// 15 s.
	serveStopTimeout = 20 * time.Second
	// readyPoll is the interval between GET /readyz while a server starts.
	readyPoll = time.Millisecond
	// logTail is how many lines of the server's log an error quotes.
	logTail = 8
)

// serveProcess is one `hourglass serve` process on a data directory, and
// an HTTP client with enough keep-alive connections for the scenario's
// concurrent clients. It is used by one goroutine at a time, apart from
// its client, which is safe for concurrent use.
type serveProcess struct {
	bin, dir string
	// store is the flags that say where the tasks are: --data dir, or
	// --postgres URL --node NAME for a node of a cluster.
	store []string
	// env is added to the server's environment (the keys scenario's
	// memory rows set GOGC).
	env  []string
	addr string // HOST:PORT it listens on
	hc   *http.Client

	cmd  *exec.Cmd
	done chan struct{} // closed once the process has exited

	// mu guards tail, the last lines the server logged.
	mu   sync.Mutex
	tail []string
}

// newServeProcess returns a process, not started yet, that will serve dir.
func newServeProcess(bin, dir string) *serveProcess {
	tr := &http.Transport{
		MaxIdleConns:        1024,
		MaxIdleConnsPerHost: 1024, // the default of 2 would reconnect 64 clients on every request
		IdleConnTimeout:     time.Minute,
		DisableCompression:  true,
	}
	return &serveProcess{bin: bin, dir: dir, store: []string{"--data", dir}, addr: "127.0.0.1:0", hc: &http.Client{Transport: tr}}
}

// newNodeProcess returns a process, not started yet, that will serve as
// node name of a cluster on the PostgreSQL database at url.
func newNodeProcess(bin, url, name string) *serveProcess {
	p := newServeProcess(bin, "")
	p.store = []string{"--postgres", url, "--node", name}
	return p
}

// url returns the URL of path on the server.
func (p *serveProcess) url(path string) string { return "http://" + p.addr + path }

// start starts the server and waits for /readyz to answer 200. It returns
// the time from just before the process was started to that answer. The
// first start listens on a port the system picks (read from the server's
// log); a restart listens on the same one, so the wait for readiness can
// begin at once.
func (p *serveProcess) start() (time.Duration, error) {
	args := append(append([]string{"serve"}, p.store...), "--http", p.addr, "--log-format", "json")
	cmd := exec.Command(p.bin, args...)
	cmd.Env = append(serveEnv(), p.env...)
	cmd.SysProcAttr = serveProcAttr()
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return 0, err
	}
	listening := make(chan string, 1)
	p.done = make(chan struct{})
	begin := time.Now()
	if err := cmd.Start(); err != nil {
		return 0, fmt.Errorf("starting %s serve: %w", p.bin, err)
	}
	p.cmd = cmd
	logDone := make(chan struct{})
	go func() {
		p.readLog(stderr, listening)
		close(logDone)
	}()
	go func() {
		<-logDone // Wait closes the pipe: read it to the end first
		cmd.Wait()
		close(p.done)
	}()

	ctx, cancel := context.WithTimeout(context.Background(), serveReadyTimeout)
	defer cancel()
	if strings.HasSuffix(p.addr, ":0") {
		select {
		case p.addr = <-listening:
		case <-p.done:
			return 0, p.exited("exited before listening")
		case <-ctx.Done():
			return 0, p.failure("not listening after %v", serveReadyTimeout)
		}
	}
	for {
		if p.ready(ctx) {
			return time.Since(begin), nil
		}
		select {
		case <-p.done:
			return 0, p.exited("exited before it was ready")
		case <-ctx.Done():
			return 0, p.failure("not ready after %v", serveReadyTimeout)
		case <-time.After(readyPoll):
		}
	}
}

// serveEnv is the environment of a server: this process's, without a
// token, since the scenario's clients send none.
func serveEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "HOURGLASS_TOKEN=") {
			env = append(env, kv)
		}
	}
	return env
}

// ready reports whether GET /readyz answers 200.
func (p *serveProcess) ready(ctx context.Context) bool {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, p.url("/readyz"), nil)
	resp, err := p.hc.Do(req)
	if err != nil {
		return false
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// readLog reads the server's JSON log lines from r until it closes,
// keeping the last few and sending the address of the "listening" line
// on listening.
func (p *serveProcess) readLog(r io.Reader, listening chan<- string) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	sent := false
	for sc.Scan() {
		line := sc.Text()
		if !sent {
			var l struct{ Msg, Addr string }
			if json.Unmarshal([]byte(line), &l) == nil && l.Msg == "listening" && l.Addr != "" {
				listening <- l.Addr
				sent = true
			}
		}
		p.mu.Lock()
		p.tail = append(p.tail, line)
		if len(p.tail) > logTail {
			p.tail = p.tail[len(p.tail)-logTail:]
		}
		p.mu.Unlock()
	}
	io.Copy(io.Discard, r)
}

// failure returns an error about the server with the last lines it
// logged.
func (p *serveProcess) failure(format string, args ...any) error {
	p.mu.Lock()
	tail := strings.Join(p.tail, "\n")
	p.mu.Unlock()
	msg := fmt.Sprintf("hourglass serve "+format, args...)
	if tail != "" {
		msg += "; its log ends:\n" + tail
	}
	return errors.New(msg)
}

// exited returns an error for a server that has exited, with its status.
func (p *serveProcess) exited(what string) error {
	return p.failure("%s (%v)", what, p.cmd.ProcessState)
}

// alive returns an error if the server has exited.
func (p *serveProcess) alive() error {
	select {
	case <-p.done:
		return p.exited("exited")
	default:
		return nil
	}
}

// kill ends the server with SIGKILL and waits for it to exit.
func (p *serveProcess) kill() {
	if p.cmd == nil {
		return
	}
	p.cmd.Process.Kill()
	<-p.done
	p.hc.CloseIdleConnections()
}

// stop ends the server with SIGTERM, which commits and exits, and kills
// it if it has not exited within serveStopTimeout.
func (p *serveProcess) stop() {
	if p.cmd == nil {
		return
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		p.kill()
		return
	}
	select {
	case <-p.done:
		p.hc.CloseIdleConnections()
	case <-time.After(serveStopTimeout):
		p.kill()
	}
}

// rss returns the server's resident set size in bytes.
func (p *serveProcess) rss() (int64, error) {
	return processRSS(p.cmd.Process.Pid)
}

// metrics reads the values of the named series (full names, labels
// included, as /metrics prints them) from the server's /metrics.
func (p *serveProcess) metrics(names ...string) (map[string]float64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, p.url("/metrics"), nil)
	resp, err := p.hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	out := make(map[string]float64, len(names))
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			continue
		}
		for _, n := range names {
			if name == n {
				v, err := strconv.ParseFloat(value, 64)
				if err != nil {
					return nil, fmt.Errorf("/metrics: %s: %w", n, err)
				}
				out[n] = v
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	for _, n := range names {
		if _, ok := out[n]; !ok {
			return nil, fmt.Errorf("/metrics has no %s", n)
		}
	}
	return out, nil
}
