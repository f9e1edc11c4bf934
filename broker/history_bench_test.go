package broker_test

import (
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/broker"
	"github.com/hourglass-go/hourglass/store/pebblestore"
)

// BenchmarkBroker_ReserveAckHistory measures reserve+ack round trips on
// Pebble from 64 goroutines (whose commits share group commits and WAL
// syncs, as a server's clients do) on a full ready queue, with the
// history off (Config.History negative) and kept (an hour): with
// -benchmem, the difference is what the history costs a round trip (an
// attempt record, a Finished record's three keys, their encoding).
func BenchmarkBroker_ReserveAckHistory(b *testing.B) {
	for _, keep := range []time.Duration{-1, time.Hour} {
		name := "off"
		if keep > 0 {
			name = "on"
		}
		b.Run("history="+name, func(b *testing.B) {
			pst, err := pebblestore.Open(b.TempDir(), pebblestore.Options{Logger: quiet})
			if err != nil {
				b.Fatal(err)
			}
			defer pst.Close()
			br, err := broker.Open(pst, broker.Config{Logger: quiet, History: keep})
			if err != nil {
				b.Fatal(err)
			}
			defer br.Close()
			fill(b, br, (b.N+999)/1000*1000, 0)
			b.ReportAllocs()
			b.ResetTimer()
			b.SetParallelism(32) // 64 goroutines on 2 CPUs
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if !reserveAck(b, br) {
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "trips/s")
		})
	}
}
