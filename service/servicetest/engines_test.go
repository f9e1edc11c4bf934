package servicetest_test

import (
	"context"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/broker"
	"github.com/hourglass-go/hourglass/cluster"
	"github.com/hourglass-go/hourglass/internal/pgtest"
	"github.com/hourglass-go/hourglass/service"
	"github.com/hourglass-go/hourglass/service/servicetest"
	"github.com/hourglass-go/hourglass/store"
	"github.com/hourglass-go/hourglass/store/memstore"
	"github.com/hourglass-go/hourglass/store/pebblestore"
)

var quiet = slog.New(slog.DiscardHandler)

// openBroker returns a broker over st, closed with st when t ends.
func openBroker(t *testing.T, st store.Store) service.Service {
	b, err := broker.Open(st, broker.Config{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		b.Close()
		st.Close()
	})
	return service.New(b)
}

// runAll runs the suites over the services open returns; one service
// stands for both handles of RunPoliciesAcross.
func runAll(t *testing.T, open func(t *testing.T) service.Service) {
	servicetest.Run(t, open)
	t.Run("policies", func(t *testing.T) { servicetest.RunPolicies(t, open) })
	t.Run("policies-order", func(t *testing.T) { servicetest.RunPoliciesOrder(t, open) })
	t.Run("policies-across", func(t *testing.T) {
		servicetest.RunPoliciesAcross(t, func(t *testing.T) (a, b service.Service) {
			s := open(t)
			return s, s
		})
	})
}

// TestMemstore runs the suites over the embedded engine on memory.
func TestMemstore(t *testing.T) {
	runAll(t, func(t *testing.T) service.Service { return openBroker(t, memstore.New()) })
}

// TestPebble runs the suites over the embedded engine on Pebble, as
// `hourglass serve --data` runs it.
func TestPebble(t *testing.T) {
	runAll(t, func(t *testing.T) service.Service {
		st, err := pebblestore.Open(filepath.Join(t.TempDir(), "data"), pebblestore.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return openBroker(t, st)
	})
}

// TestCluster runs the suites over a node of a cluster of two on
// PostgreSQL, the other node owning half the partitions, as `hourglass
// serve --postgres` runs it; RunPoliciesAcross over both nodes.
func TestCluster(t *testing.T) {
	srv := pgtest.Start(t)
	open := func(t *testing.T) (a, b service.Service) {
		url := srv.CreateDatabase(t)
		var nodes []service.Service
		for _, name := range []string{"a", "b"} {
			pool := pgtest.Pool(t, url, 8, cluster.ConfigurePool)
			n, err := cluster.Open(context.Background(), pool, cluster.Options{Node: name, Lease: time.Second, Logger: quiet})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { n.Close() })
			nodes = append(nodes, service.New(n))
		}
		return nodes[0], nodes[1]
	}
	first := func(t *testing.T) service.Service {
		a, _ := open(t)
		return a
	}
	servicetest.Run(t, first)
	t.Run("policies", func(t *testing.T) { servicetest.RunPolicies(t, first) })
	t.Run("policies-order", func(t *testing.T) { servicetest.RunPoliciesOrder(t, first) })
	t.Run("policies-across", func(t *testing.T) { servicetest.RunPoliciesAcross(t, open) })
}

// reopenBroker returns a service over a broker on the store open makes,
// and a reopen that closes the broker (and the store, if closeStore)
// and opens both again: the engine restarted over the same data.
func reopenBroker(t *testing.T, open func() store.Store, closeStore bool) (service.Service, func() service.Service) {
	var b *broker.Broker
	var st store.Store
	start := func() service.Service {
		st = open()
		var err error
		if b, err = broker.Open(st, broker.Config{Logger: quiet}); err != nil {
			t.Fatal(err)
		}
		return service.New(b)
	}
	stop := func() {
		b.Close()
		if closeStore {
			st.Close()
		}
	}
	t.Cleanup(stop)
	return start(), func() service.Service {
		stop()
		return start()
	}
}

// TestDedupe runs the dedupe suite over the embedded engine on memory
// and on Pebble, and over a cluster node, each restarted in the middle.
func TestDedupe(t *testing.T) {
	t.Run("memstore", func(t *testing.T) {
		servicetest.RunDedupe(t, func(t *testing.T) (service.Service, func() service.Service) {
			st := memstore.New()
			return reopenBroker(t, func() store.Store { return st }, false)
		})
	})
	t.Run("pebble", func(t *testing.T) {
		servicetest.RunDedupe(t, func(t *testing.T) (service.Service, func() service.Service) {
			dir := filepath.Join(t.TempDir(), "data")
			return reopenBroker(t, func() store.Store {
				st, err := pebblestore.Open(dir, pebblestore.Options{})
				if err != nil {
					t.Fatal(err)
				}
				return st
			}, true)
		})
	})
	t.Run("cluster", func(t *testing.T) {
		srv := pgtest.Start(t)
		servicetest.RunDedupe(t, func(t *testing.T) (service.Service, func() service.Service) {
			url := srv.CreateDatabase(t)
			var n *cluster.Node
			start := func() service.Service {
				pool := pgtest.Pool(t, url, 8, cluster.ConfigurePool)
				var err error
				if n, err = cluster.Open(context.Background(), pool, cluster.Options{Node: "a", Lease: time.Second, Logger: quiet}); err != nil {
					t.Fatal(err)
				}
				return service.New(n)
			}
			t.Cleanup(func() { n.Close() })
			return start(), func() service.Service {
				n.Close()
				return start()
			}
		})
	})
}

// TestScheduleLimit runs RunScheduleLimit over the embedded engine on
// memory and a cluster node, each with a limit of 3 schedules.
func TestScheduleLimit(t *testing.T) {
	t.Run("memstore", func(t *testing.T) {
		servicetest.RunScheduleLimit(t, 3, func(t *testing.T) service.Service {
			b, err := broker.Open(memstore.New(), broker.Config{Logger: quiet, MaxSchedules: 3})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { b.Close() })
			return service.New(b)
		})
	})
	t.Run("cluster", func(t *testing.T) {
		servicetest.RunScheduleLimit(t, 3, func(t *testing.T) service.Service {
			pool := pgtest.Pool(t, pgtest.Start(t).CreateDatabase(t), 8, cluster.ConfigurePool)
			n, err := cluster.Open(context.Background(), pool, cluster.Options{Node: "a", Lease: time.Second, Logger: quiet, MaxSchedules: 3})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { n.Close() })
			return service.New(n)
		})
	})
}

// TestJobRaces runs RunJobRaces over the embedded engine on memory and
// on Pebble, and over a cluster node.
func TestJobRaces(t *testing.T) {
	openEngine := func(t *testing.T, st store.Store) service.Engine {
		b, err := broker.Open(st, broker.Config{Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			b.Close()
			st.Close()
		})
		return b
	}
	t.Run("memstore", func(t *testing.T) {
		servicetest.RunJobRaces(t, func(t *testing.T) service.Engine { return openEngine(t, memstore.New()) })
	})
	t.Run("pebble", func(t *testing.T) {
		servicetest.RunJobRaces(t, func(t *testing.T) service.Engine {
			st, err := pebblestore.Open(filepath.Join(t.TempDir(), "data"), pebblestore.Options{})
			if err != nil {
				t.Fatal(err)
			}
			return openEngine(t, st)
		})
	})
	t.Run("cluster", func(t *testing.T) {
		srv := pgtest.Start(t)
		servicetest.RunJobRaces(t, func(t *testing.T) service.Engine {
			pool := pgtest.Pool(t, srv.CreateDatabase(t), 8, cluster.ConfigurePool)
			n, err := cluster.Open(context.Background(), pool, cluster.Options{Node: "a", Lease: time.Second, Logger: quiet})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { n.Close() })
			return n
		})
	})
}
