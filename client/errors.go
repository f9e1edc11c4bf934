package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
)

// Errors matching the statuses of the API's error answers: errors.Is(err,
// ErrNotFound) holds for an [*Error] with status 404, and so on.
var (
	// ErrInvalid: 400, the request is malformed or a value is out of
	// range (the message says which).
	ErrInvalid = errors.New("hourglass: invalid request")
	// ErrUnauthorized: 401, the token is missing or wrong.
	ErrUnauthorized = errors.New("hourglass: unauthorized")
	// ErrNotFound: 404, no such task (never put, deleted or acked) or
	// schedule.
	ErrNotFound = errors.New("hourglass: not found")
	// ErrConflict: 409, a stale or unknown lease, or a task not in a
	// state for the call (kick of a task that is not dead).
	ErrConflict = errors.New("hourglass: conflict")
	// ErrTooLarge: 413, the body or the payload is over the server's
	// limit.
	ErrTooLarge = errors.New("hourglass: too large")
	// ErrUnavailable: 503, the server is recovering or stopping.
	ErrUnavailable = errors.New("hourglass: unavailable")
)

// statusErrors maps statuses to their sentinel.
var statusErrors = map[int]error{
	http.StatusBadRequest:            ErrInvalid,
	http.StatusUnauthorized:          ErrUnauthorized,
	http.StatusNotFound:              ErrNotFound,
	http.StatusConflict:              ErrConflict,
	http.StatusRequestEntityTooLarge: ErrTooLarge,
	http.StatusServiceUnavailable:    ErrUnavailable,
}

// Error is an error answer of the server: its HTTP status and the message
// of its {"error":"hourglass: ..."} body.
type Error struct {
	Status  int
	Message string
}

// Error returns the server's message.
func (e *Error) Error() string { return e.Message }

// Is reports whether target is the sentinel of e's status.
func (e *Error) Is(target error) bool {
	s, ok := statusErrors[e.Status]
	return ok && s == target
}

// answerError makes the *Error of an error answer. A body that is not the
// API's (a proxy's page, say) is quoted, shortened, in the message.
func answerError(status int, body []byte) *Error {
	var b struct {
		Error string `json:"error"`
	}
	if json.Unmarshal(body, &b) == nil && b.Error != "" {
		return &Error{Status: status, Message: b.Error}
	}
	text := strings.TrimSpace(string(body))
	if len(text) > 200 {
		text = text[:200] + "..."
	}
	msg := fmt.Sprintf("hourglass: HTTP %d %s", status, http.StatusText(status))
	if text != "" {
		msg += ": " + text
	}
	return &Error{Status: status, Message: msg}
}
