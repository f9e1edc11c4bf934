package cluster_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/cluster"
	"github.com/hourglass-go/hourglass/internal/pgtest"
	"github.com/hourglass-go/hourglass/task"
)

// BenchmarkFlush runs the owner's flush statements over k due timers at
// a time, k = 1, 5 and 20, on one connection, with a waiter on the queue
// so that every task is handed over, as on issue 40's 1M row (about 5
// timers a flush there): the whole statement (Whole: sqlFlush, which a
// flush runs for leases ending) and the common one (Due: sqlFlushDue,
// which a flush of delayed tasks alone runs). Beside the wall time a flush it
// reports backend-µs/flush: the CPU time (user and system) of the
// PostgreSQL backend that ran them, from /proc, divided by the flushes:
// the server's work a flush, which a wall time on a loaded machine does
// not show. /proc's CPU time moves in ticks (10 ms), so the figure is
// only meaningful over many flushes (-benchtime 2000x or more). The
// tasks are put, all in one queue with a delay of a millisecond, before
// the timer starts; each flush takes the next k, with the partitions
// they are in, as the flusher passes them.
func BenchmarkFlush(b *testing.B) {
	srv := pgtest.Start(b, pgtest.Set("max_connections", "400"))
	for _, k := range []int{1, 5, 20} {
		for _, st := range []struct {
			name string
			sql  string
			args []any
		}{
			{"Whole", cluster.SQLFlush, []any{task.LeaseExpired, true}},
			{"Due", cluster.SQLFlushDue, nil},
		} {
			benchmarkFlush(b, srv, k, st.name, st.sql, st.args)
		}
	}
}

// benchmarkFlush is BenchmarkFlush's run of the flush statement sql (its
// arguments after the hand-over's, args, then a lease token) over k
// timers a flush.
func benchmarkFlush(b *testing.B, srv *pgtest.Server, k int, name, sql string, args []any) {
	b.Run(fmt.Sprintf("%s/Timers_%d", name, k), func(b *testing.B) {
		ctx := context.Background()
		n := startNode(b, srv.CreateDatabase(b), "a", func(o *cluster.Options) { o.Lease = time.Minute })
		n.hooks.Pause()
		defer n.hooks.Resume()
		conn, err := n.pool.Acquire(ctx)
		if err != nil {
			b.Fatal(err)
		}
		defer conn.Release()
		var pid int
		if err := conn.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
			b.Fatal(err)
		}
		epochs := n.Owned()
		var partitions int64
		if err := conn.QueryRow(ctx, "SELECT partitions FROM hourglass_meta").Scan(&partitions); err != nil {
			b.Fatal(err)
		}
		var jobs []int64
		var parts [][]int32
		var eps [][]int64
		left := 0
		fill := func() {
			const batch = 2000
			jobs = jobs[:0]
			for len(jobs) < batch*k {
				reqs := make([]task.PutRequest, task.MaxBatch)
				for i := range reqs {
					reqs[i].Delay = time.Millisecond
				}
				for _, r := range n.PutBatch(ctx, "q", reqs) {
					if r.Err != nil {
						b.Fatal(r.Err)
					}
					jobs = append(jobs, int64(r.Task.JobID))
				}
			}
			parts, eps = parts[:0], eps[:0]
			for i := 0; i+k <= len(jobs); i += k {
				seen := map[int32]bool{}
				var ps []int32
				var es []int64
				for _, j := range jobs[i : i+k] {
					p := int32(j % partitions)
					if e, ok := epochs[int(p)]; ok && !seen[p] {
						seen[p] = true
						ps, es = append(ps, p), append(es, e)
					}
				}
				parts, eps = append(parts, ps), append(eps, es)
			}
			left = len(parts)
			time.Sleep(10 * time.Millisecond) // all due by the database's clock
		}
		fill()
		cpu0 := backendCPU(b, pid)
		b.ResetTimer()
		i := 0
		for b.Loop() {
			if left == 0 {
				b.StopTimer()
				cpu1 := backendCPU(b, pid)
				fill()
				cpu0 += backendCPU(b, pid) - cpu1
				i = 0
				b.StartTimer()
			}
			rows, err := conn.Query(ctx, sql, append(append([]any{"a", parts[i], eps[i], jobs[i*k : (i+1)*k],
				[]string{"q"}, []int32{int32(k)}}, args...), "0123456789abcdef")...)
			if err != nil {
				b.Fatal(err)
			}
			handed := 0
			for rows.Next() {
				// The row's kind follows the task's 23 columns.
				if vals, err := rows.Values(); err == nil && len(vals) > 23 && vals[23] == int32(4) {
					handed++
				}
			}
			rows.Close()
			if err := rows.Err(); err != nil {
				b.Fatal(err)
			}
			if handed != k {
				b.Fatalf("flush %d handed %d tasks over, want %d", i, handed, k)
			}
			i++
			left--
		}
		b.StopTimer()
		b.ReportMetric(float64(backendCPU(b, pid)-cpu0)/float64(time.Microsecond)/float64(b.N), "backend-µs/flush")
	})
}

// backendCPU returns the CPU time (user and system) of the local process
// pid, from /proc/PID/stat, in ticks of 10 ms.
func backendCPU(b *testing.B, pid int) time.Duration {
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		b.Fatalf("the backend's CPU time: %v", err)
	}
	s := string(raw)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	user, _ := strconv.ParseInt(f[11], 10, 64)
	sys, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(user+sys) * 10 * time.Millisecond
}
