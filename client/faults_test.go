package client_test

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/broker"
	"github.com/hourglass-go/hourglass/client"
	"github.com/hourglass-go/hourglass/httpapi"
	"github.com/hourglass-go/hourglass/internal/blackhole"
	"github.com/prometheus/client_golang/prometheus"
)

// within runs f and returns how long it took and its error, failing t
// when f has not returned after limit: f is a call that must not hang.
func within(t *testing.T, limit time.Duration, f func() error) (time.Duration, error) {
	t.Helper()
	start := time.Now()
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		return time.Since(start), err
	case <-time.After(limit):
		t.Fatalf("the call has not returned after %s", limit)
		return 0, nil
	}
}

// TestClient_Blackhole calls a server that never answers: each call
// fails at its deadline, Options.Timeout, or its wait plus Timeout for a
// reserve, with the client's own transport or the caller's, and the
// error is transient.
func TestClient_Blackhole(t *testing.T) {
	const timeout, wait = 300 * time.Millisecond, 500 * time.Millisecond
	url := "http://" + blackhole.Start(t).Addr()
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	for _, hc := range []*http.Client{nil, {Transport: tr}} {
		c, err := client.New(url, client.Options{Timeout: timeout, HTTPClient: hc})
		if err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			name  string
			limit time.Duration
			call  func() error
		}{
			{"Get", timeout, func() error { _, err := c.Get(context.Background(), "q", "t"); return err }},
			{"Reserve", wait + timeout, func() error { _, err := c.Reserve(context.Background(), "q", 1, wait); return err }},
			{"ReserveQueues", wait + timeout, func() error {
				_, err := c.ReserveQueues(context.Background(), []string{"q"}, 1, wait)
				return err
			}},
		} {
			// Generous beyond the deadline: the machine may be loaded.
			took, err := within(t, tc.limit+10*time.Second, tc.call)
			if took < tc.limit {
				t.Errorf("%s (own client %v): failed after %s, before its deadline %s: %v", tc.name, hc == nil, took, tc.limit, err)
			}
			if !errors.Is(err, context.DeadlineExceeded) || !client.IsTransient(err) || client.IsPermanent(err) {
				t.Errorf("%s: %v, want a transient deadline error", tc.name, err)
			}
			if msg := err.Error(); !strings.HasPrefix(msg, "hourglass: ") || strings.Count(msg, "hourglass:") != 1 || !strings.Contains(msg, "no answer within "+tc.limit.String()) {
				t.Errorf("%s: %q, want one prefix and the deadline", tc.name, msg)
			}
		}
	}
}

// TestClient_TLSHandshakeTimeout calls a server that accepts
// connections and never answers over https, with a call deadline of a
// minute: the client's own transport gives up the TLS handshake after
// its bound of 5 s instead.
func TestClient_TLSHandshakeTimeout(t *testing.T) {
	c, err := client.New("https://"+blackhole.Start(t).Addr(), client.Options{Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	took, err := within(t, 50*time.Second, func() error { _, err := c.Queues(context.Background()); return err })
	if !strings.Contains(fmt.Sprint(err), "TLS handshake timeout") || !client.IsTransient(err) {
		t.Errorf("after %s: %v, want a transient TLS handshake timeout", took, err)
	}
	t.Logf("failed after %s: %v", took, err)
}

// TestClient_ReserveOutlastsTimeout checks that a reserve's deadline
// leaves it its whole wait: a long poll longer than Options.Timeout
// ends with its empty answer, not an error.
func TestClient_ReserveOutlastsTimeout(t *testing.T) {
	url, stop, err := serve(t.TempDir(), broker.Config{}, "")
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	c, err := client.New(url, client.Options{Timeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	tasks, err := c.Reserve(context.Background(), "q", 1, time.Second)
	if err != nil || len(tasks) != 0 || time.Since(start) < time.Second {
		t.Fatalf("Reserve: %v, %v after %s; want none after its wait of 1s", tasks, err, time.Since(start))
	}
}

// TestClient_ErrorClasses makes calls fail in real ways and checks how
// IsTransient and IsPermanent sort them.
func TestClient_ErrorClasses(t *testing.T) {
	ctx := context.Background()
	const transient, permanent, neither = "transient", "permanent", "neither"
	type outcome struct {
		name  string
		err   error
		class string
	}
	var cases []outcome
	add := func(name string, class string, err error) {
		cases = append(cases, outcome{name, err, class})
	}
	newClient := func(url string, opts client.Options) *client.Client {
		c, err := client.New(url, opts)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}

	// The real server: a wrong token, a stale lease, a server still
	// recovering.
	url, stop, err := serve(t.TempDir(), broker.Config{}, "tok")
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	_, err = newClient(url, client.Options{Token: "wrong"}).Queues(ctx)
	add("401", permanent, err)
	if !errors.Is(err, client.ErrUnauthorized) {
		t.Errorf("401: %v, want ErrUnauthorized", err)
	}
	add("409", neither, newClient(url, client.Options{Token: "tok"}).Ack(ctx, "q", "x", "stale"))
	_, err = newClient(url, client.Options{Token: "tok"}).Get(ctx, "q", "x")
	add("404 of a task", neither, err)
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_, err = newClient(url, client.Options{Token: "tok"}).Queues(cctx)
	add("cancelled", neither, err)
	recovering := httptest.NewServer(httpapi.New(httpapi.Options{Gatherer: prometheus.NewRegistry(), Logger: quiet}))
	defer recovering.Close()
	_, err = newClient(recovering.URL, client.Options{}).Queues(ctx)
	add("503", transient, err)

	// A server on loopback reached under another name, as a DNS
	// rebinding would: 403.
	loopback := httptest.NewServer(httpapi.New(httpapi.Options{Gatherer: prometheus.NewRegistry(), Logger: quiet, LoopbackHost: true}))
	defer loopback.Close()
	rebound := &http.Transport{DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, loopback.Listener.Addr().String())
	}}
	defer rebound.CloseIdleConnections()
	_, err = newClient("http://hourglass.example", client.Options{HTTPClient: &http.Client{Transport: rebound}}).Queues(ctx)
	add("403", permanent, err)
	if !errors.Is(err, client.ErrForbidden) {
		t.Errorf("403: %v, want ErrForbidden", err)
	}

	// A refused connection.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().String()
	l.Close()
	_, err = newClient("http://"+closed, client.Options{}).Queues(ctx)
	add("refused", transient, err)

	// TLS: a certificate the client does not trust, https to a plain
	// HTTP server, https to a server that speaks neither.
	tlsServer := httptest.NewUnstartedServer(http.NotFoundHandler())
	tlsServer.Config.ErrorLog = log.New(io.Discard, "", 0) // its side of the refused handshake
	tlsServer.StartTLS()
	defer tlsServer.Close()
	_, err = newClient(tlsServer.URL, client.Options{}).Queues(ctx)
	add("unknown authority", permanent, err)
	mtls := httptest.NewUnstartedServer(http.NotFoundHandler())
	mtls.Config.ErrorLog = log.New(io.Discard, "", 0)
	mtls.TLS = &tls.Config{ClientAuth: tls.RequireAnyClientCert}
	mtls.StartTLS()
	defer mtls.Close()
	trusting := mtls.Client() // trusts the server's certificate, has none of its own
	defer trusting.CloseIdleConnections()
	_, err = newClient(mtls.URL, client.Options{HTTPClient: trusting}).Queues(ctx)
	add("client certificate required", permanent, err)
	plain := httptest.NewServer(http.NotFoundHandler())
	defer plain.Close()
	_, err = newClient(strings.Replace(plain.URL, "http:", "https:", 1), client.Options{}).Queues(ctx)
	add("https to http", permanent, err)
	other, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	go func() {
		for {
			c, err := other.Accept()
			if err != nil {
				return
			}
			c.Write([]byte("SSH-2.0-OpenSSH_9.6\r\n"))
			c.Close()
		}
	}()
	_, err = newClient("https://"+other.Addr().String(), client.Options{}).Queues(ctx)
	add("https to ssh", permanent, err)

	for _, tc := range cases {
		tr, pe := client.IsTransient(tc.err), client.IsPermanent(tc.err)
		got := neither
		switch {
		case tr && pe:
			got = "both"
		case tr:
			got = transient
		case pe:
			got = permanent
		}
		if tc.err == nil || got != tc.class {
			t.Errorf("%s: %v is %s, want %s", tc.name, tc.err, got, tc.class)
		}
		if tc.err != nil && strings.Count(tc.err.Error(), "hourglass:") != 1 {
			t.Errorf("%s: %q, want one prefix", tc.name, tc.err)
		}
	}
	for _, status := range []int{429, 500, 502, 503, 504} {
		if err := (&client.Error{Status: status}); !client.IsTransient(err) || client.IsPermanent(err) {
			t.Errorf("%d: not transient alone", status)
		}
	}
}
