package cluster_test

import (
	"context"
	"testing"

	"github.com/hourglass-go/hourglass/cluster"
	"github.com/hourglass-go/hourglass/internal/pgtest"
)

// TestConfigurePool: a pool set up by ConfigurePool plans the node's
// statements generically, unless its connection string says otherwise.
func TestConfigurePool(t *testing.T) {
	url := server(t).CreateDatabase(t)
	for _, c := range []struct{ url, want string }{
		{url, "force_generic_plan"},
		{url + "&plan_cache_mode=auto", "auto"},
	} {
		pool := pgtest.Pool(t, c.url, 2, cluster.ConfigurePool)
		var got string
		if err := pool.QueryRow(context.Background(), "SHOW plan_cache_mode").Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got != c.want {
			t.Errorf("%s: plan_cache_mode = %q, want %q", c.url, got, c.want)
		}
	}
}
