package httpapi

import (
	"net/http"
	"time"

	"github.com/hourglass-go/hourglass/api"
	"github.com/hourglass-go/hourglass/service"
	"github.com/hourglass-go/hourglass/task"
)

// historyRoutes returns the history's routes, one line per call; package
// api lists them with their answers (api/history.go).
func (s *Server) historyRoutes() []route {
	return []route{
		{"GET", "/v1/queues/{queue}/tasks/{id}/attempts", s.attempts},
		{"GET", "/v1/queues/{queue}/history", s.history},
	}
}

// finishedOutcomes are the outcomes the history's filter takes.
var finishedOutcomes = map[string]bool{
	api.FinishedAcked:     true,
	api.FinishedDead:      true,
	api.FinishedDeleted:   true,
	api.FinishedCancelled: true,
}

// attempts serves GET /v1/queues/{queue}/tasks/{id}/attempts: the task's
// attempts, oldest first, a running one with its duration so far, and
// how many are left out ("dropped").
func (s *Server) attempts(w http.ResponseWriter, r *http.Request, b service.Service) {
	as, err := b.Attempts(r.Context(), r.PathValue("queue"), r.PathValue("id"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	now := time.Now()
	out := api.AttemptsResponse{Attempts: make([]api.Attempt, len(as)), Dropped: service.DroppedAttempts(as)}
	for i, a := range as {
		out.Attempts[i] = toAttempt(a, now)
	}
	writeJSON(w, http.StatusOK, out)
}

// toAttempt turns an attempt into its wire form at time now: a running
// one (no end) has no ended and no outcome, and lasted until now (0 if
// its start is after now, as another node's clock may put it).
func toAttempt(a task.Attempt, now time.Time) api.Attempt {
	out := api.Attempt{
		Attempt: a.Attempt,
		Queue:   a.Queue,
		Started: utc(a.Started),
		Outcome: a.Outcome,
		Error:   a.Error,
		Status:  a.Status,
		Node:    a.Node,
	}
	if out.Attempt == 0 {
		out.Attempt = a.N // a record kept before attempts were numbered so
	}
	end := now
	if !a.Ended.IsZero() {
		ended := utc(a.Ended)
		out.Ended, end = &ended, a.Ended
	}
	out.Duration = api.Duration(max(end.Sub(a.Started), 0))
	return out
}

// history serves GET /v1/queues/{queue}/history?outcome=&after=&limit=:
// a page of the tasks that left the queue, newest first, and the cursor
// of the next.
func (s *Server) history(w http.ResponseWriter, r *http.Request, b service.Service) {
	q := r.URL.Query()
	outcome := q.Get("outcome")
	if outcome != "" && !finishedOutcomes[outcome] {
		s.fail(w, r, badRequest("outcome %q: want acked, dead, deleted or cancelled", outcome))
		return
	}
	after, limit, err := queryPage(q)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	fs, next, err := b.FinishedTasks(r.Context(), r.PathValue("queue"), outcome, after, limit)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := api.HistoryResponse{Tasks: make([]api.FinishedTask, len(fs)), Next: next}
	for i, f := range fs {
		out.Tasks[i] = api.FinishedTask{
			ID:        f.ID,
			JobID:     f.JobID,
			Outcome:   f.Outcome,
			Finished:  utc(f.Finished),
			Attempts:  f.Attempts,
			LastError: f.LastError,
		}
	}
	writeJSON(w, http.StatusOK, out)
}
