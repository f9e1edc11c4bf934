package httpapi

import (
	"cmp"
	"net/http"
	"slices"
	"time"

	"github.com/hourglass-go/hourglass/api"
	"github.com/hourglass-go/hourglass/service"
)

// queues serves GET /v1/queues: every queue's counts by state, its pause
// and its policy (policy.go's toQueue), by name.
func (s *Server) queues(w http.ResponseWriter, r *http.Request, b service.Service) {
	stats, err := b.Queues(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := api.QueuesResponse{Queues: make([]api.Queue, len(stats))}
	now := time.Now()
	for i, q := range stats {
		out.Queues[i] = toQueue(q, now)
	}
	slices.SortFunc(out.Queues, func(a, b api.Queue) int { return cmp.Compare(a.Name, b.Name) })
	writeJSON(w, http.StatusOK, out)
}
