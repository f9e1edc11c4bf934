package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/hourglass-go/hourglass/api"
	"github.com/hourglass-go/hourglass/task"
)

// wireError is an error found before the broker is called, with the
// status it answers.
type wireError struct {
	status int
	msg    string // with the "hourglass: " prefix
}

// Error returns the message, prefix included.
func (e *wireError) Error() string { return e.msg }

// badRequest returns a 400 wireError; format and args say what is wrong.
func badRequest(format string, args ...any) error {
	return &wireError{http.StatusBadRequest, "hourglass: " + fmt.Sprintf(format, args...)}
}

// Errors of the wire and of the server's state.
var (
	errNoToken  = &wireError{http.StatusUnauthorized, "hourglass: missing bearer token"}
	errBadToken = &wireError{http.StatusUnauthorized, "hourglass: wrong bearer token"}
	errNotReady = &wireError{http.StatusServiceUnavailable, "hourglass: not ready: recovering"}
	errStopping = &wireError{http.StatusServiceUnavailable, "hourglass: stopping"}
	errNoRoute  = &wireError{http.StatusNotFound, "hourglass: no such route"}
	errMethod   = &wireError{http.StatusMethodNotAllowed, "hourglass: method not allowed"}
)

// status maps an error to its HTTP status: a wireError's own, the
// broker's by kind (see package api), 500 for anything else.
func status(err error) int {
	var we *wireError
	switch {
	case errors.As(err, &we):
		return we.status
	case errors.Is(err, task.ErrInvalid):
		return http.StatusBadRequest
	case errors.Is(err, task.ErrNotFound), errors.Is(err, task.ErrNoSchedule):
		return http.StatusNotFound
	case errors.Is(err, task.ErrLease), errors.Is(err, task.ErrState):
		return http.StatusConflict
	case errors.Is(err, task.ErrTooLarge):
		return http.StatusRequestEntityTooLarge
	case errors.Is(err, task.ErrNoSpace):
		// Before ErrClosed, which a failed broker's errors wrap too.
		return http.StatusInsufficientStorage
	case errors.Is(err, task.ErrClosed):
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

// message returns err's text with the "hourglass: " prefix every error
// body carries.
func message(err error) string {
	msg := err.Error()
	if !strings.HasPrefix(msg, "hourglass: ") {
		msg = "hourglass: " + msg
	}
	return msg
}

// writeError answers err as {"error":"hourglass: ..."} with its status.
func writeError(w http.ResponseWriter, err error) {
	writeJSON(w, status(err), api.Error{Error: message(err)})
}

// fail answers err, logging it first when it is the server's fault (500).
// When the client has gone away nobody reads the answer: it writes none.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	if gone(err) && r.Context().Err() != nil {
		return
	}
	if status(err) == http.StatusInternalServerError {
		s.log.ErrorContext(r.Context(), "request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	}
	writeError(w, err)
}

// gone reports whether err is the request's context ending: the client
// went away, or Drain cut a long poll short.
func gone(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}
