package beanstalk_test

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/beanstalk"
	"github.com/hourglass-go/hourglass/task"
)

// BenchmarkServer_Put_Watchers measures a put into a tube while
// connections watching task.MaxWatch tubes each wait in a reserve: each
// put wakes one of them, which takes the job, deletes it and reserves
// again. It reports the puts' median and 99th percentile latency.
func BenchmarkServer_Put_Watchers(b *testing.B) {
	for _, conns := range []int{0, 4} {
		b.Run(fmt.Sprintf("conns=%d", conns), func(b *testing.B) {
			s := start(b, beanstalk.Options{})
			for k := range conns {
				w := dial(b, s.addr)
				var cmds strings.Builder
				for i := range task.MaxWatch - 1 {
					fmt.Fprintf(&cmds, "watch t%d\r\n", (k*7+i)%task.MaxWatch)
				}
				w.send(cmds.String())
				for range task.MaxWatch - 1 {
					w.read(5 * time.Second)
				}
				go func() {
					for {
						w.nc.SetWriteDeadline(time.Now().Add(time.Minute))
						if _, err := w.nc.Write([]byte("reserve\r\n")); err != nil {
							return
						}
						got, err := readReply(w.nc, w.r, time.Minute)
						if err != nil || !strings.HasPrefix(got, "RESERVED ") {
							return
						}
						var id uint64
						fmt.Sscanf(got, "RESERVED %d", &id)
						w.nc.Write([]byte(fmt.Sprintf("delete %d\r\n", id)))
						if _, err := readReply(w.nc, w.r, time.Minute); err != nil {
							return
						}
					}
				}()
			}
			p := dial(b, s.addr)
			var lat []time.Duration
			i := 0
			for b.Loop() {
				i++
				p.must(fmt.Sprintf("use t%d", i%task.MaxWatch), fmt.Sprintf("USING t%d", i%task.MaxWatch))
				t0 := time.Now()
				p.put(0, 0, 60, "x")
				lat = append(lat, time.Since(t0))
			}
			sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-us")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-us")
		})
	}
}
