package pebblestore

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Collector returns a Prometheus collector of Pebble's state behind the
// store, read from Pebble's metrics at each scrape: the compactions
// running (compactions compete with requests for the CPU: a bulk load
// keeps one running for a while after it), the bytes Pebble estimates it
// would have to compact to bring its levels into shape (a heuristic that
// can stay at hundreds of MB with nothing running), the bytes its flushes
// and compactions have written (their ratio to the bytes committed is the
// write amplification; package doc, "Layout"), and the block cache's
// size, hits and misses. Safe for concurrent use; a scrape after
// Close reports nothing.
func (s *Store) Collector() prometheus.Collector { return storeCollector{s} }

var (
	descCompactionsRunning = prometheus.NewDesc("hourglass_store_compactions_running",
		"Pebble compactions in progress.", nil, nil)
	descCompactionDebt = prometheus.NewDesc("hourglass_store_compaction_debt_bytes",
		"Bytes Pebble estimates it must compact to bring its levels into shape.", nil, nil)
	descFlushed = prometheus.NewDesc("hourglass_store_flushed_bytes_total",
		"Bytes of tables Pebble's memtable flushes have written.", nil, nil)
	descCompacted = prometheus.NewDesc("hourglass_store_compacted_bytes_total",
		"Bytes of tables Pebble's compactions have written.", nil, nil)
	descCacheBytes = prometheus.NewDesc("hourglass_store_block_cache_bytes",
		"Bytes of blocks in Pebble's block cache.", nil, nil)
	descCacheHits = prometheus.NewDesc("hourglass_store_block_cache_hits_total",
		"Reads of a block found in Pebble's block cache.", nil, nil)
	descCacheMisses = prometheus.NewDesc("hourglass_store_block_cache_misses_total",
		"Reads of a block not in Pebble's block cache, read from its file.", nil, nil)
)

type storeCollector struct{ s *Store }

func (c storeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descCompactionsRunning, descCompactionDebt, descFlushed, descCompacted, descCacheBytes, descCacheHits, descCacheMisses} {
		ch <- d
	}
}

func (c storeCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.s
	s.closeMu.RLock()
	defer s.closeMu.RUnlock()
	if s.closed {
		return
	}
	m := s.db.Metrics()
	ch <- prometheus.MustNewConstMetric(descCompactionsRunning, prometheus.GaugeValue, float64(m.Compact.NumInProgress))
	ch <- prometheus.MustNewConstMetric(descCompactionDebt, prometheus.GaugeValue, float64(m.Compact.EstimatedDebt))
	var flushed, compacted uint64
	for i := range m.Levels {
		flushed += m.Levels[i].TableBytesFlushed
		compacted += m.Levels[i].TableBytesCompacted
	}
	ch <- prometheus.MustNewConstMetric(descFlushed, prometheus.CounterValue, float64(flushed))
	ch <- prometheus.MustNewConstMetric(descCompacted, prometheus.CounterValue, float64(compacted))
	ch <- prometheus.MustNewConstMetric(descCacheBytes, prometheus.GaugeValue, float64(m.BlockCache.Size))
	ch <- prometheus.MustNewConstMetric(descCacheHits, prometheus.CounterValue, float64(m.BlockCache.Hits))
	ch <- prometheus.MustNewConstMetric(descCacheMisses, prometheus.CounterValue, float64(m.BlockCache.Misses))
}
