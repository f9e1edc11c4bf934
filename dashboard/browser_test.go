package dashboard_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/hourglass-go/hourglass/api"
	"github.com/hourglass-go/hourglass/broker"
	"github.com/hourglass-go/hourglass/client"
	"github.com/hourglass-go/hourglass/cluster"
	"github.com/hourglass-go/hourglass/dashboard"
	"github.com/hourglass-go/hourglass/httpapi"
	"github.com/hourglass-go/hourglass/internal/pgtest"
	"github.com/hourglass-go/hourglass/service"
	"github.com/hourglass-go/hourglass/store/memstore"
	"github.com/prometheus/client_golang/prometheus"
)

// The tests in this file drive the dashboard in a real headless Chromium
// over the real API on both engines (a memstore broker and a cluster
// node on PostgreSQL), and skip where no Chromium is
// installed (Debian: apt-get install chromium). HOURGLASS_CHROMIUM names
// the binary to use; HOURGLASS_SCREENSHOTS=1 makes TestDashboard write
// docs/dashboard-desktop.png and docs/dashboard-phone.png.

// chromium returns the path of a Chromium or Chrome binary, or skips.
func chromium(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("HOURGLASS_CHROMIUM"); p != "" {
		return p
	}
	names := []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "headless-shell", "chrome"}
	for _, name := range names {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skipf("no Chromium found (looked for %s on PATH, and HOURGLASS_CHROMIUM): install one (Debian: apt-get install chromium) to run the browser tests", strings.Join(names, ", "))
	return ""
}

// site is the API over a real service (a broker on a memstore, or a
// node of a cluster on a PostgreSQL database of its own), with the
// dashboard at "/", served on a loopback port.
type site struct {
	t   *testing.T
	srv *httptest.Server
	c   *client.Client
	svc service.Service // the service the API serves
	// dues counts the calls of GET /v1/stats/due.
	dues atomic.Int32
}

// onBothEngines runs body as the subtests "embedded" and "cluster"; the
// site body makes is of that engine.
func onBothEngines(t *testing.T, body func(t *testing.T)) {
	t.Run("embedded", body)
	t.Run("cluster", body)
}

// newService opens the service of t's engine: a node of a new cluster in
// a subtest "cluster", else a broker on a memstore.
func newService(t *testing.T, log *slog.Logger) service.Service {
	t.Helper()
	if parts := strings.Split(t.Name(), "/"); len(parts) > 1 && parts[1] == "cluster" {
		url := pgtest.Start(t).CreateDatabase(t)
		pool := pgtest.Pool(t, url, 8, cluster.ConfigurePool)
		n, err := cluster.Open(context.Background(), pool, cluster.Options{Node: "n1", Lease: time.Second, Logger: log, Registerer: prometheus.NewRegistry()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { n.Close() })
		return service.New(n)
	}
	st := memstore.New()
	b, err := broker.Open(st, broker.Config{Logger: log, Registerer: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		b.Close()
		st.Close()
	})
	return service.New(b)
}

func newSite(t *testing.T, token string) *site {
	t.Helper()
	log := slog.New(slog.DiscardHandler)
	b := newService(t, log)
	s := httpapi.New(httpapi.Options{Token: token, Gatherer: prometheus.NewRegistry(), Logger: log})
	s.SetService(b)
	out := &site{t: t}
	h := dashboard.With(s)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/stats/due" {
			out.dues.Add(1)
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	c, err := client.New(srv.URL, client.Options{Token: token})
	if err != nil {
		t.Fatal(err)
	}
	out.srv, out.c, out.svc = srv, c, b
	return out
}

// put puts a task, failing the test on an error.
func (s *site) put(queue string, r api.PutRequest) api.Task {
	s.t.Helper()
	task, _, err := s.c.Put(context.Background(), queue, r)
	if err != nil {
		s.t.Fatalf("put %s %+v: %v", queue, r, err)
	}
	return task
}

// dead puts a task with one attempt, reserves and nacks it: it is dead.
func (s *site) dead(queue, id string) {
	s.t.Helper()
	ctx := context.Background()
	s.put(queue, api.PutRequest{ID: id, Priority: new(uint32(0)), MaxAttempts: 1})
	tasks, err := s.c.Reserve(ctx, queue, 1, 0)
	if err != nil || len(tasks) != 1 || tasks[0].ID != id {
		s.t.Fatalf("reserve %s: %v %+v", queue, err, tasks)
	}
	if _, err := s.c.Nack(ctx, queue, id, tasks[0].Lease, 0, ""); err != nil {
		s.t.Fatal(err)
	}
}

// state returns a task's state ("finished" for one the history keeps), or
// "gone".
func (s *site) state(queue, id string) string {
	s.t.Helper()
	task, err := s.c.Get(context.Background(), queue, id)
	if errors.Is(err, client.ErrNotFound) {
		return "gone"
	}
	if err != nil {
		s.t.Fatal(err)
	}
	return task.State
}

// browser is one tab of a headless Chromium, with what the page reported
// as errors: uncaught exceptions, console errors and warnings, and
// browser log entries (a refused policy, a file not found). The API's own
// error answers (400, 401, 404 of the calls the page makes) are the
// page's business and not counted.
type browser struct {
	t    *testing.T
	ctx  context.Context
	base string

	// mu guards problems, appended by the event listener.
	mu       sync.Mutex
	problems []string
}

func newBrowser(t *testing.T, base string) *browser {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium(t)),
		chromedp.NoSandbox, // as root, Chromium needs it
		chromedp.WindowSize(1280, 800),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("lang", "en-US"),
	)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // a bound, not the expected time (about 10 s)
	t.Cleanup(cancel)
	actx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	t.Cleanup(cancelAlloc)
	bctx, cancelTab := chromedp.NewContext(actx)
	t.Cleanup(cancelTab)
	b := &browser{t: t, ctx: bctx, base: base}
	if err := chromedp.Listen(bctx, b.event); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Call(bctx, cdplog.Enable, cdp.Empty{}); err != nil {
		t.Fatalf("starting the browser: %v", err)
	}
	if _, err := chromedp.Call(bctx, runtime.Enable, cdp.Empty{}); err != nil {
		t.Fatal(err)
	}
	return b
}

// event records the page's errors. It runs on chromedp's goroutine.
func (b *browser) event(ev any) {
	var p string
	switch ev := ev.(type) {
	case *runtime.EventExceptionThrown:
		d := ev.ExceptionDetails
		p = "uncaught: " + d.Text
		if d.Exception != nil {
			p += " " + d.Exception.Description
		}
	case *runtime.EventConsoleAPICalled:
		if ev.Type != runtime.ConsoleAPICalledTypeError && ev.Type != runtime.ConsoleAPICalledTypeWarning && ev.Type != runtime.ConsoleAPICalledTypeAssert {
			return
		}
		var args []string
		for _, a := range ev.Args {
			args = append(args, string(a.Value)+a.Description)
		}
		p = fmt.Sprintf("console.%s: %s", ev.Type, strings.Join(args, " "))
	case *cdplog.EventEntryAdded:
		e := ev.Entry
		if e.Level != cdplog.EntryLevelError && e.Level != cdplog.EntryLevelWarning {
			return
		}
		// The answers of API calls with an error status are part of
		// what the page shows; a page file not found is not.
		if e.Source == cdplog.EntrySourceNetwork && strings.Contains(e.URL, "/v1/") && !strings.Contains(e.Text, "status of 5") {
			return
		}
		p = fmt.Sprintf("log %s %s: %s %s", e.Source, e.Level, e.Text, e.URL)
	default:
		return
	}
	b.mu.Lock()
	b.problems = append(b.problems, p)
	b.mu.Unlock()
}

// checkClean fails the test if the page reported errors since the last
// check.
func (b *browser) checkClean(where string) {
	b.t.Helper()
	b.mu.Lock()
	ps := b.problems
	b.problems = nil
	b.mu.Unlock()
	for _, p := range ps {
		b.t.Errorf("%s: the page reported %s", where, p)
	}
}

// do runs actions, failing the test on an error.
func (b *browser) do(what string, actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	if err := chromedp.Do(b.ctx, actions...); err != nil {
		b.t.Fatalf("%s: %v", what, err)
	}
}

// open loads the page at a hash route.
func (b *browser) open(hash string) {
	b.t.Helper()
	b.do("open "+hash, chromedp.Navigate(b.base+"/"+hash))
}

// fresh loads the page anew at a hash route, from a blank page, so that
// nothing of the page before stays.
func (b *browser) fresh(hash string) {
	b.t.Helper()
	b.do("open "+hash, chromedp.Navigate("about:blank"), chromedp.Navigate(b.base+"/"+hash))
}

// wait polls a JavaScript expression until it is truthy. A poll begun in
// the page a navigation was leaving fails with "Cannot find context with
// specified id" (seen once in a few dozen runs after fresh): it is begun
// again, once, in the new page.
func (b *browser) wait(what, expr string) {
	b.t.Helper()
	poll := func() error {
		_, err := chromedp.Run(b.ctx, chromedp.Poll[any](expr, chromedp.WithPollingTimeout(10*time.Second), chromedp.WithPollingInterval(50*time.Millisecond)))
		return err
	}
	err := poll()
	if err != nil && strings.Contains(err.Error(), "Cannot find context with specified id") {
		err = poll()
	}
	if err != nil {
		b.t.Fatalf("waiting for %s (%s): %v\npage: %s", what, expr, err, eval[string](b, `document.querySelector('main').innerText.slice(0, 2000)`))
	}
}

// click clicks the element a CSS selector finds.
func (b *browser) click(sel string) {
	b.t.Helper()
	b.do("click "+sel, chromedp.Click(chromedp.CSS(sel)))
}

// fill sets an input's value as pasting it would, with one input event.
func (b *browser) fill(sel, v string) {
	b.t.Helper()
	q, _ := json.Marshal(sel)
	val, _ := json.Marshal(v)
	if !eval[bool](b, `(() => { const el = document.querySelector(`+string(q)+`); if (!el) return false; el.focus();
		el.value = `+string(val)+`; el.dispatchEvent(new Event('input', {bubbles: true})); return true; })()`) {
		b.t.Fatalf("no input %s to fill", sel)
	}
}

// typeInto empties an input and types v into it key by key, so that the
// page sees each key. It finds the input in the page's script rather than
// by a node query, which may hold a node of a page left.
func (b *browser) typeInto(sel, v string) {
	b.t.Helper()
	q, _ := json.Marshal(sel)
	if !eval[bool](b, `(() => { const el = document.querySelector(`+string(q)+`); if (!el) return false; el.value = ''; el.focus(); return document.activeElement === el; })()`) {
		b.t.Fatalf("no input %s to type into", sel)
	}
	b.do("type into "+sel, chromedp.KeyEvent(v))
}

// eval evaluates a JavaScript expression in the page.
func eval[T any](b *browser, expr string) T {
	b.t.Helper()
	v, err := chromedp.Run(b.ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		b.t.Fatalf("evaluating %s: %v", expr, err)
	}
	return v
}

// shownCounts reads the overview's table: queue → [delayed, ready,
// reserved, dead].
const shownCounts = `Object.fromEntries([...document.querySelectorAll('#queues tbody tr')].map((r) => [r.dataset.queue,
  ['delayed', 'ready', 'reserved', 'dead'].map((k) => Number(r.querySelector('[data-col=' + k + ']').textContent.replace(/\D/g, '')))]))`

// apiCounts is the same from GET /v1/queues.
func (s *site) apiCounts() map[string][]int {
	s.t.Helper()
	qs, err := s.c.Queues(context.Background())
	if err != nil {
		s.t.Fatal(err)
	}
	out := map[string][]int{}
	for _, q := range qs {
		out[q.Name] = []int{q.Delayed, q.Ready, q.Reserved, q.Dead}
	}
	return out
}

// TestDashboard seeds two queues, then uses every page as a person
// would: the overview's counts match the API; on a queue's page a dead
// task is kicked and becomes ready, a task is deleted, a task found by id
// shows its payload, every dead task is deleted at once; on the schedules
// page a bad cron line shows the parser's error and a good one is added
// with its next five times. No page may report an error.
func TestDashboard(t *testing.T) { onBothEngines(t, testDashboard) }

func testDashboard(t *testing.T) {
	s := newSite(t, "")
	big := json.RawMessage(`{"order":12345678901234567890,"price":1.10,"note":"<b>not bold</b>"}`)
	for i, d := range []time.Duration{5 * time.Minute, 12 * time.Minute, 40 * time.Minute} {
		s.put("mail", api.PutRequest{ID: fmt.Sprintf("later-%d", i), Delay: new(api.Duration(d))})
	}
	s.put("mail", api.PutRequest{ID: "r1", Payload: json.RawMessage(`"hello"`)})
	s.put("mail", api.PutRequest{ID: "r2"})
	s.dead("mail", "x1")
	s.dead("mail", "x2")
	s.dead("mail", "x3")
	s.put("mail", api.PutRequest{ID: "busy", Priority: new(uint32(0))})
	if _, err := s.c.Reserve(context.Background(), "mail", 1, 0); err != nil {
		t.Fatal(err)
	}
	s.put("reports", api.PutRequest{ID: "rep1", Payload: big})

	b := newBrowser(t, s.srv.URL)

	// Overview: the counts are the API's.
	b.open("#/")
	b.wait("the queues", `document.querySelectorAll('#queues tbody tr').length === 2`)
	want := s.apiCounts()
	got := eval[map[string][]int](b, shownCounts)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("overview shows %v, the API says %v", got, want)
	}
	if w := (map[string][]int{"mail": {3, 2, 1, 3}, "reports": {0, 1, 0, 0}}); fmt.Sprint(want) != fmt.Sprint(w) {
		t.Errorf("the API says %v, want %v", want, w)
	}
	b.wait("the charts", `document.querySelector('#due svg') && document.querySelector('#lateness svg')`)
	if sum := eval[string](b, `document.querySelector('[data-summary=due]').textContent`); !strings.HasPrefix(sum, "3 tasks fall due in the next hour") {
		t.Errorf("due chart summary %q", sum)
	}
	if sum := eval[string](b, `document.querySelector('[data-summary=lateness]').textContent`); !strings.HasPrefix(sum, "4 deliveries in the last 15 minutes") {
		t.Errorf("lateness chart summary %q", sum)
	}
	if n := eval[int](b, `document.querySelectorAll('#due svg rect.bar').length`); n != 3 {
		t.Errorf("%d bars in the due chart, want 3", n)
	}
	// The counts follow the API as it changes, and rates appear.
	s.put("mail", api.PutRequest{ID: "r3"})
	b.wait("the new task counted", `document.querySelector('tr[data-queue=mail] [data-col=ready]').textContent === '3'`)
	b.wait("a put rate", `/^[0-9.]+\/s$/.test(document.querySelector('tr[data-queue=mail] [data-col=putRate]').textContent)`)
	// The due-time histogram, costly on the server, is not read at every
	// refresh.
	if n := s.dues.Load(); n != 1 {
		t.Errorf("the overview read the due-time histogram %d times in its first refreshes, want once", n)
	}
	b.checkClean("overview")

	// The dead link leads to the queue's dead tasks; kick one.
	b.click(`tr[data-queue=mail] a.dead-link`)
	b.wait("the dead tasks", `location.hash === '#/queues/mail/dead' && document.querySelectorAll('#tasks tbody tr[data-state=dead]').length === 3`)
	b.click(`button[data-key="kick:x1"]`)
	b.wait("x1 gone from the dead", `!document.querySelector('#tasks tbody tr[data-id=x1]') && document.querySelectorAll('#tasks tbody tr[data-state=dead]').length === 2`)
	if st := s.state("mail", "x1"); st != "ready" {
		t.Errorf("x1 after its kick: %s, want ready", st)
	}
	if msg := eval[string](b, `document.getElementById('notice').textContent`); !strings.Contains(msg, "Kicked task x1") {
		t.Errorf("notice %q", msg)
	}
	b.click(`button[data-key="tab:ready"]`)
	b.wait("x1 among the ready", `location.hash === '#/queues/mail/ready' && document.querySelector('#tasks tbody tr[data-id=x1][data-state=ready]')`)

	// Delete a task, confirming.
	b.click(`button[data-key="del:r1"]`)
	b.wait("the confirmation", `document.getElementById('confirm').open`)
	b.click(`#confirm-ok`)
	b.wait("r1 gone", `!document.querySelector('#tasks tbody tr[data-id=r1]')`)
	if st := s.state("mail", "r1"); st != "finished" {
		t.Errorf("r1 after delete: %s", st)
	}
	// By keyboard: Enter on a row's Delete asks, with Cancel focused;
	// Escape cancels, leaves the task be and gives the focus back.
	b.do("focus del:r2", chromedp.Evaluate[chromedp.Void](`document.querySelector('button[data-key="del:r2"]').focus()`))
	b.do("Enter", chromedp.KeyEvent("\r"))
	b.wait("the confirmation", `document.getElementById('confirm').open && document.activeElement.id === 'confirm-cancel'`)
	b.do("Escape", chromedp.KeyEvent("\x1b"))
	b.wait("the focus back on Delete", `!document.getElementById('confirm').open && document.activeElement.dataset.key === 'del:r2'`)
	if st := s.state("mail", "r2"); st != "ready" {
		t.Errorf("r2 after a cancelled delete: %s", st)
	}

	// Every dead task at once.
	b.click(`button[data-key="tab:dead"]`)
	b.wait("two dead", `document.querySelectorAll('#tasks tbody tr[data-state=dead]').length === 2`)
	b.click(`button[data-key="delete-all"]`)
	b.wait("the confirmation", `document.getElementById('confirm').open`)
	b.click(`#confirm-ok`)
	b.wait("no dead left", `document.querySelectorAll('#tasks tbody tr[data-state=dead]').length === 0 && document.querySelector('[data-count=dead] dd').textContent === '0'`)
	if st := s.state("mail", "x2") + s.state("mail", "x3"); st != "finishedfinished" {
		t.Errorf("x2 and x3 after delete all: %s", st)
	}
	b.checkClean("queue mail")

	// Find a task by id and see its payload as it was put.
	b.open("#/queues/reports")
	b.wait("the reports page", `document.querySelector('#tasks tbody tr[data-id=rep1]')`)
	b.fill("#find-id", "nope")
	b.click(`form.inline button[type=submit]`)
	b.wait("not found", `document.getElementById('find-result').textContent.includes('No task “nope”')`)
	b.fill("#find-id", "rep1")
	b.click(`form.inline button[type=submit]`)
	b.wait("the task dialog", `document.getElementById('task').open && document.querySelector('#task pre.payload')`)
	payload := eval[string](b, `document.querySelector('#task pre.payload').textContent`)
	if !strings.Contains(payload, "12345678901234567890") || !strings.Contains(payload, "1.10") || !strings.Contains(payload, "<b>not bold</b>") {
		t.Errorf("payload shown as %q", payload)
	}
	if focused := eval[string](b, `document.activeElement.id`); focused != "task-close" {
		t.Errorf("focus in the task dialog on %q, want task-close", focused)
	}
	b.do("Escape closes the dialog", chromedp.KeyEvent("\x1b"))
	b.wait("the dialog closed", `!document.getElementById('task').open`)
	b.checkClean("queue reports")

	// Schedules: a bad line shows the parser's error as typed and on save,
	// and nothing is saved; a good one is saved with its next five times.
	b.open("#/schedules")
	b.wait("the schedule form", `document.getElementById('s-cron')`)
	b.fill("#s-name", "nightly")
	b.fill("#s-queue", "reports")
	b.typeInto("#s-cron", "61 * * * *")
	b.wait("the live check's error", `document.getElementById('s-cron-check').textContent.includes('Not valid: hourglass:')`)
	if inv := eval[string](b, `document.getElementById('s-cron').getAttribute('aria-invalid')`); inv != "true" {
		t.Errorf("bad cron line: aria-invalid %q", inv)
	}
	b.click("#s-submit")
	b.wait("the save's error", `document.getElementById('s-error').textContent.includes('The server refused the schedule: hourglass:')`)
	if scheds, err := s.c.Schedules(context.Background()); err != nil || len(scheds) != 0 {
		t.Errorf("schedules after a bad line: %v %v", scheds, err)
	}
	b.fill("#s-cron", "*/5 * * * *")
	b.wait("the live check's times", `document.querySelectorAll('#s-cron-check li').length === 5`)
	b.fill("#s-payload", `{"report": "daily"}`)
	b.click("#s-submit")
	b.wait("the new schedule", `document.querySelectorAll('#schedules tbody tr[data-name=nightly] ol.times li').length === 5`)
	scheds, err := s.c.Schedules(context.Background())
	if err != nil || len(scheds) != 1 || scheds[0].Cron != "*/5 * * * *" || scheds[0].Queue != "reports" || string(scheds[0].Payload) != `{"report":"daily"}` {
		t.Errorf("schedules after adding one: %+v %v", scheds, err)
	}
	// Edit it, then delete it.
	b.click(`button[data-key="edit:nightly"]`)
	b.wait("the form in edit mode", `document.getElementById('s-name').readOnly && document.getElementById('s-cron').value === '*/5 * * * *'`)
	b.fill("#s-cron", "@hourly")
	b.wait("the live check's times", `document.querySelectorAll('#s-cron-check li').length === 5`)
	b.click("#s-submit")
	b.wait("the edited schedule", `document.querySelector('#schedules tbody tr[data-name=nightly] td.mono').textContent === '@hourly'`)

	// Its rules: a catch-up window out of range is refused, naming the
	// field, and changes nothing; then every missed occurrence within 6h,
	// overlap skip and its tasks' lease and attempts are saved and shown.
	b.click(`button[data-key="edit:nightly"]`)
	b.wait("the form in edit mode", `document.getElementById('s-name').readOnly && document.getElementById('s-cron').value === '@hourly'`)
	b.click("#s-more summary")
	b.wait("the options", `document.getElementById('s-more').open`)
	b.fill("#s-misfire", "all")
	b.fill("#s-catchup", "100ms")
	b.fill("#s-overlap", "skip")
	b.fill("#s-ttr", "45s")
	b.fill("#s-max-attempts", "3")
	b.click("#s-submit")
	b.wait("the catch-up's error", `document.getElementById('s-catchup').getAttribute('aria-invalid') === 'true' && document.getElementById('s-error').textContent.includes('catch_up')`)
	if sch, err := s.c.Schedule(context.Background(), "nightly"); err != nil || sch.Misfire != "one" || sch.Overlap != "allow" || sch.TTR != 0 {
		t.Errorf("schedule after a bad catch-up: %+v %v", sch, err)
	}
	b.fill("#s-catchup", "6h")
	b.click("#s-submit")
	b.wait("the schedule's rules", `document.querySelector('#schedules tbody tr[data-name=nightly] td.rules').textContent.includes('all within 6h')`)
	sch, err := s.c.Schedule(context.Background(), "nightly")
	if err != nil || sch.Misfire != "all" || time.Duration(sch.CatchUp) != 6*time.Hour || sch.Overlap != "skip" ||
		time.Duration(sch.TTR) != 45*time.Second || sch.MaxAttempts != 3 || string(sch.Payload) != `{"report":"daily"}` || sch.Paused {
		t.Errorf("schedule after its rules were saved: %+v %v", sch, err)
	}
	if rules := eval[string](b, `document.querySelector('#schedules tbody tr[data-name=nightly] td.rules').textContent`); !strings.Contains(rules, "skips while the last task runs") || !strings.Contains(rules, "ttr 45s") {
		t.Errorf("rules shown as %q", rules)
	}

	// Run now puts a task at once, shown as the last occurrence, pending;
	// pause and resume change what the API says.
	b.click(`button[data-key="run:nightly"]`)
	b.wait("the run's task", `document.querySelector('#schedules tbody tr[data-name=nightly] .last[data-outcome=pending] .task-id')`)
	tasks, _, err := s.c.ListTasks(context.Background(), "reports", "", "", 10)
	var run string
	for _, tk := range tasks {
		if strings.HasPrefix(tk.ID, "nightly@run-") {
			run = tk.ID
		}
	}
	if err != nil || run == "" {
		t.Errorf("tasks after Run now: %+v %v", tasks, err)
	} else if got := eval[string](b, `document.querySelector('#schedules tbody tr[data-name=nightly] .task-id').textContent.trim()`); got != run {
		t.Errorf("last task shown as %q, want %q", got, run)
	}
	b.click(`button[data-key="pause:nightly"]`)
	b.wait("paused", `document.querySelector('#schedules tbody tr[data-name=nightly][data-paused=true] button[data-key="resume:nightly"]')`)
	if sch, err := s.c.Schedule(context.Background(), "nightly"); err != nil || !sch.Paused {
		t.Errorf("schedule after Pause: %+v %v", sch, err)
	}
	b.click(`button[data-key="resume:nightly"]`)
	b.wait("resumed", `document.querySelector('#schedules tbody tr[data-name=nightly][data-paused=false] button[data-key="pause:nightly"]')`)
	if sch, err := s.c.Schedule(context.Background(), "nightly"); err != nil || sch.Paused || sch.Next.IsZero() {
		t.Errorf("schedule after Resume: %+v %v", sch, err)
	}
	b.click(`button[data-key="delete:nightly"]`)
	b.wait("the confirmation", `document.getElementById('confirm').open`)
	b.click(`#confirm-ok`)
	b.wait("no schedule", `!document.querySelector('#schedules tbody tr')`)
	if scheds, err := s.c.Schedules(context.Background()); err != nil || len(scheds) != 0 {
		t.Errorf("schedules after delete: %v %v", scheds, err)
	}
	b.checkClean("schedules")

	// At a phone's width no page is wider than the screen: tables turn
	// into cards rather than scroll.
	b.do("phone viewport", chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2), chromedp.EmulateMobile))
	for _, page := range []struct{ hash, ready string }{
		{"#/", `document.querySelector('#queues tbody tr') && document.querySelector('#due svg')`},
		{"#/queues/mail/all", `document.querySelector('#tasks tbody tr[data-id]')`},
		{"#/schedules", `document.getElementById('s-cron')`},
	} {
		b.fresh(page.hash)
		b.wait("the page "+page.hash, page.ready)
		if w := eval[[]int](b, `[document.documentElement.scrollWidth, window.innerWidth]`); w[0] > w[1] {
			t.Errorf("%s at 390 px: the page is %d px wide", page.hash, w[0])
		}
	}
	b.checkClean("phone")

	if os.Getenv("HOURGLASS_SCREENSHOTS") == "1" {
		screenshots(t, s, b)
	}
}

// TestDashboardToken checks the page with --token: it asks for the
// token, refuses a wrong one with the server's message, and once given
// the right one shows the queues and keeps the token for the tab.
func TestDashboardToken(t *testing.T) { onBothEngines(t, testDashboardToken) }

func testDashboardToken(t *testing.T) {
	s := newSite(t, "s3cret")
	s.put("jobs", api.PutRequest{ID: "a"})
	b := newBrowser(t, s.srv.URL)
	b.open("#/")
	b.wait("the token form", `document.getElementById('token') && document.activeElement.id === 'token'`)
	b.fill("#token", "wrong")
	b.click(`form.login button[type=submit]`)
	b.wait("the refusal", `document.getElementById('token-error').textContent.includes('hourglass: wrong bearer token')`)
	b.typeInto("#token", "s3cret")
	b.click(`form.login button[type=submit]`)
	b.wait("the queues", `document.querySelector('tr[data-queue=jobs] [data-col=ready]')?.textContent === '1'`)
	if tok := eval[string](b, `sessionStorage.getItem('hourglass-token')`); tok != "s3cret" {
		t.Errorf("session storage holds %q", tok)
	}
	// A reload keeps the token; the other pages work with it.
	b.open("#/queues/jobs")
	b.wait("the queue's tasks", `document.querySelector('#tasks tbody tr[data-id=a]')`)
	b.open("#/schedules")
	b.wait("the schedules page", `document.getElementById('s-cron')`)
	b.fill("#s-cron", "@daily")
	b.wait("the live check's times", `document.querySelectorAll('#s-cron-check li').length === 5`)
	// Forgetting it asks again.
	b.click("#forget")
	b.wait("the token form", `document.getElementById('token')`)
	if tok := eval[string](b, `sessionStorage.getItem('hourglass-token') ?? ''`); tok != "" {
		t.Errorf("session storage holds %q after forget", tok)
	}
	b.checkClean("token")
}

// screenshots writes the overview at desktop and phone widths, and the
// queue page at phone width, into docs/, after seeding a busier queue.
func screenshots(t *testing.T, s *site, b *browser) {
	for i := range 240 {
		d := time.Duration(i*i%3541+30) * time.Second
		s.put("billing", api.PutRequest{ID: fmt.Sprintf("invoice-%d", i), Delay: new(api.Duration(d)), Payload: json.RawMessage(`{"invoice":1}`)})
	}
	for range 3 {
		tasks, err := s.c.Reserve(context.Background(), "mail", 1, 0)
		if err != nil || len(tasks) == 0 {
			break
		}
	}
	s.dead("billing", "invoice-failed")
	// A steady trickle of puts and deliveries, so that the rates show.
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			s.c.Put(ctx, "mail", api.PutRequest{ID: fmt.Sprintf("tick-%d", i)})
			if i%3 != 0 {
				if tasks, err := s.c.Reserve(ctx, "mail", 1, 0); err == nil && len(tasks) == 1 {
					s.c.Ack(ctx, "mail", tasks[0].ID, tasks[0].Lease)
				}
			}
		}
	})
	defer wg.Wait()
	defer stop()
	shots := []struct {
		file, hash   string
		w, h         int64
		mobile       bool
		waitFor      string
		scrollTarget string
	}{
		{"dashboard-desktop.png", "#/", 1280, 800, false, `document.querySelectorAll('#due rect.bar').length > 10`, ""},
		{"dashboard-phone.png", "#/", 390, 844, true, `document.querySelectorAll('#due rect.bar').length > 10`, ""},
	}
	for _, sh := range shots {
		opts := []chromedp.EmulateViewportOption{chromedp.EmulateScale(1)}
		if sh.mobile {
			opts = []chromedp.EmulateViewportOption{chromedp.EmulateScale(2), chromedp.EmulateMobile}
		}
		b.do("viewport", chromedp.EmulateViewport(sh.w, sh.h, opts...))
		b.fresh(sh.hash)
		b.wait("the page for "+sh.file, sh.waitFor)
		b.wait("rates", `document.querySelector('tr[data-queue=mail] [data-col=deliveryRate]').textContent.match(/^[1-9]/)`)
		b.do("scroll to the top", chromedp.Evaluate[chromedp.Void](`window.scrollTo(0, 0)`))
		png, err := chromedp.Run(b.ctx, chromedp.CaptureScreenshot())
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join("..", "docs", sh.file)
		if err := os.WriteFile(path, png, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s (%d bytes)", path, len(png))
	}
	b.checkClean("screenshots")
}
