package httpapi

import (
	"cmp"
	"net/http"
	"slices"

	"github.com/hourglass-go/hourglass/api"
	"github.com/hourglass-go/hourglass/service"
)

// queues serves GET /v1/queues: every queue's counts by state, by name.
func (s *Server) queues(w http.ResponseWriter, r *http.Request, b service.Service) {
	stats, err := b.Queues(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := api.QueuesResponse{Queues: make([]api.Queue, len(stats))}
	for i, q := range stats {
		out.Queues[i] = api.Queue{Name: q.Name, Delayed: q.Delayed, Ready: q.Ready, Reserved: q.Reserved, Dead: q.Dead}
	}
	slices.SortFunc(out.Queues, func(a, b api.Queue) int { return cmp.Compare(a.Name, b.Name) })
	writeJSON(w, http.StatusOK, out)
}
