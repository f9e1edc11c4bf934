package httpapi

import (
	"net/http"
	"net/url"
	"time"

	"github.com/hourglass-go/hourglass/api"
	"github.com/hourglass-go/hourglass/service"
)

// The operator's console on the wire (api/bulk.go): GET
// /v1/queues/{queue}/tasks with filters, and the bulk routes. The rules
// and their checks are the service's (service/bulk.go); here only the
// wire: query parameters and bodies ↔ service.Filter.

// bulkRoutes returns the bulk routes, one line per call.
func (s *Server) bulkRoutes() []route {
	return []route{
		{"GET", "/v1/queues/{queue}/keys", s.listKeys},
		{"POST", "/v1/queues/{queue}/tasks:delete", s.bulk(service.Delete)},
		{"POST", "/v1/queues/{queue}/tasks:kick", s.bulk(service.Kick)},
		{"POST", "/v1/queues/{queue}/tasks:retry", s.bulk(service.Retry)},
		{"POST", "/v1/queues/{queue}/tasks:move", s.bulk(service.Move)},
	}
}

// findTasks serves GET /v1/queues/{queue}/tasks: a page of the queue's
// tasks matching every filter given (none: every task), in due order
// (service.Cursor), without payloads, and the opaque cursor of the next
// ("" on the last page). A malformed after is 400, as a bad filter.
func (s *Server) findTasks(w http.ResponseWriter, r *http.Request, b service.Service) {
	q := r.URL.Query()
	f, err := queryFilter(q)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	after, err := service.ParseCursor(q.Get("after"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	limit, err := queryLimit(q)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	tasks, next, err := b.FindTasks(r.Context(), r.PathValue("queue"), f, after, limit)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := api.TasksResponse{Tasks: make([]api.Task, len(tasks)), Next: next.String()}
	for i, t := range tasks {
		t.Payload = nil // listings never carry payloads, whatever the engine gives
		out.Tasks[i] = toTask(t, false)
	}
	writeJSON(w, http.StatusOK, out)
}

// queryFilter reads the filter of a GET's query.
func queryFilter(q url.Values) (service.Filter, error) {
	af := api.Filter{State: q.Get("state"), Error: q.Get("error"), IDPrefix: q.Get("id_prefix"), Key: q.Get("key")}
	for _, p := range []struct {
		name string
		dst  **time.Time
	}{{"due_after", &af.DueAfter}, {"due_before", &af.DueBefore}, {"created_after", &af.CreatedAfter}, {"created_before", &af.CreatedBefore}} {
		v := q.Get(p.name)
		if v == "" {
			continue
		}
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			return service.Filter{}, badRequest("%s %q: want an RFC 3339 time", p.name, v)
		}
		*p.dst = &t
	}
	return fromAPIFilter(af)
}

// fromAPIFilter turns a filter of the wire into the service's.
func fromAPIFilter(af api.Filter) (service.Filter, error) {
	f := service.Filter{Error: af.Error, IDPrefix: af.IDPrefix, Key: af.Key}
	if af.State != "" {
		st, ok := states[af.State]
		if !ok {
			return service.Filter{}, badRequest("state %q: want delayed, ready, reserved or dead", af.State)
		}
		f.State = st
	}
	for _, p := range []struct {
		src *time.Time
		dst *time.Time
	}{{af.DueAfter, &f.DueAfter}, {af.DueBefore, &f.DueBefore}, {af.CreatedAfter, &f.CreatedAfter}, {af.CreatedBefore, &f.CreatedBefore}} {
		if p.src != nil {
			*p.dst = *p.src
		}
	}
	return f, nil
}

// bulk returns the handler of POST /v1/queues/{queue}/tasks:ACTION: 200
// with what it matched and changed; a bad body is 400 naming the field,
// and nothing changes.
func (s *Server) bulk(a service.Action) func(http.ResponseWriter, *http.Request, service.Service) {
	return func(w http.ResponseWriter, r *http.Request, b service.Service) {
		var req api.BulkRequest
		if err := decode(w, r, smallBody, &req, true); err != nil {
			s.fail(w, r, err)
			return
		}
		f, err := fromAPIFilter(req.Filter)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		res, err := b.Bulk(r.Context(), r.PathValue("queue"), service.BulkRequest{Action: a, Filter: f, To: req.To, DryRun: req.DryRun})
		if err != nil {
			s.fail(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, api.BulkResponse{Matched: res.Matched, Changed: res.Changed, Clashed: res.Clashed, Clashes: res.Clashes})
	}
}

// listKeys serves GET /v1/queues/{queue}/keys: a page of the queue's keys
// with their counts, busiest first (service/keys.go), and the cursor of
// the next.
func (s *Server) listKeys(w http.ResponseWriter, r *http.Request, b service.Service) {
	q := r.URL.Query()
	limit, err := queryLimit(q)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	page, err := b.Keys(r.Context(), r.PathValue("queue"), q.Get("after"), limit)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := api.KeysResponse{Keys: make([]api.KeyCount, len(page.Keys)), Next: page.Next}
	for i, k := range page.Keys {
		out.Keys[i] = api.KeyCount{Key: k.Key, Ready: k.Ready, Reserved: k.Reserved, Delayed: k.Delayed}
	}
	writeJSON(w, http.StatusOK, out)
}
