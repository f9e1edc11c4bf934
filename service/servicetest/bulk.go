package servicetest

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/service"
	"github.com/hourglass-go/hourglass/task"
)

// bulkQueue fills queue "bq" of b: ready r-1..r-5, delayed d-1 (due in
// 1h) and d-2 (3h), dead x-1 and x-2 (last error "timeout after 5s") and
// x-3 ("bad input"), and w-1 reserved, whose lease it returns. Every
// task's payload is its id.
func bulkQueue(t *testing.T, b service.Service) (lease string) {
	t.Helper()
	ctx := context.Background()
	for i, why := range []string{"timeout after 5s", "timeout after 5s", "bad input"} {
		id := fmt.Sprintf("x-%d", i+1)
		putTask(t, b, "bq", task.PutRequest{ID: id, Payload: []byte(`"` + id + `"`), Priority: 0, MaxAttempts: 1})
		r := ReserveOne(t, b, "bq", time.Second)
		if r.ID != id {
			t.Fatalf("reserved %s, want %s", r.ID, id)
		}
		if _, err := b.Nack(ctx, "bq", id, r.Lease, 0, why); err != nil {
			t.Fatalf("nack %s: %v", id, err)
		}
	}
	putTask(t, b, "bq", task.PutRequest{ID: "w-1", Payload: []byte(`"w-1"`), Priority: 0})
	w := ReserveOne(t, b, "bq", time.Second)
	for i := 1; i <= 5; i++ {
		id := fmt.Sprintf("r-%d", i)
		putTask(t, b, "bq", task.PutRequest{ID: id, Payload: []byte(`"` + id + `"`), Priority: 7})
	}
	putTask(t, b, "bq", task.PutRequest{ID: "d-1", Payload: []byte(`"d-1"`), Delay: time.Hour})
	putTask(t, b, "bq", task.PutRequest{ID: "d-2", Payload: []byte(`"d-2"`), Delay: 3 * time.Hour})
	return w.Lease
}

// find returns the ids of every task of queue f matches, paging by limit,
// and checks the pages: in due order (due time, then job id), within
// limit, without payloads, each matching f.
func find(t *testing.T, b service.Service, queue string, f service.Filter, limit int) []string {
	t.Helper()
	var ids []string
	var after, last service.Cursor
	for pages := 0; ; pages++ {
		page, next, err := b.FindTasks(context.Background(), queue, f, after, limit)
		must(t, "find", err)
		if len(page) > limit || pages > 100 {
			t.Fatalf("find %+v: page of %d (limit %d), page %d", f, len(page), limit, pages)
		}
		for _, tk := range page {
			if !last.Before(tk.Due.UnixNano(), tk.JobID) || tk.Payload != nil || !f.Match(tk) || tk.Queue != queue {
				t.Fatalf("find %+v: %+v after %+v", f, tk, last)
			}
			last = service.Cursor{Due: tk.Due.UnixNano(), Job: tk.JobID}
			ids = append(ids, tk.ID)
		}
		if next.IsZero() {
			return ids
		}
		if len(page) > 0 && next.Before(last.Due, last.Job) {
			t.Fatalf("find %+v: next %+v before the page's last task %+v", f, next, last)
		}
		after = next
	}
}

// bulkFind tests FindTasks: each filter alone and combined, paging, bad
// filters.
func bulkFind(t *testing.T, b service.Service) {
	ctx := context.Background()
	start := time.Now()
	bulkQueue(t, b)
	end := time.Now()
	now := time.Now()
	for _, c := range []struct {
		name string
		f    service.Filter
		want string
	}{
		{"all", service.Filter{}, "x-1 x-2 x-3 w-1 r-1 r-2 r-3 r-4 r-5 d-1 d-2"},
		{"dead", service.Filter{State: task.Dead}, "x-1 x-2 x-3"},
		{"ready", service.Filter{State: task.Ready}, "r-1 r-2 r-3 r-4 r-5"},
		{"reserved", service.Filter{State: task.Reserved}, "w-1"},
		{"delayed", service.Filter{State: task.Delayed}, "d-1 d-2"},
		{"error", service.Filter{Error: "timeout"}, "x-1 x-2"},
		{"error whole", service.Filter{Error: "bad input"}, "x-3"},
		{"error none", service.Filter{Error: "nothing like it"}, ""},
		{"id prefix", service.Filter{IDPrefix: "r-"}, "r-1 r-2 r-3 r-4 r-5"},
		{"id whole", service.Filter{IDPrefix: "d-2"}, "d-2"},
		{"due after", service.Filter{DueAfter: now.Add(30 * time.Minute)}, "d-1 d-2"},
		{"due before", service.Filter{DueBefore: now.Add(30 * time.Minute), IDPrefix: "d"}, ""},
		{"due window", service.Filter{DueAfter: now.Add(30 * time.Minute), DueBefore: now.Add(2 * time.Hour)}, "d-1"},
		{"created before start", service.Filter{CreatedBefore: start.Add(-time.Second)}, ""},
		{"created after end", service.Filter{CreatedAfter: end.Add(time.Second)}, ""},
		{"created within", service.Filter{CreatedAfter: start.Add(-time.Second), CreatedBefore: end.Add(time.Second)}, "x-1 x-2 x-3 w-1 r-1 r-2 r-3 r-4 r-5 d-1 d-2"},
		{"dead and error", service.Filter{State: task.Dead, Error: "timeout"}, "x-1 x-2"},
		{"ready and error", service.Filter{State: task.Ready, Error: "timeout"}, ""},
		{"prefix and state", service.Filter{State: task.Delayed, IDPrefix: "d-1"}, "d-1"},
	} {
		for _, limit := range []int{1, 2, 100} {
			if got := strings.Join(find(t, b, "bq", c.f, limit), " "); got != c.want {
				t.Errorf("find %s, limit %d: %q, want %q", c.name, limit, got, c.want)
			}
		}
	}
	if got := find(t, b, "no-such-queue", service.Filter{}, 10); len(got) != 0 {
		t.Errorf("find in a queue without tasks: %v", got)
	}

	for _, c := range []struct {
		name  string
		queue string
		f     service.Filter
		limit int
	}{
		{"limit 0", "bq", service.Filter{}, 0},
		{"limit over", "bq", service.Filter{}, task.MaxList + 1},
		{"bad queue", "b q", service.Filter{}, 10},
		{"state", "bq", service.Filter{State: task.Dead + 1}, 10},
		{"error too long", "bq", service.Filter{Error: strings.Repeat("e", service.MaxFilterText+1)}, 10},
		{"prefix too long", "bq", service.Filter{IDPrefix: strings.Repeat("e", service.MaxFilterText+1)}, 10},
		{"due window empty", "bq", service.Filter{DueAfter: now, DueBefore: now}, 10},
		{"created window reversed", "bq", service.Filter{CreatedAfter: now, CreatedBefore: now.Add(-time.Hour)}, 10},
		{"due out of range", "bq", service.Filter{DueBefore: time.Date(1960, 1, 1, 0, 0, 0, 0, time.UTC)}, 10},
	} {
		_, _, err := b.FindTasks(ctx, c.queue, c.f, service.Cursor{}, c.limit)
		wantErr(t, "find "+c.name, err, task.ErrInvalid)
	}
}

// bulkOf runs r on queue "bq" and fails t unless it matched and changed
// as said.
func bulkOf(t *testing.T, b service.Service, r service.BulkRequest, matched, changed int) service.BulkResult {
	t.Helper()
	return bulkIn(t, b, "bq", r, matched, changed)
}

// bulkIn is bulkOf on queue.
func bulkIn(t *testing.T, b service.Service, queue string, r service.BulkRequest, matched, changed int) service.BulkResult {
	t.Helper()
	res, err := b.Bulk(context.Background(), queue, r)
	must(t, "bulk "+r.Action.String(), err)
	if res.Matched != matched || res.Changed != changed {
		t.Fatalf("bulk %s %+v: %+v; want %d matched, %d changed", r.Action, r.Filter, res, matched, changed)
	}
	return res
}

// states returns "id:state" of every task of queue, in due order.
func states(t *testing.T, b service.Service, queue string) string {
	t.Helper()
	var out []string
	var after service.Cursor
	for {
		page, next, err := b.FindTasks(context.Background(), queue, service.Filter{}, after, task.MaxList)
		must(t, "find", err)
		for _, tk := range page {
			out = append(out, tk.ID+":"+tk.State.String())
		}
		if next.IsZero() {
			return strings.Join(out, " ")
		}
		after = next
	}
}

// bulkActions tests Bulk: dry runs, each action's count and the states it
// leaves, a move into a queue with a clashing id, bad requests.
func bulkActions(t *testing.T, b service.Service) {
	ctx := context.Background()
	lease := bulkQueue(t, b)
	before := states(t, b, "bq")

	// Bad requests change nothing.
	for _, c := range []struct {
		name string
		r    service.BulkRequest
	}{
		{"no action", service.BulkRequest{}},
		{"action out of range", service.BulkRequest{Action: service.Move + 1}},
		{"bad filter", service.BulkRequest{Action: service.Delete, Filter: service.Filter{Error: strings.Repeat("e", service.MaxFilterText+1)}}},
		{"reversed window", service.BulkRequest{Action: service.Delete, Filter: service.Filter{DueAfter: time.Now(), DueBefore: time.Now().Add(-time.Hour)}}},
		{"move without target", service.BulkRequest{Action: service.Move}},
		{"move into itself", service.BulkRequest{Action: service.Move, To: "bq"}},
		{"move into a bad name", service.BulkRequest{Action: service.Move, To: "b q"}},
		{"target without move", service.BulkRequest{Action: service.Delete, To: "bq2"}},
	} {
		_, err := b.Bulk(ctx, "bq", c.r)
		wantErr(t, "bulk "+c.name, err, task.ErrInvalid)
	}
	_, err := b.Bulk(ctx, "b q", service.BulkRequest{Action: service.Delete})
	wantErr(t, "bulk in a bad queue", err, task.ErrInvalid)
	if got := states(t, b, "bq"); got != before {
		t.Fatalf("after bad bulk requests: %s, want %s", got, before)
	}

	// A dry run counts and changes nothing.
	for _, a := range []service.Action{service.Delete, service.Kick, service.Retry} {
		bulkOf(t, b, service.BulkRequest{Action: a, Filter: service.Filter{State: task.Dead}, DryRun: true}, 3, 0)
	}
	bulkOf(t, b, service.BulkRequest{Action: service.Move, To: "bq2", DryRun: true}, 11, 0)
	if got := states(t, b, "bq"); got != before {
		t.Fatalf("after dry runs: %s, want %s", got, before)
	}

	// Kick: the dead ones matched, and those alone.
	bulkOf(t, b, service.BulkRequest{Action: service.Kick, Filter: service.Filter{Error: "timeout"}}, 2, 2)
	// Kick of tasks not dead changes none of them.
	bulkOf(t, b, service.BulkRequest{Action: service.Kick, Filter: service.Filter{IDPrefix: "d-"}}, 2, 0)
	// Retry: delayed and dead ones ready now; ready and reserved ones not.
	bulkOf(t, b, service.BulkRequest{Action: service.Retry, Filter: service.Filter{IDPrefix: "d-1"}}, 1, 1)
	bulkOf(t, b, service.BulkRequest{Action: service.Retry, Filter: service.Filter{IDPrefix: "w-"}}, 1, 0)
	bulkOf(t, b, service.BulkRequest{Action: service.Retry, Filter: service.Filter{State: task.Dead}}, 1, 1)
	want := "x-1:ready x-2:ready x-3:ready w-1:reserved r-1:ready r-2:ready r-3:ready r-4:ready r-5:ready d-1:ready d-2:delayed"
	if got := states(t, b, "bq"); got != want {
		t.Fatalf("after kicks and retries: %s, want %s", got, want)
	}
	if g, err := b.Get("bq", "d-1"); err != nil || g.Due.After(time.Now()) {
		t.Fatalf("d-1 retried: %+v, %v; want due now", g, err)
	}

	// Move: r-1 clashes with the target's own r-1 and stays; the others
	// move with their job ids, payloads, priorities and states; the
	// reserved w-1 stays with its worker.
	putTask(t, b, "bq2", task.PutRequest{ID: "r-1", Payload: []byte(`"theirs"`), Delay: time.Hour})
	old := map[string]task.Task{}
	for _, id := range []string{"r-2", "d-2", "x-1"} {
		g, err := b.Get("bq", id)
		must(t, "get "+id, err)
		old[id] = g
	}
	res := bulkOf(t, b, service.BulkRequest{Action: service.Move, To: "bq2", Filter: service.Filter{IDPrefix: "r-"}}, 5, 4)
	if res.Clashed != 1 || !slices.Equal(res.Clashes, []string{"r-1"}) {
		t.Fatalf("move's clashes: %+v; want r-1", res)
	}
	bulkOf(t, b, service.BulkRequest{Action: service.Move, To: "bq2", Filter: service.Filter{IDPrefix: "w-"}}, 1, 0)
	bulkOf(t, b, service.BulkRequest{Action: service.Move, To: "bq2", Filter: service.Filter{IDPrefix: "d-2"}}, 1, 1)
	bulkOf(t, b, service.BulkRequest{Action: service.Move, To: "bq2", Filter: service.Filter{IDPrefix: "x-1"}}, 1, 1)
	if got, want := states(t, b, "bq"), "x-2:ready x-3:ready w-1:reserved r-1:ready d-1:ready"; got != want {
		t.Fatalf("bq after the moves: %s, want %s", got, want)
	}
	// In due order: bq2's own r-1 is due in 1h, d-2 in 3h.
	if got, want := states(t, b, "bq2"), "x-1:ready r-2:ready r-3:ready r-4:ready r-5:ready r-1:delayed d-2:delayed"; got != want {
		t.Fatalf("bq2 after the moves: %s, want %s", got, want)
	}
	for id, o := range old {
		g, err := b.Get("bq2", id)
		must(t, "get moved "+id, err)
		if g.JobID != o.JobID || string(g.Payload) != string(o.Payload) || g.Priority != o.Priority ||
			g.Attempts != o.Attempts || g.State != o.State || !g.Due.Equal(o.Due) || g.LastError != o.LastError {
			t.Fatalf("moved %s: %+v; was %+v", id, g, o)
		}
	}
	if g, err := b.Get("bq2", "r-1"); err != nil || string(g.Payload) != `"theirs"` {
		t.Fatalf("bq2's own r-1 after a clash: %+v, %v", g, err)
	}
	// A moved task's attempts go with it.
	if as, err := b.Attempts(ctx, "bq2", "x-1"); err != nil || len(as) != 1 || as[0].Error != "timeout after 5s" {
		t.Fatalf("attempts of x-1 moved: %+v, %v; want its one failed attempt", as, err)
	}
	// A moved ready task is handed out from its new queue.
	if got := ReserveOne(t, b, "bq2", time.Second); got.ID != "x-1" {
		t.Fatalf("reserved %s from bq2, want x-1 (the oldest ready)", got.ID)
	}
	if n := queueCount(t, b, "bq2"); n != 7 {
		t.Fatalf("bq2 counts %d tasks, want 7", n)
	}
	if n := queueCount(t, b, "bq"); n != 5 {
		t.Fatalf("bq counts %d tasks, want 5", n)
	}

	// A dead task moved stays dead there.
	putTask(t, b, "bqz", task.PutRequest{ID: "z", MaxAttempts: 1})
	z := ReserveOne(t, b, "bqz", time.Second)
	_, err = b.Nack(ctx, "bqz", "z", z.Lease, 0, "oops")
	must(t, "nack z", err)
	bulkIn(t, b, "bqz", service.BulkRequest{Action: service.Move, To: "bq3", Filter: service.Filter{State: task.Dead}}, 1, 1)
	if g, err := b.Get("bq3", "z"); err != nil || g.State != task.Dead || g.LastError != "oops" {
		t.Fatalf("z moved dead: %+v, %v", g, err)
	}
	if st, _ := queueStats(t, b, "bq3"); st.Dead != 1 {
		t.Fatalf("bq3's counts: %+v; want 1 dead", st)
	}

	// Delete: every task but the reserved one, which stays with its
	// worker unless the filter says reserved.
	bulkOf(t, b, service.BulkRequest{Action: service.Delete}, 5, 4)
	if got, want := states(t, b, "bq"), "w-1:reserved"; got != want {
		t.Fatalf("bq after delete: %s, want %s", got, want)
	}
	bulkOf(t, b, service.BulkRequest{Action: service.Delete, Filter: service.Filter{State: task.Reserved}}, 1, 1)
	if err := b.Ack(ctx, "bq", "w-1", lease); err == nil {
		t.Fatalf("ack of a deleted task took")
	}
	if got := states(t, b, "bq"); got != "" {
		t.Fatalf("bq after deleting all: %s", got)
	}
}

// queueCount returns the number of tasks of queue, 0 for none.
func queueCount(t *testing.T, b service.Service, queue string) int {
	t.Helper()
	st, ok := queueStats(t, b, queue)
	if !ok {
		return 0
	}
	return st.Delayed + st.Ready + st.Reserved + st.Dead
}

// bulkLarge runs bulk actions on a set larger than a chunk.
func bulkLarge(t *testing.T, b service.Service) {
	ctx := context.Background()
	const n = service.BulkChunk*2 + 345
	for i := 0; i < n; i += task.MaxBatch {
		rs := make([]task.PutRequest, min(task.MaxBatch, n-i))
		for j := range rs {
			rs[j] = task.PutRequest{ID: fmt.Sprintf("t-%05d", i+j), Delay: time.Hour}
			if (i+j)%3 == 0 {
				rs[j].ID = fmt.Sprintf("k-%05d", i+j)
			}
		}
		for _, r := range b.PutBatch(ctx, "bq", rs) {
			must(t, "put", r.Err)
		}
	}
	keep := (n + 2) / 3
	if got := find(t, b, "bq", service.Filter{IDPrefix: "k-"}, task.MaxList); len(got) != keep {
		t.Fatalf("found %d k- tasks, want %d", len(got), keep)
	}
	bulkOf(t, b, service.BulkRequest{Action: service.Delete, Filter: service.Filter{IDPrefix: "t-"}, DryRun: true}, n-keep, 0)
	bulkOf(t, b, service.BulkRequest{Action: service.Retry, Filter: service.Filter{IDPrefix: "k-"}}, keep, keep)
	bulkOf(t, b, service.BulkRequest{Action: service.Delete, Filter: service.Filter{IDPrefix: "t-"}}, n-keep, n-keep)
	if st, _ := queueStats(t, b, "bq"); st.Ready != keep || st.Delayed != 0 {
		t.Fatalf("after retry and delete: %+v; want %d ready", st, keep)
	}
}

// bulkScan: a page reads at most service.FindScan tasks, so a filter
// matching none of the first FindScan answers an empty page with a next
// (more than one where an engine reads fewer), and the loop of a bulk
// action goes on through them.
func bulkScan(t *testing.T, b service.Service) {
	ctx := context.Background()
	const n = service.FindScan + 500
	for i := 0; i < n; i += task.MaxBatch {
		rs := make([]task.PutRequest, min(task.MaxBatch, n-i))
		for j := range rs {
			rs[j] = task.PutRequest{ID: fmt.Sprintf("t-%05d", i+j)}
			if i+j == n-1 {
				rs[j].ID = "hit"
			}
		}
		for _, r := range b.PutBatch(ctx, "bq", rs) {
			must(t, "put", r.Err)
		}
	}
	f := service.Filter{IDPrefix: "hit"}
	page, next, err := b.FindTasks(ctx, "bq", f, service.Cursor{}, 10)
	must(t, "find", err)
	if len(page) != 0 || next.IsZero() {
		t.Fatalf("first page: %d tasks, next %+v; want none and a next", len(page), next)
	}
	// An engine may read fewer than FindScan tasks a page (the embedded
	// one reads fewer records): the pages go on, empty, up to the hit.
	for pages := 2; ; pages++ {
		page, next, err = b.FindTasks(ctx, "bq", f, next, 10)
		must(t, "find", err)
		if !next.IsZero() && len(page) == 0 && pages < n/1000 {
			continue
		}
		if len(page) != 1 || page[0].ID != "hit" || !next.IsZero() {
			t.Fatalf("page %d: %+v, next %+v; want hit alone and no next", pages, page, next)
		}
		break
	}
	bulkOf(t, b, service.BulkRequest{Action: service.Delete, Filter: f}, 1, 1)
	if st, _ := queueStats(t, b, "bq"); st.Ready != n-1 {
		t.Fatalf("after deleting hit: %+v; want %d ready", st, n-1)
	}
}

// bulkDueOrder: FindTasks pages in due order (due time, then job id),
// whatever the order the tasks were put in, in pages of 2; a task whose
// due time changes (a retry, a release with a delay) moves in the order,
// and a reserved task keeps its place; a bulk retry of delayed tasks put
// in the reverse of their due order, over several chunks, retries each
// exactly once (each moves to now, before the pass's cursor).
func bulkDueOrder(t *testing.T, b service.Service) {
	ctx := context.Background()
	for _, p := range []struct {
		id    string
		delay time.Duration
	}{{"t-1", 5 * time.Hour}, {"t-2", time.Hour}, {"t-3", 3 * time.Hour}, {"t-4", 0}, {"t-5", 2 * time.Hour}, {"t-6", 4 * time.Hour}} {
		putTask(t, b, "dq", task.PutRequest{ID: p.id, Delay: p.delay})
	}
	order := func(want string) {
		t.Helper()
		for _, limit := range []int{1, 2, 100} {
			if got := strings.Join(find(t, b, "dq", service.Filter{}, limit), " "); got != want {
				t.Fatalf("due order, pages of %d: %q, want %q", limit, got, want)
			}
		}
	}
	order("t-4 t-2 t-5 t-3 t-6 t-1")
	if got := strings.Join(find(t, b, "dq", service.Filter{State: task.Delayed}, 2), " "); got != "t-2 t-5 t-3 t-6 t-1" {
		t.Fatalf("delayed in due order: %q", got)
	}
	bulkIn(t, b, "dq", service.BulkRequest{Action: service.Retry, Filter: service.Filter{IDPrefix: "t-6"}}, 1, 1)
	order("t-4 t-6 t-2 t-5 t-3 t-1") // t-6 ready now, after t-4 put ready before
	w := ReserveOne(t, b, "dq", time.Second)
	if w.ID != "t-4" {
		t.Fatalf("reserved %s, want t-4", w.ID)
	}
	order("t-4 t-6 t-2 t-5 t-3 t-1") // reserved: its due time stays
	_, err := b.Release(ctx, "dq", "t-4", w.Lease, 90*time.Minute)
	must(t, "release", err)
	order("t-6 t-2 t-4 t-5 t-3 t-1")

	// Delayed tasks put in the reverse of their due order, over more
	// than two chunks of a bulk action.
	const n = 2*service.BulkChunk + 50
	rs := make([]task.PutRequest, 0, task.MaxBatch)
	for i := 0; i < n; i++ {
		rs = append(rs, task.PutRequest{ID: fmt.Sprintf("r-%05d", i), Delay: time.Hour + time.Duration(n-i)*time.Second})
		if len(rs) == cap(rs) || i == n-1 {
			for _, r := range b.PutBatch(ctx, "dr", rs) {
				must(t, "put", r.Err)
			}
			rs = rs[:0]
		}
	}
	ids := find(t, b, "dr", service.Filter{}, task.MaxList)
	if len(ids) != n || ids[0] != fmt.Sprintf("r-%05d", n-1) || ids[n-1] != "r-00000" {
		t.Fatalf("%d tasks in due order, first %v; want %d, the last put first", len(ids), ids[:min(len(ids), 3)], n)
	}
	bulkIn(t, b, "dr", service.BulkRequest{Action: service.Retry, Filter: service.Filter{State: task.Delayed}}, n, n)
	var after service.Cursor
	seen := 0
	for {
		page, next, err := b.FindTasks(ctx, "dr", service.Filter{}, after, task.MaxList)
		must(t, "find", err)
		for _, tk := range page {
			if tk.State != task.Ready || tk.Kicks != 1 {
				t.Fatalf("after the retry: %s %s kicked %d times; want ready, once", tk.ID, tk.State, tk.Kicks)
			}
			seen++
		}
		if next.IsZero() {
			break
		}
		after = next
	}
	if seen != n {
		t.Fatalf("after the retry: %d tasks, want %d", seen, n)
	}

	// Reserved tasks with a key and without one keep their places among
	// the others (an engine may keep them apart: package cluster's
	// migration 019).
	putTask(t, b, "dk", task.PutRequest{ID: "u-1"})
	putTask(t, b, "dk", task.PutRequest{ID: "k-1", Key: "a"})
	putTask(t, b, "dk", task.PutRequest{ID: "u-2", Delay: time.Hour})
	putTask(t, b, "dk", task.PutRequest{ID: "k-2", Key: "b", Delay: 2 * time.Hour})
	putTask(t, b, "dk", task.PutRequest{ID: "u-3"})
	reserved := map[string]bool{}
	for range 2 {
		reserved[ReserveOne(t, b, "dk", time.Second).ID] = true
	}
	want := map[string]bool{"u-1": true, "k-1": true}
	if !maps.Equal(reserved, want) {
		t.Fatalf("reserved %v, want %v", reserved, want)
	}
	for _, limit := range []int{1, 2, 100} {
		if got := strings.Join(find(t, b, "dk", service.Filter{}, limit), " "); got != "u-1 k-1 u-3 u-2 k-2" {
			t.Fatalf("due order with reserved tasks, pages of %d: %q", limit, got)
		}
		if got := strings.Join(find(t, b, "dk", service.Filter{State: task.Reserved}, limit), " "); got != "u-1 k-1" {
			t.Fatalf("reserved tasks in due order, pages of %d: %q", limit, got)
		}
	}
}
