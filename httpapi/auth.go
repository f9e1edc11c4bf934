package httpapi

import (
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"strings"
)

// auth requires "Authorization: Bearer TOKEN" when s has a token, and
// answers 401 with a JSON error otherwise. The comparison takes the same
// time whatever the presented token holds: both sides are hashed to a
// fixed length first, so that neither their contents nor the token's
// length leak through timing.
func (s *Server) auth(h http.Handler) http.Handler {
	if len(s.token) == 0 {
		return h
	}
	want := sha256.Sum256(s.token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, ok := bearer(r.Header.Get("Authorization"))
		sum := sha256.Sum256([]byte(got))
		if subtle.ConstantTimeCompare(sum[:], want[:]) != 1 || !ok {
			w.Header().Set("WWW-Authenticate", `Bearer realm="hourglass"`)
			if ok {
				writeError(w, errBadToken)
			} else {
				writeError(w, errNoToken)
			}
			return
		}
		h.ServeHTTP(w, r)
	})
}

// bearer returns the token of an Authorization header value of the
// Bearer scheme (RFC 6750; the scheme name is case-insensitive).
func bearer(header string) (string, bool) {
	scheme, token, ok := strings.Cut(header, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}
