package httpapi

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
)

// Browsers are clients too: a server on this machine is reachable from
// every page its user opens. Two checks keep pages of other sites out,
// before any route is served:
//
//   - Cross-origin writes. A browser marks each request with where it
//     comes from (Sec-Fetch-Site, or Origin in older ones), and
//     net/http's CrossOriginProtection refuses a POST, PUT or DELETE that
//     comes from another origin, a form or a fetch with Content-Type
//     text/plain included, which no CORS preflight stops, unless the
//     origin is one of Options.AllowOrigins. GET, HEAD and OPTIONS pass:
//     none changes anything, and a page cannot read their answers
//     without CORS headers, which the server never sends. Clients that
//     are not browsers (curl, package client) send neither header and
//     pass; so does the dashboard, served from the same origin.
//   - DNS rebinding. A page of evil.example can make its own name resolve
//     to 127.0.0.1, and then read the server's answers as its own origin.
//     Its requests still name evil.example in Host, so a server on a
//     loopback address (Options.LoopbackHost) refuses a Host that is not
//     a loopback address, "localhost" or a name under it, or a name given
//     in Options.Hosts.
//
// Both answer 403 with a JSON error.

// errCrossOrigin and errHost are the 403s of the two checks.
var (
	errCrossOrigin = &wireError{http.StatusForbidden, "hourglass: cross-origin request refused: give the page's origin to --allow-origin to allow it"}
	errHost        = &wireError{http.StatusForbidden, "hourglass: Host is not a loopback name or address, on a server that listens on loopback only (a DNS rebinding?)"}
)

// newOriginCheck returns the cross-origin check with origins trusted
// (each "scheme://host[:port]").
func newOriginCheck(origins []string) (*http.CrossOriginProtection, error) {
	c := http.NewCrossOriginProtection()
	for _, o := range origins {
		if err := c.AddTrustedOrigin(o); err != nil {
			return nil, fmt.Errorf("hourglass: origin %q: want scheme://host[:port], like http://localhost:3000", o)
		}
	}
	return c, nil
}

// CheckOrigins reports whether each of origins is an origin
// Options.AllowOrigins takes, and which is not.
func CheckOrigins(origins []string) error {
	_, err := newOriginCheck(origins)
	return err
}

// CheckBrowsers returns h behind the checks of this file, for the routes
// a process serves beside s (the dashboard's page and assets); s applies
// them to its own routes already.
func (s *Server) CheckBrowsers(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := s.checkBrowser(r); err != nil {
			refuseBody(w, err)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// checkBrowser applies both checks to r.
func (s *Server) checkBrowser(r *http.Request) error {
	if s.loopbackHost && !s.hostAllowed(r.Host) {
		return errHost
	}
	if err := s.origins.Check(r); err != nil {
		return errCrossOrigin
	}
	return nil
}

// hostAllowed reports whether host (a Host header: a name or address,
// and perhaps a port) names this machine's loopback: what a DNS
// rebinding cannot forge. An empty Host (HTTP/1.0) is allowed: browsers
// always send one.
func (s *Server) hostAllowed(host string) bool {
	if host == "" {
		return true
	}
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	} else {
		host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	}
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true // RFC 6761: browsers resolve these to loopback themselves
	}
	if ip := net.ParseIP(host); ip != nil {
		return ip.IsLoopback()
	}
	for _, h := range s.hosts {
		if strings.EqualFold(h, host) {
			return true
		}
	}
	return false
}

// errOriginOption is New's panic for a bad Options.AllowOrigins.
var errOriginOption = errors.New("httpapi: New: bad Options.AllowOrigins (check them with CheckOrigins)")
