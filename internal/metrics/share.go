package metrics

import (
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
)

// Share groups (KIP-932): what ShareFetch hands out and what members acknowledge,
// the acquisition locks that expire, the fetches that wait for records (event
// metrics), and at scrape time the records each share partition loaded here has in
// flight (state gauges).

// shareMetrics are the share groups' event metrics; the label values of acknowledged
// and fetchWaits are resolved here, so their recorders only add.
type shareMetrics struct {
	acquired                              *prometheus.CounterVec // by topic, resolved through Metrics.shareTopics
	acknowledged                          *prometheus.CounterVec
	accepted, released, rejected, renewed prometheus.Counter
	lockTimeouts                          prometheus.Counter
	fetchWaits                            *prometheus.CounterVec
	waitedRecords, waitedEmpty            prometheus.Counter
}

func newShareMetrics() shareMetrics {
	counterVec := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: name, Help: help}, labels)
	}
	acknowledged := counterVec("share_records_acknowledged_total",
		"Records share-group members acknowledged, counted once the share partition's state is written, by type: accept, release, reject or renew.", "type")
	waits := counterVec("share_fetch_waits_total",
		"ShareFetch requests that acquired nothing at first and waited up to their MaxWaitMillis, by how the wait ended: with records, or empty.", "result")
	return shareMetrics{
		acquired: counterVec("share_records_acquired_total",
			"Records of the topic handed to share-group members by ShareFetch, each delivery counted (redeliveries included).", "topic"),
		acknowledged: acknowledged,
		accepted:     acknowledged.WithLabelValues("accept"),
		released:     acknowledged.WithLabelValues("release"),
		rejected:     acknowledged.WithLabelValues("reject"),
		renewed:      acknowledged.WithLabelValues("renew"),
		lockTimeouts: prometheus.NewCounter(prometheus.CounterOpts{Namespace: namespace, Name: "share_lock_timeouts_total",
			Help: "Records whose acquisition lock expired before their member acknowledged them: released for redelivery, or archived at the delivery count limit."}),
		fetchWaits:    waits,
		waitedRecords: waits.WithLabelValues("records"),
		waitedEmpty:   waits.WithLabelValues("empty"),
	}
}

func (s shareMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{s.acquired, s.acknowledged, s.lockTimeouts, s.fetchWaits}
}

// ShareAcquired records records of topic handed to a share-group member by one
// ShareFetch (one call per partition answered).
func (m *Metrics) ShareAcquired(topic string, records int) {
	if m == nil || records <= 0 {
		return
	}
	if v, ok := m.shareTopics.Load(topic); ok {
		addInt(v.(*counterSeries).counter, records)
		return
	}
	// Clone: the cache outlives the caller's string.
	key := strings.Clone(topic)
	v, _ := m.shareTopics.LoadOrStore(key, &counterSeries{counter: m.share.acquired.WithLabelValues(labelValue(key))})
	addInt(v.(*counterSeries).counter, records)
}

// ShareAcknowledged records the records whose acknowledgements were applied, by
// type, once the share partition's state holding them was written. Gap
// acknowledgements are not counted.
func (m *Metrics) ShareAcknowledged(accepted, released, rejected, renewed int) {
	if m == nil {
		return
	}
	addInt(m.share.accepted, accepted)
	addInt(m.share.released, released)
	addInt(m.share.rejected, rejected)
	addInt(m.share.renewed, renewed)
}

// ShareLocksExpired records records whose acquisition lock expired, once the share
// partition's state holding the expiry was written.
func (m *Metrics) ShareLocksExpired(records int) {
	if m == nil {
		return
	}
	addInt(m.share.lockTimeouts, records)
}

// ShareFetchWaited records a ShareFetch that acquired nothing at first and waited:
// gotRecords is whether the wait ended with records.
func (m *Metrics) ShareFetchWaited(gotRecords bool) {
	if m == nil {
		return
	}
	if gotRecords {
		m.share.waitedRecords.Inc()
	} else {
		m.share.waitedEmpty.Inc()
	}
}

// ShareSource is implemented by a Source that serves share partitions; the collector
// then exports their in-flight gauges.
type ShareSource interface {
	// SharePartitions returns one entry per share partition loaded in this broker's
	// memory.
	SharePartitions() []SharePartitionStats
}

// SharePartitionStats is a snapshot of one share partition: a share group's view of
// one topic partition this broker leads.
type SharePartitionStats struct {
	Group     string
	Topic     string
	Partition int32
	// InFlight is the width of the share partition's window (its end offset minus
	// its start offset): the records it holds the state of, which count against
	// the group's share.partition.max.record.locks.
	InFlight int64
}

// shareDescs are the share partitions' state gauges.
type shareDescs struct {
	inFlight *prometheus.Desc
}

func newShareDescs() shareDescs {
	return shareDescs{
		inFlight: prometheus.NewDesc(prometheus.BuildFQName(namespace, "", "share_partition_in_flight_records"),
			"Records in flight in a share partition loaded on this broker: its window's width, end offset minus start offset (what counts against the group's share.partition.max.record.locks).",
			[]string{"group", "topic", "partition"}, nil),
	}
}

// shareKey keys the per-scrape duplicate check of share partitions.
type shareKey struct {
	group string
	topicPartition
}

func (d shareDescs) collect(ch chan<- prometheus.Metric, parts []SharePartitionStats) {
	seen := make(map[shareKey]bool, len(parts))
	for _, p := range parts {
		k := shareKey{labelValue(p.Group), topicPartition{labelValue(p.Topic), p.Partition}}
		if seen[k] {
			continue // a duplicate would fail the whole scrape
		}
		seen[k] = true
		gauge(ch, d.inFlight, float64(p.InFlight), k.group, k.topic, strconv.Itoa(int(p.Partition)))
	}
}
