package main

import (
	"regexp"
	"strconv"
	"testing"

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
		t.Run(strconv.Itoa(c.want), func(t *testing.T) {
			var out logbuf.Buffer
			startServerArgs(t, []string{"--http", "127.0.0.1:0", "--postgres", c.url, "--node", "a"}, out.Logger())
			logged := out.String()
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
		})
	}
}
