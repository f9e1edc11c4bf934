package dashboard_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
	"github.com/hourglass-go/hourglass/api"
	"github.com/hourglass-go/hourglass/pusher"
)

// TestDashboardPushAndZones checks that the page tells the truth at a
// glance (issue 44): a push queue's page shows its endpoint, timeout,
// the names of its headers (never their values) and whether a secret is
// set, and counts its deliveries as pushes; every time shown names its
// zone, the browser's own (here America/New_York) or, for a schedule's
// times, the schedule's (Europe/Paris); the overview draws the server's
// lateness apart from the wait of ready tasks for a worker. No page may
// report an error. Finding a task that finished shows its record.
func TestDashboardPushAndZones(t *testing.T) { onBothEngines(t, testDashboardPushAndZones) }

func testDashboardPushAndZones(t *testing.T) {
	s := newSite(t, "")
	ctx := context.Background()
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	t.Cleanup(recv.Close)
	timeout := api.Duration(5 * time.Second)
	if _, err := s.c.SetPolicy(ctx, "hooks", api.Policy{Push: &api.Push{
		URL:     recv.URL + "/hook",
		Timeout: &timeout,
		Headers: map[string]string{"X-Team": "blue", "Authorization": "Bearer not-to-be-shown"},
		Secret:  "whsec_c2VjcmV0LXNlY3JldC1zZWNyZXQ=",
	}}); err != nil {
		t.Fatal(err)
	}
	p := pusher.New(s.svc, pusher.Options{Refresh: 50 * time.Millisecond})
	p.Start()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		p.Stop(ctx)
	})
	if _, err := s.c.SetSchedule(ctx, "paris", api.ScheduleRequest{Cron: "0 9 * * *", Timezone: "Europe/Paris", Queue: "reports"}); err != nil {
		t.Fatal(err)
	}
	s.put("later", api.PutRequest{ID: "t1", Delay: new(api.Duration(time.Hour))})
	s.put("later", api.PutRequest{ID: "fin"})
	if err := s.c.Delete(ctx, "later", "fin"); err != nil {
		t.Fatal(err)
	}

	b := newBrowser(t, s.srv.URL)
	if _, err := chromedp.Call(b.ctx, emulation.SetTimezoneOverride, emulation.SetTimezoneOverrideParams{TimezoneID: "America/New_York"}); err != nil {
		t.Fatalf("setting the browser's zone: %v", err)
	}

	// The push queue's page, opened before its pushes so that the rate
	// has a sample before them.
	s.put("hooks", api.PutRequest{ID: "first"})
	b.open("#/queues/hooks/all")
	b.wait("the push policy", `document.querySelector('#policy [data-field="Push endpoint"]')`)
	policy := eval[string](b, `document.getElementById('policy').innerText`)
	for _, want := range []string{recv.URL + "/hook", "5 s", "Authorization, X-Team", "set: pushes are signed"} {
		if !strings.Contains(policy, want) {
			t.Errorf("policy shown as %q, want %q in it", policy, want)
		}
	}
	if page := eval[string](b, `document.body.innerText`); strings.Contains(page, "not-to-be-shown") || strings.Contains(page, "blue") {
		t.Errorf("a header's value is shown: %q", page)
	}
	for i := range 20 {
		s.put("hooks", api.PutRequest{ID: "p" + string(rune('a'+i))})
	}
	b.wait("the pushes done", `document.querySelector('[data-count=ready] dd').textContent === '0' && document.querySelector('[data-count=reserved] dd').textContent === '0'`)
	b.wait("the pushes counted", `(() => { const el = document.querySelector('[data-count=deliveries]');
		return el && el.querySelector('dt').textContent === 'Pushes' && !['—', '0/s'].includes(el.querySelector('dd').textContent); })()`)
	b.checkClean("queue hooks")

	// The browser's zone names each time: a task's due time, the footer.
	b.open("#/queues/later/all")
	b.wait("the task", `document.querySelector('#tasks tbody tr[data-id=t1] time')`)
	due := eval[string](b, `document.querySelector('#tasks tbody tr[data-id=t1] time').firstChild.textContent`)
	if !regexp.MustCompile(`^(\d{4}-\d\d-\d\d )?\d\d:\d\d(:\d\d)? E[SD]T$`).MatchString(due) {
		t.Errorf("due time shown as %q, want it in New York's zone, labelled", due)
	}
	b.wait("the footer", `document.getElementById('updated').textContent.includes('America/New_York')`)

	// Finding a task that finished shows its finished record.
	b.fill("#find-id", "fin")
	b.click(`form.inline button[type=submit]`)
	b.wait("the finished task", `document.getElementById('task').open && document.querySelector('#task [data-field=outcome]')`)
	if got := eval[string](b, `document.querySelector('#task [data-field=outcome]').textContent + ' / ' + document.getElementById('find-result').textContent`); got != "deleted / Task fin finished: deleted." {
		t.Errorf("finding a deleted task shows %q", got)
	}
	b.click("#task-close")
	b.checkClean("queue later")

	// A schedule's times are in its own zone, labelled.
	b.open("#/schedules")
	b.wait("the next times", `document.querySelectorAll('#schedules tr[data-name=paris] ol.times time').length === 5`)
	times := eval[[]string](b, `[...document.querySelectorAll('#schedules tr[data-name=paris] ol.times time')].map((e) => e.textContent)`)
	for _, tm := range times {
		if !regexp.MustCompile(`^(\d{4}-\d\d-\d\d )?09:00(:00)? GMT\+[12]$`).MatchString(tm) {
			t.Errorf("a next time of a 9:00 Paris schedule shown as %q, want 09:00 in Paris's zone, labelled", tm)
		}
	}
	// A schedule's runs, in its zone (here UTC), with their outcomes.
	if _, err := s.c.SetSchedule(ctx, "ticks", api.ScheduleRequest{Cron: "@every 1s", Queue: "tq"}); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if runs, _, err := s.c.ScheduleRuns(ctx, "ticks", "", 5); err != nil || len(runs) > 0 {
			break
		} else if time.Now().After(deadline) {
			t.Fatal("no run of an every-second schedule in 30 s")
		}
	}
	b.wait("the runs button", `document.querySelector('button[data-key="runs:ticks"]')`)
	b.click(`button[data-key="runs:ticks"]`)
	b.wait("the runs", `document.getElementById('task').open && document.querySelector('#runs tbody tr[data-outcome=pending]')`)
	if got := eval[string](b, `document.querySelector('#runs tbody tr[data-outcome=pending] td time').textContent`); !strings.HasSuffix(got, " UTC") {
		t.Errorf("a run's time shown as %q, want it in the schedule's zone, UTC", got)
	}
	b.click("#task-close")

	// The form's check shows the times in the zone typed.
	b.fill("#s-cron", "30 8 * * *")
	b.fill("#s-zone", "Asia/Tokyo")
	b.wait("the check", `document.querySelectorAll('#s-cron-check.ok ol.times time').length === 5`)
	check := eval[[]string](b, `[...document.querySelectorAll('#s-cron-check.ok ol.times time')].map((e) => e.textContent)`)
	for _, tm := range check {
		if !regexp.MustCompile(`^(\d{4}-\d\d-\d\d )?08:30(:00)? GMT\+9$`).MatchString(tm) {
			t.Errorf("a checked time of 8:30 Tokyo shown as %q", tm)
		}
	}
	b.checkClean("schedules")

	// The overview shows lateness in its two parts, each labelled: the
	// pushes were handed out as soon as they were ready.
	b.open("#/")
	b.wait("the lateness charts", `document.querySelector('#lateness svg') && document.querySelector('#waiting svg')`)
	server := eval[string](b, `document.querySelector('[data-summary=lateness]').textContent`)
	wait := eval[string](b, `document.querySelector('[data-summary=waiting]').textContent`)
	if !strings.Contains(server, "server lateness (due → ready): worst p99") || !strings.Contains(wait, "wait for a worker (ready → hand-over): worst p99") {
		t.Errorf("lateness summaries %q and %q, want the server's lateness and the wait told apart", server, wait)
	}
	if h := eval[string](b, `document.getElementById('late-h').textContent + ' / ' + document.getElementById('wait-h').textContent`); !strings.Contains(h, "Server lateness") || !strings.Contains(h, "waiting for a worker") {
		t.Errorf("lateness headings %q", h)
	}
	b.checkClean("overview")
}
