package httpapi

import "net/http"

// healthz answers 200 while the process runs: a liveness probe.
func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, struct {
		Status string `json:"status"`
	}{"ok"})
}

// readyz answers 200 once the broker is set and until Drain: a readiness
// probe. Before, it answers 503 "recovering"; after, 503 "stopping".
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	switch {
	case s.draining.Load():
		writeError(w, errStopping)
	case s.b.Load() == nil:
		writeError(w, errNotReady)
	default:
		writeJSON(w, http.StatusOK, struct {
			Status string `json:"status"`
		}{"ready"})
	}
}
