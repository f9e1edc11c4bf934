package httpapi

import "net/http"

// healthz answers 200 while the process runs: a liveness probe.
func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, struct {
		Status string `json:"status"`
	}{"ok"})
}

// readyz answers 200 once the broker is set and until Drain: a readiness
// probe. Before, it answers 503 "recovering"; after, 503 "stopping"; and
// 503 with the reason while a broker that reports errors (as
// [broker.Broker.Err] does) cannot serve, after a failed commit.
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	ref := s.b.Load()
	switch {
	case s.draining.Load():
		writeError(w, errStopping)
	case ref == nil:
		writeError(w, errNotReady)
	case failed(ref.Broker) != nil:
		writeError(w, &wireError{http.StatusServiceUnavailable, message(failed(ref.Broker))})
	default:
		writeJSON(w, http.StatusOK, struct {
			Status string `json:"status"`
		}{"ready"})
	}
}

// failed returns the error that stops b from serving, for brokers that
// report one, or nil.
func failed(b Broker) error {
	if e, ok := b.(interface{ Err() error }); ok {
		return e.Err()
	}
	return nil
}
