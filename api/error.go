package api

// Error is the body of every error answer: {"error":"hourglass: ..."}.
// The HTTP status says what kind of error it is: 400 bad input, 401 no
// or wrong token, 404 no such task or schedule, 409 stale lease or wrong
// state, 413 body or payload too large, 503 not ready or stopping.
type Error struct {
	Error string `json:"error"`
}
