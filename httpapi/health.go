package httpapi

import "net/http"

// healthz is a liveness probe: it answers 200 while the process can
// serve, or will once it has recovered, and 503 with the reason once the
// service reports an error ([service.Service.Err]) before Drain: a
// failed commit (a full disk, say) stops the broker for good, and only a
// restart of the process brings it back.
func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	if ref := s.b.Load(); ref != nil && !s.draining.Load() {
		if err := ref.Service.Err(); err != nil {
			writeError(w, &wireError{http.StatusServiceUnavailable, message(err)})
			return
		}
	}
	writeJSON(w, http.StatusOK, struct {
		Status string `json:"status"`
	}{"ok"})
}

// readyz answers 200 once the broker is set and until Drain: a readiness
// probe. Before, it answers 503 "recovering"; after, 503 "stopping"; and
// 503 with the reason while the service cannot serve
// ([service.Service.Ready]): after a failed commit, for good, or while a
// cluster node cannot reach its database, until it can again. healthz
// stays 200 meanwhile: the process is fine, and restarting it would not
// bring the database back.
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	ref := s.b.Load()
	var err error
	if ref != nil {
		err = ref.Service.Ready()
	}
	switch {
	case s.draining.Load():
		writeError(w, errStopping)
	case ref == nil:
		writeError(w, errNotReady)
	case err != nil:
		writeError(w, &wireError{http.StatusServiceUnavailable, message(err)})
	default:
		writeJSON(w, http.StatusOK, struct {
			Status string `json:"status"`
		}{"ready"})
	}
}
