package bench

import (
	"path/filepath"
)

// keysEngine is an engine the keys scenario's throughput and lateness
// rows run on: the embedded store (nodes 0) or one cluster node, of the
// binary bin ("": serveCommand's).
type keysEngine struct {
	structure string
	nodes     int
	bin       string
}

// keysEnginesRun returns the engines of a round, as Keys says: the
// embedded store, then one cluster node of each build in turn (a row
// "1 node DIR" each, DIR the build's directory), or of this one.
func keysEnginesRun() []keysEngine {
	var out []keysEngine
	if Keys.Engine != "cluster" {
		out = append(out, keysEngine{beanstalkHourglass, 0, ""})
	}
	if Keys.Engine == "embedded" {
		return out
	}
	if len(Keys.Builds) == 0 {
		return append(out, keysEngine{"1 node", 1, ""})
	}
	for _, b := range Keys.Builds {
		out = append(out, keysEngine{"1 node " + filepath.Base(filepath.Dir(b)), 1, b})
	}
	return out
}

// keysHopMetrics are the hops a cluster node times of a task made ready
// by its timer (cluster/metrics.go): in a small-key row, the small
// tasks' alone (the flood's are put ready), from due to the flush that
// made them ready; the rest of the server's part (server p99) is the
// wait for a reserve that takes them.
var keysHopMetrics = []struct{ metric, column string }{
	{"hourglass_cluster_hop_due_to_fired_seconds", "due→fired"},
	{"hourglass_cluster_hop_due_to_flushed_seconds", "due→flushed"},
}

// keysHop is a quantile of a hop, with its column.
type keysHop struct {
	column string
	v      float64
}

// keysHops reads the p50 and p99 of keysHopMetrics from the cluster
// nodes of a row (none for the embedded store, nodes 0, or a build that
// does not serve them). Read after the row, before the nodes stop.
func keysHops(procs []*serveProcess, nodes int) []keysHop {
	if nodes == 0 {
		return nil
	}
	var out []keysHop
	for _, h := range keysHopMetrics {
		var sum []bucket
		for _, p := range procs {
			bs, err := scrapeHistogram(p, h.metric)
			if err != nil || bs == nil {
				return out
			}
			sum = addBuckets(sum, bs)
		}
		if sum != nil && sum[len(sum)-1].count > 0 {
			out = append(out, keysHop{h.column + " p50", quantile(sum, 0.5)}, keysHop{h.column + " p99", quantile(sum, 0.99)})
		}
	}
	return out
}
