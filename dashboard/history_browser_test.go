package dashboard_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/hourglass-go/hourglass/api"
)

// TestDashboardHistory checks what the dashboard shows of the history: a
// task's attempts in its dialog (a nacked one with its error, the running
// one), and a queue's history on its page, newest first, filtered by
// outcome, each finished task opening a dialog with its outcome and
// attempts. No page may report an error.
func TestDashboardHistory(t *testing.T) { onBothEngines(t, testDashboardHistory) }

func testDashboardHistory(t *testing.T) {
	s := newSite(t, "")
	ctx := context.Background()
	reserve := func(id string) api.Task {
		t.Helper()
		tasks, err := s.c.Reserve(ctx, "jobs", 1, 0)
		if err != nil || len(tasks) != 1 || tasks[0].ID != id {
			t.Fatalf("reserve %s: %+v %v", id, tasks, err)
		}
		return tasks[0]
	}
	const why = `smtp: 451 "<i>later</i>"`
	s.put("jobs", api.PutRequest{ID: "h1"})
	tk := reserve("h1")
	if _, err := s.c.Nack(ctx, "jobs", "h1", tk.Lease, 0, why); err != nil {
		t.Fatal(err)
	}
	reserve("h1") // attempt 2 runs
	s.put("jobs", api.PutRequest{ID: "done"})
	tk = reserve("done")
	if err := s.c.Ack(ctx, "jobs", "done", tk.Lease); err != nil {
		t.Fatal(err)
	}
	s.put("jobs", api.PutRequest{ID: "gone"})
	if err := s.c.Delete(ctx, "jobs", "gone"); err != nil {
		t.Fatal(err)
	}
	s.dead("jobs", "bad")

	b := newBrowser(t, s.srv.URL)
	b.open("#/queues/jobs/all")
	rows := `[...document.querySelectorAll('#history tbody tr[data-id]')].map((r) => r.dataset.id + ':' + r.dataset.outcome).join(' ')`
	b.wait("the history", rows+` === 'bad:dead gone:deleted done:acked'`)

	// The filter by outcome, and back.
	b.click(`button[data-key="htab:dead"]`)
	b.wait("the dead tasks", rows+` === 'bad:dead' && document.querySelector('button[data-key="htab:dead"]').getAttribute('aria-pressed') === 'true'`)
	b.click(`button[data-key="htab:deleted"]`)
	b.wait("the deleted tasks", rows+` === 'gone:deleted'`)
	b.click(`button[data-key="htab:all"]`)
	b.wait("every finished task", rows+` === 'bad:dead gone:deleted done:acked'`)
	b.checkClean("queue jobs's history")

	// A live task's attempts: the running one first, then the nacked one
	// with its error, shown as text.
	attempts := `[...document.querySelectorAll('#task #attempts tbody tr')].map((r) => r.dataset.attempt + ':' + r.dataset.outcome).join(' ')`
	b.click(`button[data-key="show:h1"]`)
	b.wait("h1's attempts", `document.getElementById('task').open && `+attempts+` === '2:running 1:nacked'`)
	if got := eval[string](b, `document.querySelector('#task #attempts tr[data-attempt="1"] [data-field=error]').textContent`); got != why {
		t.Errorf("the nacked attempt's error shown as %q, want %q", got, why)
	}
	if got := eval[string](b, `document.querySelector('#task #attempts tr[data-attempt="2"]').innerText`); !strings.Contains(got, "—") {
		t.Errorf("the running attempt shown as %q, want no end (—)", got)
	}
	b.click(`#task-close`)
	b.wait("the dialog closed", `!document.getElementById('task').open`)

	// A finished task: its outcome and attempts, no payload.
	fs, _, err := s.c.History(ctx, "jobs", api.FinishedAcked, 0, 1)
	if err != nil || len(fs) != 1 {
		t.Fatalf("history: %+v %v", fs, err)
	}
	b.click(fmt.Sprintf(`button[data-key="finished:%d"]`, fs[0].JobID))
	b.wait("done's dialog", `document.getElementById('task').open && document.querySelector('#task [data-field=outcome]')?.textContent === 'acked' && `+attempts+` === '1:acked'`)
	b.click(`#task-close`)
	b.wait("the dialog closed", `!document.getElementById('task').open`)
	// One deleted before any reservation: no attempts.
	b.click(`#history tr[data-id=gone] button`)
	b.wait("gone's dialog", `document.getElementById('task').open && document.querySelector('#task #attempts-none') && document.querySelector('#task [data-field=outcome]').textContent === 'deleted'`)
	b.click(`#task-close`)
	b.checkClean("the task dialogs")
}
