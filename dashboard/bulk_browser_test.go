package dashboard_test

import (
	"context"
	"strings"
	"testing"

	"github.com/hourglass-go/hourglass/api"
)

// TestDashboardSearch checks a queue page's search and its actions on
// every task matched (api/bulk.go): the list narrowed by last error and
// id prefix, kicking the dead tasks matched after a confirmation that
// counts them, deleting those matched, and clearing the search.
func TestDashboardSearch(t *testing.T) { onBothEngines(t, testDashboardSearch) }

func testDashboardSearch(t *testing.T) {
	s := newSite(t, "")
	ctx := context.Background()
	for _, c := range []struct{ id, why string }{{"a-1", "timeout after 5s"}, {"a-2", "timeout after 5s"}, {"b-1", "bad input"}} {
		s.put("ops", api.PutRequest{ID: c.id, Priority: new(uint32(0)), MaxAttempts: 1})
		tasks, err := s.c.Reserve(ctx, "ops", 1, 0)
		if err != nil || len(tasks) != 1 || tasks[0].ID != c.id {
			t.Fatalf("reserve: %+v %v", tasks, err)
		}
		if _, err := s.c.Nack(ctx, "ops", c.id, tasks[0].Lease, 0, c.why); err != nil {
			t.Fatal(err)
		}
	}
	s.put("ops", api.PutRequest{ID: "a-3"})

	b := newBrowser(t, s.srv.URL)
	b.open("#/queues/ops/all")
	b.wait("four tasks", `document.querySelectorAll('#tasks tbody tr[data-id]').length === 4`)

	// Search by last error: the two timeouts alone, with the actions.
	b.fill(`#search-error`, "timeout")
	b.click(`button[data-key=search]`)
	b.wait("the timeouts", `document.querySelectorAll('#tasks tbody tr[data-id]').length === 2 && document.querySelector('button[data-key=kick-matching]')`)
	if ids := eval[string](b, `[...document.querySelectorAll('#tasks tbody tr[data-id]')].map((r) => r.dataset.id).join(' ')`); ids != "a-1 a-2" {
		t.Errorf("search by error: %q", ids)
	}
	b.click(`button[data-key=kick-matching]`)
	b.wait("the confirmation", `document.getElementById('confirm').open`)
	if text := eval[string](b, `document.getElementById('confirm').innerText`); !strings.Contains(text, "2 tasks") {
		t.Errorf("confirmation %q: want the count of 2 tasks", text)
	}
	b.click(`#confirm-ok`)
	b.wait("kicked", `document.querySelectorAll('#tasks tbody tr[data-state=ready]').length === 2`)
	if st := s.state("ops", "a-1") + " " + s.state("ops", "a-2") + " " + s.state("ops", "b-1"); st != "ready ready dead" {
		t.Errorf("after kicking the matched: %s", st)
	}

	// Search by id prefix in the dead tab, then delete those matched.
	b.click(`button[data-key="clear-search"]`)
	b.wait("four tasks again", `document.querySelectorAll('#tasks tbody tr[data-id]').length === 4 && !document.querySelector('button[data-key=kick-matching]')`)
	b.fill(`#search-prefix`, "a-")
	b.click(`button[data-key=search]`)
	b.wait("the a- tasks", `document.querySelectorAll('#tasks tbody tr[data-id]').length === 3`)
	b.click(`button[data-key=delete-matching]`)
	b.wait("the confirmation", `document.getElementById('confirm').open`)
	b.click(`#confirm-ok`)
	b.wait("none matched left", `document.querySelectorAll('#tasks tbody tr[data-id]').length === 0`)
	if st := s.state("ops", "a-1") + " " + s.state("ops", "a-3") + " " + s.state("ops", "b-1"); st != "gone gone dead" {
		t.Errorf("after deleting the matched: %s", st)
	}
	b.checkClean("queue ops")
}
