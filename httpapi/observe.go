package httpapi

import (
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/hourglass-go/hourglass/api"
	"github.com/hourglass-go/hourglass/service"
	"github.com/hourglass-go/hourglass/task"
)

// observeRoutes returns the routes for looking at a server (the
// dashboard's), one line per call; package api lists them with their
// answers (api/observe.go).
func (s *Server) observeRoutes() []route {
	return []route{
		{"GET", "/v1/queues/{queue}/tasks", s.findTasks}, // bulk.go
		{"POST", "/v1/queues/{queue}/dead:kick", s.kickDead},
		{"DELETE", "/v1/queues/{queue}/dead", s.deleteDead},
		{"GET", "/v1/stats/queues", s.queueStats},
		{"GET", "/v1/stats/lateness", s.lateness},
		{"GET", "/v1/stats/due", s.due},
		{"POST", "/v1/cron:check", s.checkCron},
	}
}

// states maps the state names of the wire to the broker's.
var states = map[string]task.State{
	api.StateDelayed:  task.Delayed,
	api.StateReady:    task.Ready,
	api.StateReserved: task.Reserved,
	api.StateDead:     task.Dead,
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

// queryPage reads a listing's page from its query: the cursor after (0,
// the first page, when absent) and limit (queryLimit).
func queryPage(q url.Values) (after uint64, limit int, err error) {
	if after, err = queryUint(q.Get("after"), 0, "after"); err != nil {
		return 0, 0, err
	}
	limit, err = queryLimit(q)
	return after, limit, err
}

// queryLimit reads a listing's limit from its query: 1 to
// api.MaxListLimit, api.DefaultListLimit when absent.
func queryLimit(q url.Values) (int, error) {
	limit, err := queryUint(q.Get("limit"), api.DefaultListLimit, "limit")
	if err != nil {
		return 0, err
	}
	if limit < 1 || limit > api.MaxListLimit {
		return 0, badRequest("limit %d: want 1 to %d", limit, api.MaxListLimit)
	}
	return int(limit), nil
}

// kickDead serves POST /v1/queues/{queue}/dead:kick: every dead task of
// the queue is ready again.
func (s *Server) kickDead(w http.ResponseWriter, r *http.Request, b service.Service) {
	n, err := b.KickDead(r.Context(), r.PathValue("queue"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, api.KickedResponse{Kicked: n})
}

// deleteDead serves DELETE /v1/queues/{queue}/dead: every dead task of the
// queue is deleted.
func (s *Server) deleteDead(w http.ResponseWriter, r *http.Request, b service.Service) {
	n, err := b.DeleteDead(r.Context(), r.PathValue("queue"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, api.DeletedResponse{Deleted: n})
}

// queueStats serves GET /v1/stats/queues: the counts of GET /v1/queues
// with the counters since start and the time they were read.
func (s *Server) queueStats(w http.ResponseWriter, r *http.Request, b service.Service) {
	now := time.Now().UTC()
	stats, err := b.Queues(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
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
func (s *Server) lateness(w http.ResponseWriter, r *http.Request, b service.Service) {
	ws, err := b.Lateness(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := api.LatenessResponse{Windows: make([]api.LatenessWindow, len(ws))}
	for i, w := range ws {
		out.Windows[i] = api.LatenessWindow{
			Start:      utc(w.Start),
			Deliveries: w.Deliveries,
			P50:        api.Duration(w.P50),
			P99:        api.Duration(w.P99),
			Max:        api.Duration(w.Max),
			Ready:      api.LatenessQuantiles{P50: api.Duration(w.Ready.P50), P99: api.Duration(w.Ready.P99), Max: api.Duration(w.Ready.Max)},
			Wait:       api.LatenessQuantiles{P50: api.Duration(w.Wait.P50), P99: api.Duration(w.Wait.P99), Max: api.Duration(w.Wait.Max)},
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
func (s *Server) due(w http.ResponseWriter, r *http.Request, b service.Service) {
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
	start, counts, err := b.DueHistogram(r.Context(), q.Get("queue"), width, int(n))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, api.DueResponse{Start: utc(start), Width: api.Duration(width), Counts: counts})
}

// checkCron serves POST /v1/cron:check: the next five times of a cron
// line as a schedule would read it, or 400 with the parser's error.
func (s *Server) checkCron(w http.ResponseWriter, r *http.Request, b service.Service) {
	var req api.CronCheckRequest
	if err := decode(w, r, smallBody, &req, false); err != nil {
		s.fail(w, r, err)
		return
	}
	times, err := b.CheckCron(req.Cron, req.Timezone, api.CronCheckTimes)
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
