// Package testserver runs the real HTTP API in a test's process:
// httpapi's handler over service.New over a broker, on a memory store or
// a Pebble store, served on loopback by httptest. The client's, the
// worker's and httpapi's own tests and benchmarks start their servers
// with it.
package testserver

import (
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hourglass-go/hourglass/broker"
	"github.com/hourglass-go/hourglass/httpapi"
	"github.com/hourglass-go/hourglass/service"
	"github.com/hourglass-go/hourglass/store/memstore"
	"github.com/hourglass-go/hourglass/store/pebblestore"
)

// Options say what to serve. The zero Options serve a broker on a memory
// store with httpapi's defaults, logging nothing.
type Options struct {
	// Dir, when set, holds a Pebble store (with Pebble's options) under
	// the broker; otherwise the broker is on a memory store.
	Dir    string
	Pebble pebblestore.Options
	// Broker is the broker's configuration; its Logger is set to Logger.
	Broker broker.Config
	// API is the handler's options; its Logger is set to Logger, and its
	// Gatherer to a registry of its own when nil.
	API httpapi.Options
	// Wrap, when set, wraps the handler (a test's faults).
	Wrap func(http.Handler) http.Handler
	// Listener, when set, is served instead of a new loopback port.
	Listener net.Listener
	// Logger receives the store's, the broker's and the handler's logs;
	// nil: none.
	Logger *slog.Logger
}

// Server is a running server. Close stops it.
type Server struct {
	// URL is the server's, http://127.0.0.1:PORT.
	URL    string
	Broker *broker.Broker

	api   *httpapi.Server
	http  *httptest.Server
	close func() error // the store's; nil for a memory store
}

// Start starts a server as o says.
func Start(o Options) (*Server, error) {
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	s := &Server{}
	var b *broker.Broker
	var err error
	o.Broker.Logger = o.Logger
	if o.Dir != "" {
		o.Pebble.Logger = o.Logger
		st, err := pebblestore.Open(o.Dir, o.Pebble)
		if err != nil {
			return nil, err
		}
		if b, err = broker.Open(st, o.Broker); err != nil {
			st.Close()
			return nil, err
		}
		s.close = st.Close
	} else if b, err = broker.Open(memstore.New(), o.Broker); err != nil {
		return nil, err
	}
	s.Broker = b
	o.API.Logger = o.Logger
	if o.API.Gatherer == nil {
		o.API.Gatherer = prometheus.NewRegistry()
	}
	s.api = httpapi.New(o.API)
	s.api.SetService(service.New(b))
	var h http.Handler = s.api
	if o.Wrap != nil {
		h = o.Wrap(h)
	}
	s.http = httptest.NewUnstartedServer(h)
	if o.Listener != nil {
		s.http.Listener.Close()
		s.http.Listener = o.Listener
	}
	s.http.Start()
	s.URL = s.http.URL
	return s, nil
}

// Close drains the handler, closes the HTTP server (waiting for the
// requests under way), then the broker and its store.
func (s *Server) Close() {
	s.api.Drain()
	s.http.Close()
	s.Broker.Close()
	if s.close != nil {
		s.close()
	}
}
