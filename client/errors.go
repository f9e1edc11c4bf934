package client

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net"
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
	// ErrForbidden: 403, the server refuses the request's Host or Origin
	// (a server on loopback reached by another name, a browser's page of
	// another origin).
	ErrForbidden = errors.New("hourglass: forbidden")
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
	http.StatusForbidden:             ErrForbidden,
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

// transportError is a call's failure on the way: the request did not get
// through or its answer did not come back whole (the connection refused,
// reset or timed out, the call's deadline). Its message is the call's,
// with the hourglass prefix; err is the transport's error.
type transportError struct {
	msg string
	err error
}

func (e *transportError) Error() string { return e.msg }
func (e *transportError) Unwrap() error { return e.err }

// IsTransient reports whether err, a call's error, may go away if the
// same call is made again later: the server or a proxy answered 429,
// 500, 502, 503 (the server recovers or stops) or 504, or the request or
// its answer did not get through (a refused or reset connection, a
// timeout, the call's own deadline of [Options.Timeout] included). It is
// false for the [IsPermanent] errors, for a context cancelled, and for the
// other error answers, which are the call's own fault. A caller whose
// context has ended should stop retrying whatever it says.
func IsTransient(err error) bool {
	var e *Error
	if errors.As(err, &e) {
		switch e.Status {
		case http.StatusTooManyRequests, http.StatusInternalServerError, http.StatusBadGateway,
			http.StatusServiceUnavailable, http.StatusGatewayTimeout:
			return true
		}
		return false
	}
	var t *transportError
	return errors.As(err, &t) && !errors.Is(err, context.Canceled) && !IsPermanent(err)
}

// IsPermanent reports whether err, a call's error, will come back on
// every call until the client's configuration or the server's changes,
// so that retrying is pointless: a 401 (the token is missing or wrong), a
// 403 ([ErrForbidden]), a server certificate the client does not trust or
// that is not for the URL's host, a TLS handshake either side aborts (a
// client certificate the server wants or refuses), an https URL of a
// server that does not speak TLS, or an address that cannot be dialled
// at all (a malformed host or port). A worker ends on them.
func IsPermanent(err error) bool {
	var e *Error
	if errors.As(err, &e) {
		return e.Status == http.StatusUnauthorized || e.Status == http.StatusForbidden
	}
	var t *transportError
	if !errors.As(err, &t) {
		return false
	}
	var (
		verify *tls.CertificateVerificationError
		alert  tls.AlertError
		header tls.RecordHeaderError
		op     *net.OpError
		addr   *net.AddrError
	)
	return errors.As(err, &verify) || errors.As(err, &alert) || errors.As(err, &header) ||
		errors.Is(err, http.ErrSchemeMismatch) || errors.As(err, &addr) ||
		// The server's TLS alert (a client certificate it wants or
		// refuses, a version or cipher it does not take): crypto/tls
		// reports it so, with no exported type.
		errors.As(err, &op) && op.Op == "remote error"
}
