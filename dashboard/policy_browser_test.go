package dashboard_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/api"
)

// TestDashboardPolicy checks what a queue's page shows of its policy and
// pause, and of its tasks' leases and last errors: the policy's fields,
// the pause and resume buttons changing what the API says, a paused
// queue's tag on the overview, a reserved
// task's lease end and a buried task's error, in the list and in the
// task's dialog. No page may report an error.
func TestDashboardPolicy(t *testing.T) { onBothEngines(t, testDashboardPolicy) }

func testDashboardPolicy(t *testing.T) {
	s := newSite(t, "")
	ctx := context.Background()
	if _, err := s.c.SetPolicy(ctx, "jobs", api.Policy{
		Retry:       &api.Retry{Initial: api.Duration(time.Second), Max: api.Duration(time.Minute), Multiplier: 2, Jitter: 0.1},
		Concurrency: 5,
		DeadLetter:  "jobs-dead",
	}); err != nil {
		t.Fatal(err)
	}
	s.put("plain", api.PutRequest{ID: "p"})
	s.put("plain", api.PutRequest{ID: "bad", Priority: new(uint32(0)), Key: "tenant-42"})
	tasks, err := s.c.Reserve(ctx, "plain", 1, 0)
	if err != nil || len(tasks) != 1 {
		t.Fatalf("reserve: %+v %v", tasks, err)
	}
	const why = `parse error: "<b>x</b>" at line 3`
	if _, err := s.c.Bury(ctx, "plain", "bad", tasks[0].Lease, why); err != nil {
		t.Fatal(err)
	}
	s.put("jobs", api.PutRequest{ID: "busy"})
	if tasks, err := s.c.Reserve(ctx, "jobs", 1, 0); err != nil || len(tasks) != 1 {
		t.Fatalf("reserve: %+v %v", tasks, err)
	}

	b := newBrowser(t, s.srv.URL)
	b.open("#/queues/jobs/all")
	b.wait("the policy", `document.querySelector('#policy dl[data-policy] [data-field=Concurrency]')`)
	policy := eval[string](b, `document.getElementById('policy').innerText`)
	for _, want := range []string{"after 1 s, × 2 each attempt, up to 1 min, ± 10%", "25 (the default)", "at most 5 tasks reserved at once", "jobs-dead"} {
		if !strings.Contains(policy, want) {
			t.Errorf("policy shown as %q, want %q in it", policy, want)
		}
	}
	b.wait("the lease's end", `document.querySelector('#tasks tbody tr[data-id=busy] td.note .lease time')`)

	// Pause, then resume, by the buttons.
	b.wait("not paused", `document.getElementById('pause-state').dataset.paused === 'false'`)
	b.click(`button[data-key=pause]`)
	b.wait("paused", `document.getElementById('pause-state').dataset.paused === 'true' && document.querySelector('button[data-key=resume]')`)
	if q := s.queue("jobs"); !q.Paused || q.PausedUntil != nil {
		t.Errorf("after Pause, the API says %+v; want paused until resumed", q)
	}
	if text := eval[string](b, `document.getElementById('pause-state').textContent`); !strings.Contains(text, "until resumed") {
		t.Errorf("pause shown as %q", text)
	}
	b.open("#/")
	b.wait("the overview's paused tag", `document.querySelector('tr[data-queue=jobs] th .tag.paused') && !document.querySelector('tr[data-queue=plain] th .tag')`)
	b.open("#/queues/jobs/all")
	b.wait("paused", `document.querySelector('button[data-key=resume]')`)
	b.click(`button[data-key=resume]`)
	b.wait("resumed", `document.getElementById('pause-state').dataset.paused === 'false' && document.querySelector('button[data-key=pause]')`)
	if q := s.queue("jobs"); q.Paused {
		t.Errorf("after Resume, the API says %+v", q)
	}
	b.checkClean("queue jobs")

	// A queue without a policy says so; a buried task shows its error.
	b.open("#/queues/plain/dead")
	b.wait("the default policy", `document.querySelector('#policy p.hint')`)
	b.wait("the buried task", `document.querySelector('#tasks tbody tr[data-id=bad][data-state=dead] td.note .last-error')`)
	if got := eval[string](b, `document.querySelector('#tasks tbody tr[data-id=bad] .last-error').textContent`); got != why {
		t.Errorf("last error shown as %q, want %q", got, why)
	}
	b.click(`button[data-key="show:bad"]`)
	b.wait("the task dialog", `document.getElementById('task').open && document.querySelector('#task [data-field=last_error]')`)
	if got := eval[string](b, `document.querySelector('#task [data-field=last_error]').textContent`); got != why {
		t.Errorf("last error in the dialog %q, want %q", got, why)
	}
	if got := eval[string](b, `document.querySelector('#task [data-field=key]')?.textContent ?? 'none'`); got != "tenant-42" {
		t.Errorf("key in the dialog %q, want tenant-42", got)
	}
	b.checkClean("queue plain")

	// A queue page lists the queue's keys, busiest first; one without
	// keys says so.
	s.put("keyed", api.PutRequest{ID: "k1", Key: "tenant-42"})
	s.put("keyed", api.PutRequest{ID: "k2", Key: "tenant-42", Delay: new(api.Duration(time.Hour))})
	s.put("keyed", api.PutRequest{ID: "k3"})
	b.open("#/queues/keyed/all")
	b.wait("the keys table", `document.querySelector('#keys-table tr[data-task-key="tenant-42"]')`)
	if got := eval[string](b, `[...document.querySelectorAll('#keys-table tbody tr')].map((r) => r.dataset.taskKey + ':' + [...r.querySelectorAll('td')].map((d) => d.textContent).join('/')).join(' ')`); got != "tenant-42:1/0/1 :1/0/0" {
		t.Errorf("keys table %q, want tenant-42:1/0/1 :1/0/0", got)
	}
	b.checkClean("queue keyed")
	b.open("#/queues/jobs/all")
	b.wait("no keys", `document.querySelector('#keys p.hint')`)
	b.checkClean("queue jobs, keys")
}

// queue returns what GET /v1/queues says of a queue.
func (s *site) queue(name string) api.Queue {
	s.t.Helper()
	qs, err := s.c.Queues(context.Background())
	if err != nil {
		s.t.Fatal(err)
	}
	for _, q := range qs {
		if q.Name == name {
			return q
		}
	}
	s.t.Fatalf("no queue %s in %+v", name, qs)
	return api.Queue{}
}
