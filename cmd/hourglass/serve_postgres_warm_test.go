package main

import (
	"context"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/internal/logbuf"
	"github.com/hourglass-go/hourglass/internal/pgtest"
)

// TestServePostgres_PoolWarm: serve opens postgresPoolMinConns
// connections at start, or the URL's pool_min_conns, and says it is
// ready only once they are warm (cluster/warm.go).
func TestServePostgres_PoolWarm(t *testing.T) {
	url := pgtest.Start(t).CreateDatabase(t)
	for _, c := range []struct {
		url  string
		want int
	}{
		{url, postgresPoolMinConns},
		{url + "&pool_min_conns=2", 2},
	} {
		var out logbuf.Buffer
		log := out.Logger()
		o, _, err := parseServe([]string{"--http", "127.0.0.1:0", "--postgres", c.url, "--node", "a"}, env(nil))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		addr := make(chan string, 1)
		done := make(chan error, 1)
		go func() { done <- serve(ctx, o, log, func(a string) { addr <- a }) }()
		waitReady(t, "http://"+<-addr)
		logged := out.String()
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("serve: %v", err)
			}
		case <-time.After(stopTimeout):
			t.Fatalf("serve did not stop within %v", stopTimeout)
		}
		// The pool's idle connections and more up to its minimum, all
		// warm: "connections=warm/held".
		m := regexp.MustCompile(`pool warmed.* connections=(\d+)/(\d+)`).FindStringSubmatch(logged)
		if m == nil {
			t.Fatalf("%s: ready without the pool warmed:\n%s", c.url, logged)
		}
		warm, _ := strconv.Atoi(m[1])
		held, _ := strconv.Atoi(m[2])
		if warm != held || warm < c.want {
			t.Errorf("%s: ready with %d of %d connections warm, want all and %d or more", c.url, warm, held, c.want)
		}
	}
}
