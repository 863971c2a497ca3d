package metrics

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Transactions: what the transaction coordinator completes (event metrics) and, at
// scrape time, the transactions it holds open and how far each partition's last
// stable offset trails its high watermark (state gauges).

// transactionDurationBuckets span a transaction committed every few milliseconds to
// one left open up to transaction.max.timeout.ms (15 min), in seconds.
var transactionDurationBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900}

// txnMetrics are the transaction coordinator's event metrics.
type txnMetrics struct {
	completed *prometheus.CounterVec
	committed prometheus.Counter
	aborted   prometheus.Counter
	duration  prometheus.Histogram
}

func newTxnMetrics() txnMetrics {
	completed := prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "transactions_completed_total",
		Help: "Transactions the coordinator completed (their markers written), by result: commit or abort."}, []string{"result"})
	return txnMetrics{
		completed: completed,
		committed: completed.WithLabelValues("commit"),
		aborted:   completed.WithLabelValues("abort"),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: namespace, Name: "transaction_duration_seconds",
			Help:    "Time from a transaction's first partition added to its completion, markers written.",
			Buckets: transactionDurationBuckets}),
	}
}

func (t txnMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{t.completed, t.duration}
}

// TransactionEnded records a transaction the coordinator completed: committed or
// aborted, and how long it lasted.
func (m *Metrics) TransactionEnded(commit bool, took time.Duration) {
	if m == nil {
		return
	}
	if commit {
		m.txn.committed.Inc()
	} else {
		m.txn.aborted.Inc()
	}
	m.txn.duration.Observe(took.Seconds())
}

// TransactionSource is implemented by a Source that coordinates transactions; the
// collector then exports the transaction gauges.
type TransactionSource interface {
	Transactions() TransactionStats
}

// TransactionStats is a snapshot of the transactions this node coordinates.
type TransactionStats struct {
	// Ongoing are the transactions open (partitions added, not ended); Prepared those
	// ended whose markers are being written.
	Ongoing, Prepared int
	// OldestOngoing is how long the oldest Ongoing transaction has been open.
	OldestOngoing time.Duration
}

// txnDescs are the transaction state gauges.
type txnDescs struct {
	open, oldest, lastStable, unstable *prometheus.Desc
}

func newTxnDescs() txnDescs {
	desc := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(prometheus.BuildFQName(namespace, "", name), help, labels, nil)
	}
	return txnDescs{
		open:   desc("transactions_open", "Transactions this node coordinates that are not complete, by state: Ongoing or Prepare (markers being written).", "state"),
		oldest: desc("transaction_oldest_open_seconds", "How long the oldest Ongoing transaction this node coordinates has been open."),
		lastStable: desc("partition_last_stable_offset",
			"Last stable offset of a partition this broker leads: read_committed consumers read up to it.", "topic", "partition"),
		unstable: desc("partition_unstable_offsets",
			"High watermark minus last stable offset of a partition this broker leads: the offsets read_committed consumers are held back from by open transactions.",
			"topic", "partition"),
	}
}

// describe sends the partition gauges' descriptions, and the coordinator's when the
// source coordinates transactions.
func (d txnDescs) describe(ch chan<- *prometheus.Desc, coordinates bool) {
	ch <- d.lastStable
	ch <- d.unstable
	if coordinates {
		ch <- d.open
		ch <- d.oldest
	}
}

func (d txnDescs) collect(ch chan<- prometheus.Metric, s TransactionStats) {
	gauge(ch, d.open, float64(s.Ongoing), "Ongoing")
	gauge(ch, d.open, float64(s.Prepared), "Prepare")
	gauge(ch, d.oldest, s.OldestOngoing.Seconds())
}

// collectPartition emits the last stable offset gauges of a partition led here.
func (d txnDescs) collectPartition(ch chan<- prometheus.Metric, topic string, p PartitionStats) {
	if !p.Leader {
		return
	}
	partition := strconv.Itoa(int(p.Partition))
	gauge(ch, d.lastStable, float64(p.LastStableOffset), topic, partition)
	gauge(ch, d.unstable, float64(max(p.HighWatermark-p.LastStableOffset, 0)), topic, partition)
}
