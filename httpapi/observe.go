package httpapi

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/hourglass-go/hourglass/api"
	"github.com/hourglass-go/hourglass/broker"
	"github.com/hourglass-go/hourglass/task"
)

// Observer is what the routes for looking at a server call beyond
// [Broker]: [broker.Broker]'s methods for the dashboard. A broker that
// lacks them (a test's fake) answers those routes with 501.
type Observer interface {
	ListTasks(queue string, st task.State, after uint64, limit int) ([]task.Task, uint64, error)
	Lateness() []task.LatenessWindow
	DueHistogram(queue string, width time.Duration, n int) (time.Time, []int, error)
	CheckCron(line, timezone string, n int) ([]time.Time, error)
	KickDead(ctx context.Context, queue string) (int, error)
	DeleteDead(ctx context.Context, queue string) (int, error)
}

var _ Observer = (*broker.Broker)(nil)

// observeRoutes returns the routes for looking at a server (the
// dashboard's), one line per call; package api lists them with their
// answers (api/observe.go).
func (s *Server) observeRoutes() []route {
	return []route{
		{"GET", "/v1/queues/{queue}/tasks", observe(s.listTasks)},
		{"POST", "/v1/queues/{queue}/dead:kick", observe(s.kickDead)},
		{"DELETE", "/v1/queues/{queue}/dead", observe(s.deleteDead)},
		{"GET", "/v1/stats/queues", s.queueStats},
		{"GET", "/v1/stats/lateness", observe(s.lateness)},
		{"GET", "/v1/stats/due", observe(s.due)},
		{"POST", "/v1/cron:check", observe(s.checkCron)},
	}
}

// errNoObserver is the answer of the observing routes over a broker that
// is not an [Observer].
var errNoObserver = &wireError{http.StatusNotImplemented, "hourglass: this server's broker cannot list tasks or report statistics"}

// observe adapts a handler that needs an [Observer] to the route table.
func observe(h func(http.ResponseWriter, *http.Request, Observer)) func(http.ResponseWriter, *http.Request, Broker) {
	return func(w http.ResponseWriter, r *http.Request, b Broker) {
		o, ok := b.(Observer)
		if !ok {
			writeError(w, errNoObserver)
			return
		}
		h(w, r, o)
	}
}

// states maps the state names of the wire to the broker's.
var states = map[string]task.State{
	api.StateDelayed:  task.Delayed,
	api.StateReady:    task.Ready,
	api.StateReserved: task.Reserved,
	api.StateDead:     task.Dead,
}

// listTasks serves GET /v1/queues/{queue}/tasks?state=&after=&limit=: a
// page of the queue's tasks without payloads, and the cursor of the next.
func (s *Server) listTasks(w http.ResponseWriter, r *http.Request, o Observer) {
	q := r.URL.Query()
	var st task.State
	if name := q.Get("state"); name != "" {
		var ok bool
		if st, ok = states[name]; !ok {
			s.fail(w, r, badRequest("state %q: want delayed, ready, reserved or dead", name))
			return
		}
	}
	after, err := queryUint(q.Get("after"), 0, "after")
	if err != nil {
		s.fail(w, r, err)
		return
	}
	limit, err := queryUint(q.Get("limit"), api.DefaultListLimit, "limit")
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if limit < 1 || limit > api.MaxListLimit {
		s.fail(w, r, badRequest("limit %d: want 1 to %d", limit, api.MaxListLimit))
		return
	}
	tasks, next, err := o.ListTasks(r.PathValue("queue"), st, after, int(limit))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := api.TasksResponse{Tasks: make([]api.Task, len(tasks)), Next: next}
	for i, t := range tasks {
		t.Payload = nil // listings never carry payloads, whatever the broker gives
		out.Tasks[i] = toTask(t, false)
	}
	writeJSON(w, http.StatusOK, out)
}

// queryUint parses a query parameter as a whole number, or returns def
// when it is absent.
func queryUint(v string, def uint64, name string) (uint64, error) {
	if v == "" {
		return def, nil
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return 0, badRequest("%s %q: want a whole number", name, v)
	}
	return n, nil
}

// kickDead serves POST /v1/queues/{queue}/dead:kick: every dead task of
// the queue is ready again.
func (s *Server) kickDead(w http.ResponseWriter, r *http.Request, o Observer) {
	n, err := o.KickDead(r.Context(), r.PathValue("queue"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, api.KickedResponse{Kicked: n})
}

// deleteDead serves DELETE /v1/queues/{queue}/dead: every dead task of the
// queue is deleted.
func (s *Server) deleteDead(w http.ResponseWriter, r *http.Request, o Observer) {
	n, err := o.DeleteDead(r.Context(), r.PathValue("queue"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, api.DeletedResponse{Deleted: n})
}

// queueStats serves GET /v1/stats/queues: the counts of GET /v1/queues
// with the counters since start and the time they were read.
func (s *Server) queueStats(w http.ResponseWriter, r *http.Request, b Broker) {
	now := time.Now().UTC()
	stats := b.Queues()
	out := api.QueueStatsResponse{Time: now, Queues: make([]api.QueueStats, len(stats))}
	for i, q := range stats {
		out.Queues[i] = api.QueueStats{
			Queue: api.Queue{Name: q.Name, Delayed: q.Delayed, Ready: q.Ready, Reserved: q.Reserved, Dead: q.Dead},
			Puts:  q.Puts, Deliveries: q.Deliveries, Acks: q.Acks,
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// lateness serves GET /v1/stats/lateness: delivery lateness by 10-second
// window over the last 15 minutes.
func (s *Server) lateness(w http.ResponseWriter, r *http.Request, o Observer) {
	ws := o.Lateness()
	out := api.LatenessResponse{Windows: make([]api.LatenessWindow, len(ws))}
	for i, w := range ws {
		out.Windows[i] = api.LatenessWindow{
			Start:      utc(w.Start),
			Deliveries: w.Deliveries,
			P50:        api.Duration(w.P50),
			P99:        api.Duration(w.P99),
			Max:        api.Duration(w.Max),
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// Defaults of GET /v1/stats/due: the next hour by minute.
const (
	defaultDueWidth = time.Minute
	defaultDueN     = 60
)

// due serves GET /v1/stats/due?queue=&width=&n=: how many delayed tasks
// fall due in each of n windows from now.
func (s *Server) due(w http.ResponseWriter, r *http.Request, o Observer) {
	q := r.URL.Query()
	width := defaultDueWidth
	if v := q.Get("width"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			s.fail(w, r, badRequest("width %q: want a positive Go duration like \"1m\"", v))
			return
		}
		width = d
	}
	n, err := queryUint(q.Get("n"), defaultDueN, "n")
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if n < 1 || n > api.MaxDueWindows {
		s.fail(w, r, badRequest("n %d: want 1 to %d", n, api.MaxDueWindows))
		return
	}
	start, counts, err := o.DueHistogram(q.Get("queue"), width, int(n))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, api.DueResponse{Start: utc(start), Width: api.Duration(width), Counts: counts})
}

// checkCron serves POST /v1/cron:check: the next five times of a cron
// line as a schedule would read it, or 400 with the parser's error.
func (s *Server) checkCron(w http.ResponseWriter, r *http.Request, o Observer) {
	var req api.CronCheckRequest
	if err := decode(w, r, smallBody, &req, false); err != nil {
		s.fail(w, r, err)
		return
	}
	times, err := o.CheckCron(req.Cron, req.Timezone, api.CronCheckTimes)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := api.CronCheckResponse{Next: make([]time.Time, len(times))}
	for i, t := range times {
		out.Next[i] = utc(t)
	}
	writeJSON(w, http.StatusOK, out)
}
