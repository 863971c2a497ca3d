package metrics

import (
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Sizes of the dense caches. Keys, versions and codes outside them still count; they
// are resolved on every call instead of cached.
const (
	apiKeyLimit     = 128 // Kafka's api keys are below 100
	apiVersionLimit = 32  // no api has reached version 20
	errorCodeLimit  = 256 // codes -1 .. 254, stored at code+1
)

// requestLatencyBuckets spans a fast in-memory request (100 µs) to a long-polling
// Fetch or a slow acks=all Produce (tens of seconds), in seconds.
var requestLatencyBuckets = []float64{
	0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
	0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30,
}

// topicCounters are the resolved per-topic children of the byte and record counters.
type topicCounters struct {
	bytesIn, recordsIn, bytesOut, recordsOut prometheus.Counter
}

// requestSeries are the resolved children for one api key and version.
type requestSeries struct {
	count          prometheus.Counter
	latency        prometheus.Observer
	bytesIn, bytes prometheus.Counter // request bytes, response bytes
}

// counterSeries boxes one resolved counter so it fits an atomic.Pointer.
type counterSeries struct{ counter prometheus.Counter }

func (m *Metrics) defineEventMetrics() {
	counterVec := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: name, Help: help}, labels)
	}
	counter := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Namespace: namespace, Name: name, Help: help})
	}
	m.bytesIn = counterVec("topic_bytes_in_total",
		"Record batch bytes appended to the topic's logs by Produce requests.", "topic")
	m.bytesOut = counterVec("topic_bytes_out_total",
		"Record batch bytes of the topic returned to consumer Fetch requests (replica fetches excluded).", "topic")
	m.recordsIn = counterVec("topic_records_in_total",
		"Records appended to the topic's logs by Produce requests.", "topic")
	m.recordsOut = counterVec("topic_records_out_total",
		"Records of the topic returned to consumer Fetch requests, where the broker counted them.", "topic")
	m.requests = counterVec("requests_total",
		"Requests answered, by API and API version.", "api", "version")
	m.requestBytes = counterVec("request_bytes_total",
		"Bytes of request frames received, size prefix included, by API.", "api")
	m.responseBytes = counterVec("response_bytes_total",
		"Bytes of response frames sent, size prefix included, by API.", "api")
	m.requestLatency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: namespace,
		Name:      "request_duration_seconds",
		Help:      "Time from a request frame being read to its response being handed to the socket, by API and API version.",
		Buckets:   requestLatencyBuckets,
	}, []string{"api", "version"})
	m.produceErrors = counterVec("produce_errors_total",
		"Partition-level errors returned in Produce responses, by Kafka error name.", "error")
	m.fetchErrors = counterVec("fetch_errors_total",
		"Partition-level errors returned in Fetch responses, by Kafka error name.", "error")
	m.rebalances = counterVec("group_rebalances_total",
		"Rebalances started by the group coordinator, by group.", "group")
	m.isrShrinks = counter("isr_shrinks_total",
		"Times a replica was removed from a partition's in-sync replica set.")
	m.isrExpands = counter("isr_expands_total",
		"Times a replica was added back to a partition's in-sync replica set.")
	m.connThrottles = counterVec("connection_throttles_total",
		"Connections a connection-rate quota delayed (quota broker or listener: max.connection.creation.rate) or closed (quota ip: connection_creation_rate), by listener.", "listener", "quota")
	m.connThrottleSeconds = counterVec("connection_throttle_seconds_total",
		"Time those connections were delayed (broker, listener) or held before being closed (ip), by listener.", "listener", "quota")
}

// ConnectionThrottled records a connection a connection-rate quota delayed or
// closed (server.Config.ConnectionThrottled).
func (m *Metrics) ConnectionThrottled(listener, quota string, d time.Duration) {
	if m == nil {
		return
	}
	m.connThrottles.WithLabelValues(listener, quota).Inc()
	m.connThrottleSeconds.WithLabelValues(listener, quota).Add(d.Seconds())
}

// RequestDone records one answered request: it implements server.Observer.
func (m *Metrics) RequestDone(key, version int16, d time.Duration, bytesIn, bytesOut int) {
	if m == nil {
		return
	}
	s := m.requestSeriesFor(key, version)
	s.count.Inc()
	s.latency.Observe(d.Seconds())
	addInt(s.bytesIn, bytesIn)
	addInt(s.bytes, bytesOut)
}

func (m *Metrics) requestSeriesFor(key, version int16) *requestSeries {
	cacheable := key >= 0 && key < apiKeyLimit && version >= 0 && version < apiVersionLimit
	if cacheable {
		if s := m.apis[key][version].Load(); s != nil {
			return s
		}
	}
	api := kmsg.NameForKey(key)
	v := strconv.Itoa(int(version))
	s := &requestSeries{
		count:   m.requests.WithLabelValues(api, v),
		latency: m.requestLatency.WithLabelValues(api, v),
		bytesIn: m.requestBytes.WithLabelValues(api),
		bytes:   m.responseBytes.WithLabelValues(api),
	}
	if cacheable {
		// Two racing first calls resolve the same children; either pointer is right.
		m.apis[key][version].Store(s)
	}
	return s
}

// ProducedBatch records a record batch appended to topic by a Produce request.
func (m *Metrics) ProducedBatch(topic string, records, bytes int) {
	if m == nil {
		return
	}
	t := m.topicCountersFor(topic)
	addInt(t.recordsIn, records)
	addInt(t.bytesIn, bytes)
}

// FetchedBytes records bytes of topic returned to a consumer's Fetch request; call it
// not for follower replicas' fetches (Kafka's BytesOutPerSec excludes them). records
// may be 0 when the broker did not count them (zero-copy reads do not parse batches).
func (m *Metrics) FetchedBytes(topic string, records, bytes int) {
	if m == nil {
		return
	}
	t := m.topicCountersFor(topic)
	addInt(t.recordsOut, records)
	addInt(t.bytesOut, bytes)
}

func (m *Metrics) topicCountersFor(topic string) *topicCounters {
	if v, ok := m.topics.Load(topic); ok {
		return v.(*topicCounters)
	}
	// Clone: the cache outlives the caller's string, which may alias a request buffer.
	key := strings.Clone(topic)
	label := labelValue(key)
	t := &topicCounters{
		bytesIn:    m.bytesIn.WithLabelValues(label),
		recordsIn:  m.recordsIn.WithLabelValues(label),
		bytesOut:   m.bytesOut.WithLabelValues(label),
		recordsOut: m.recordsOut.WithLabelValues(label),
	}
	v, _ := m.topics.LoadOrStore(key, t)
	return v.(*topicCounters)
}

// ForgetTopic drops the per-topic series of a deleted topic so that they stop being
// exported. A recorder racing with it may lose its increment.
func (m *Metrics) ForgetTopic(topic string) {
	if m == nil {
		return
	}
	m.topics.Delete(topic)
	m.shareTopics.Delete(topic)
	label := labelValue(topic)
	for _, vec := range []*prometheus.CounterVec{m.bytesIn, m.recordsIn, m.bytesOut, m.recordsOut, m.share.acquired} {
		vec.DeleteLabelValues(label)
	}
}

// ProduceError records a partition-level error code returned in a Produce response.
// Code 0 (NONE) is not an error and is ignored.
func (m *Metrics) ProduceError(code int16) {
	if m == nil || code == 0 {
		return
	}
	errorCounter(m.produceErrors, m.produceErrorSeries, code).Inc()
}

// FetchError records a partition-level error code returned in a Fetch response.
// Code 0 (NONE) is not an error and is ignored.
func (m *Metrics) FetchError(code int16) {
	if m == nil || code == 0 {
		return
	}
	errorCounter(m.fetchErrors, m.fetchErrorSeries, code).Inc()
}

func errorCounter(vec *prometheus.CounterVec, cache *[errorCodeLimit]atomic.Pointer[counterSeries], code int16) prometheus.Counter {
	slot := int(code) + 1
	cacheable := slot >= 0 && slot < errorCodeLimit
	if cacheable {
		if s := cache[slot].Load(); s != nil {
			return s.counter
		}
	}
	c := vec.WithLabelValues(errorName(code))
	if cacheable {
		cache[slot].Store(&counterSeries{counter: c})
	}
	return c
}

// errorName is kerr's name for an error code, e.g. NOT_LEADER_FOR_PARTITION. Codes
// kerr does not know are named UNKNOWN_ERROR_CODE_<code> rather than folded into
// UNKNOWN_SERVER_ERROR.
func errorName(code int16) string {
	if code == -1 {
		return kerr.UnknownServerError.Message
	}
	if e, ok := kerr.ErrorForCode(code).(*kerr.Error); ok && e != nil && e != kerr.UnknownServerError {
		return e.Message
	}
	return "UNKNOWN_ERROR_CODE_" + strconv.Itoa(int(code))
}

// ISRShrink records a replica leaving a partition's ISR.
func (m *Metrics) ISRShrink() {
	if m == nil {
		return
	}
	m.isrShrinks.Inc()
}

// ISRExpand records a replica joining a partition's ISR.
func (m *Metrics) ISRExpand() {
	if m == nil {
		return
	}
	m.isrExpands.Inc()
}

// Rebalance records the group coordinator starting a rebalance of group.
func (m *Metrics) Rebalance(group string) {
	if m == nil {
		return
	}
	if v, ok := m.groups.Load(group); ok {
		v.(*counterSeries).counter.Inc()
		return
	}
	key := strings.Clone(group)
	v, _ := m.groups.LoadOrStore(key, &counterSeries{counter: m.rebalances.WithLabelValues(labelValue(key))})
	v.(*counterSeries).counter.Inc()
}

// ForgetGroup drops the rebalance series of a deleted group.
func (m *Metrics) ForgetGroup(group string) {
	if m == nil {
		return
	}
	m.groups.Delete(group)
	m.rebalances.DeleteLabelValues(labelValue(group))
}

// addInt adds n to c, ignoring n ≤ 0 (a counter must never go down, and Add panics
// on a negative value).
func addInt(c prometheus.Counter, n int) {
	if n > 0 {
		c.Add(float64(n))
	}
}

// labelValue returns s made valid UTF-8, as Prometheus requires of label values
// (group ids are arbitrary client strings).
func labelValue(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}
