package httpapi

import (
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"strings"
)

// auth requires "Authorization: Bearer TOKEN" when s has a token, and
// answers 401 with a JSON error otherwise, closing the connection: the
// body is left unread, and a client without the token has no use for it.
func (s *Server) auth(h http.Handler) http.Handler {
	if len(s.token) == 0 {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if ok, presented := s.authorized(r); !ok {
			w.Header().Set("WWW-Authenticate", `Bearer realm="hourglass"`)
			closeUnread(w)
			if presented {
				writeError(w, errBadToken)
			} else {
				writeError(w, errNoToken)
			}
			return
		}
		h.ServeHTTP(w, r)
	})
}

// authorized reports whether r carries s's token (always, when s has
// none), and whether it presented one at all. The comparison takes the
// same time whatever the presented token holds: both sides are hashed to
// a fixed length first, so that neither their contents nor the token's
// length leak through timing.
func (s *Server) authorized(r *http.Request) (ok, presented bool) {
	if len(s.token) == 0 {
		return true, false
	}
	want := sha256.Sum256(s.token)
	got, presented := bearer(r.Header.Get("Authorization"))
	sum := sha256.Sum256([]byte(got))
	return subtle.ConstantTimeCompare(sum[:], want[:]) == 1 && presented, presented
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
