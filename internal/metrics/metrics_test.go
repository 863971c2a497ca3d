package metrics

import (
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-streaming/samsa/internal/server"
)

// The broker hands a *Metrics to the server as its Observer.
var _ server.Observer = (*Metrics)(nil)

func TestScrapeOverHTTP(t *testing.T) {
	source := &fakeSource{
		partitions: []PartitionStats{
			{Topic: "orders", Partition: 0, LogSizeBytes: 4096, LogStartOffset: 10, LogEndOffset: 120, HighWatermark: 100, Replicas: 3, ISR: 3,
				MinISR: 3, Leader: true, FollowerLag: 20},
			{Topic: "orders", Partition: 1, LogSizeBytes: 2048, LogStartOffset: 0, LogEndOffset: 50, HighWatermark: 50, Replicas: 3, ISR: 2,
				MinISR: 3, Leader: true, FollowerLag: 35},
			// A follower replica with a shrunken ISR: its leader reports it, not us.
			{Topic: "orders", Partition: 2, LogSizeBytes: 1024, LogEndOffset: 7, HighWatermark: 7, Replicas: 3, ISR: 1, MinISR: 2},
			{Topic: "audit", Partition: 0, Replicas: 1, Offline: true},
		},
		groups: []GroupStats{
			{Group: "billing", State: "Stable", Members: 2, Generation: 5, Offsets: []GroupOffset{
				{Topic: "orders", Partition: 0, Committed: 40},
				{Topic: "orders", Partition: 1, Committed: 50},
				{Topic: "elsewhere", Partition: 0, Committed: 3}, // partition not hosted here
			}},
			{Group: "search", State: "Stable", Members: 1, Generation: 1, Offsets: []GroupOffset{
				{Topic: "orders", Partition: 2, Committed: 9}, // committed past the high watermark
			}},
			{Group: "idle", State: "Empty"},
		},
	}
	m := newMetrics(t, Options{Listen: "127.0.0.1:0", Source: source})
	if err := m.Start(); err != nil {
		t.Fatalf("Start: %v", err)
	}
	addr := m.Addr()
	if addr == nil {
		t.Fatal("Addr() = nil after Start")
	}
	if host, _, _ := net.SplitHostPort(addr.String()); host != "127.0.0.1" {
		t.Fatalf("Addr() = %s, want a 127.0.0.1 address", addr)
	}

	m.ProducedBatch("orders", 10, 1000)
	m.ProducedBatch("orders", 5, 500)
	m.ProducedBatch("audit", 1, 80)
	m.FetchedBytes("orders", 0, 700) // zero-copy: record count unknown
	m.FetchedBytes("orders", 3, 300)
	m.RequestDone(0, 9, 3*time.Millisecond, 1200, 80)
	m.RequestDone(0, 9, 40*time.Millisecond, 1300, 90)
	m.RequestDone(1, 12, 500*time.Millisecond, 100, 1100)
	m.ProduceError(kerr.NotLeaderForPartition.Code)
	m.ProduceError(kerr.NotLeaderForPartition.Code)
	m.ProduceError(0) // NONE is not an error
	m.FetchError(kerr.OffsetOutOfRange.Code)
	m.FetchError(-1)
	m.FetchError(9999)
	m.ISRShrink()
	m.ISRShrink()
	m.ISRExpand()
	m.Rebalance("billing")
	m.Rebalance("billing")
	m.Rebalance("search")

	families := scrapeURL(t, fmt.Sprintf("http://%s%s", addr, Path))
	checkSamples(t, families, []sample{
		{"samsa_topic_bytes_in_total", "topic=orders", 1500},
		{"samsa_topic_records_in_total", "topic=orders", 15},
		{"samsa_topic_bytes_in_total", "topic=audit", 80},
		{"samsa_topic_records_in_total", "topic=audit", 1},
		{"samsa_topic_bytes_out_total", "topic=orders", 1000},
		{"samsa_topic_records_out_total", "topic=orders", 3},
		{"samsa_requests_total", "api=Produce,version=9", 2},
		{"samsa_requests_total", "api=Fetch,version=12", 1},
		{"samsa_request_bytes_total", "api=Produce", 2500},
		{"samsa_response_bytes_total", "api=Produce", 170},
		{"samsa_response_bytes_total", "api=Fetch", 1100},
		{"samsa_produce_errors_total", "error=" + kerr.NotLeaderForPartition.Message, 2},
		{"samsa_fetch_errors_total", "error=" + kerr.OffsetOutOfRange.Message, 1},
		{"samsa_fetch_errors_total", "error=UNKNOWN_SERVER_ERROR", 1},
		{"samsa_fetch_errors_total", "error=UNKNOWN_ERROR_CODE_9999", 1},
		{"samsa_isr_shrinks_total", "", 2},
		{"samsa_isr_expands_total", "", 1},
		{"samsa_group_rebalances_total", "group=billing", 2},
		{"samsa_group_rebalances_total", "group=search", 1},

		{"samsa_partitions", "", 4},
		{"samsa_leader_partitions", "", 2},
		{"samsa_under_replicated_partitions", "", 1},
		{"samsa_under_min_isr_partitions", "", 1},
		{"samsa_at_min_isr_partitions", "", 1},
		{"samsa_replica_max_lag", "", 35},
		{"samsa_offline_partitions", "", 1},
		{"samsa_log_size_bytes", "partition=0,topic=orders", 4096},
		{"samsa_log_size_bytes", "partition=2,topic=orders", 1024},
		{"samsa_log_start_offset", "partition=0,topic=orders", 10},
		{"samsa_log_end_offset", "partition=0,topic=orders", 120},
		{"samsa_high_watermark", "partition=0,topic=orders", 100},
		{"samsa_partition_replicas", "partition=1,topic=orders", 3},
		{"samsa_partition_in_sync_replicas", "partition=1,topic=orders", 2},

		{"samsa_groups", "state=Stable", 2},
		{"samsa_groups", "state=Empty", 1},
		{"samsa_groups", "state=PreparingRebalance", 0},
		{"samsa_group_members", "group=billing", 2},
		{"samsa_group_members", "group=idle", 0},
		{"samsa_group_generation", "group=billing", 5},
		{"samsa_group_committed_offset", "group=billing,partition=0,topic=orders", 40},
		{"samsa_group_committed_offset", "group=billing,partition=0,topic=elsewhere", 3},
		{"samsa_group_lag", "group=billing,partition=0,topic=orders", 60},
		{"samsa_group_lag", "group=billing,partition=1,topic=orders", 0},
		{"samsa_group_lag", "group=search,partition=2,topic=orders", 0},
	})
	checkAbsent(t, families, "samsa_produce_errors_total", "error=NONE")
	checkAbsent(t, families, "samsa_group_lag", "group=billing,partition=0,topic=elsewhere")

	// The latency histogram: Produce v9 saw 3 ms and 40 ms.
	h, ok := find(families, "samsa_request_duration_seconds", "api=Produce,version=9")
	if !ok || h.Histogram == nil {
		t.Fatalf("samsa_request_duration_seconds{api=Produce,version=9}: missing")
	}
	if got := h.Histogram.GetSampleCount(); got != 2 {
		t.Errorf("Produce v9 latency sample count = %d, want 2", got)
	}
	if got, want := h.Histogram.GetSampleSum(), 0.043; got < want-1e-9 || got > want+1e-9 {
		t.Errorf("Produce v9 latency sum = %v, want %v", got, want)
	}
	cumulative := map[float64]uint64{}
	for _, b := range h.Histogram.GetBucket() {
		cumulative[b.GetUpperBound()] = b.GetCumulativeCount()
	}
	for bound, want := range map[float64]uint64{0.0025: 0, 0.005: 1, 0.025: 1, 0.05: 2} {
		if got := cumulative[bound]; got != want {
			t.Errorf("Produce v9 latency bucket le=%v = %d, want %d", bound, got, want)
		}
	}

	// Gauges follow the source from one scrape to the next.
	source.mu.Lock()
	source.partitions[0].HighWatermark = 150
	source.groups = source.groups[:1]
	source.mu.Unlock()
	families = scrapeURL(t, fmt.Sprintf("http://%s%s", addr, Path))
	checkSamples(t, families, []sample{
		{"samsa_high_watermark", "partition=0,topic=orders", 150},
		{"samsa_group_lag", "group=billing,partition=0,topic=orders", 110},
		{"samsa_groups", "state=Stable", 1},
		{"samsa_groups", "state=Empty", 0},
	})
	checkAbsent(t, families, "samsa_group_members", "group=search")
}

func TestEveryAPIKeyGetsItsName(t *testing.T) {
	m := newMetrics(t, Options{})
	for _, key := range []int16{0, 1, 3, 18, 60, 200, -5} {
		m.RequestDone(key, 4, time.Millisecond, 10, 10)
		m.RequestDone(key, 40, time.Millisecond, 10, 10) // beyond the cached version range
	}
	families := scrapeHandler(t, m)
	for _, key := range []int16{0, 1, 3, 18, 60, 200, -5} {
		for _, v := range []string{"4", "40"} {
			labels := "api=" + kmsg.NameForKey(key) + ",version=" + v
			if key == 200 || key == -5 {
				continue // both are "Unknown", checked below
			}
			checkSamples(t, families, []sample{{"samsa_requests_total", labels, 1}})
		}
	}
	checkSamples(t, families, []sample{
		{"samsa_requests_total", "api=Unknown,version=4", 2},
		{"samsa_requests_total", "api=Unknown,version=40", 2},
	})
}

func TestNilMetricsIsSafe(t *testing.T) {
	var m *Metrics
	m.RequestDone(0, 9, time.Millisecond, 1, 1)
	m.ProducedBatch("t", 1, 1)
	m.FetchedBytes("t", 1, 1)
	m.ProduceError(6)
	m.FetchError(1)
	m.ISRShrink()
	m.ISRExpand()
	m.Rebalance("g")
	m.ForgetTopic("t")
	m.ForgetGroup("g")
	m.ShareAcquired("t", 1)
	m.ShareAcknowledged(1, 1, 1, 1)
	m.ShareLocksExpired(1)
	m.ShareFetchWaited(true)
	if err := m.Start(); err != nil {
		t.Errorf("nil Start: %v", err)
	}
	if a := m.Addr(); a != nil {
		t.Errorf("nil Addr = %v, want nil", a)
	}
	if r := m.Registry(); r != nil {
		t.Errorf("nil Registry = %v, want nil", r)
	}
	if err := m.Close(); err != nil {
		t.Errorf("nil Close: %v", err)
	}
	var o server.Observer = m
	o.RequestDone(1, 1, 0, 0, 0)
}

func TestConcurrentRecorders(t *testing.T) {
	source := &fakeSource{partitions: []PartitionStats{{Topic: "t0", Replicas: 1, ISR: 1, Leader: true}}}
	m := newMetrics(t, Options{Source: source})
	const goroutines, calls = 8, 500
	topics := []string{"t0", "t1", "t2"}
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range calls {
				topic := topics[(g+i)%len(topics)]
				m.ProducedBatch(topic, 2, 100)
				m.FetchedBytes(topic, 1, 50)
				m.RequestDone(int16(i%3), int16(g%2), time.Millisecond, 10, 20)
				m.ProduceError(6)
				m.FetchError(1)
				m.ISRShrink()
				m.ISRExpand()
				m.Rebalance(topic)
			}
		})
	}
	// Scrape while recording.
	for range 3 {
		scrapeHandler(t, m)
	}
	wg.Wait()

	families := scrapeHandler(t, m)
	var bytesIn, recordsIn, bytesOut, rebalances float64
	for _, topic := range topics {
		if s, ok := find(families, "samsa_topic_bytes_in_total", "topic="+topic); ok {
			bytesIn += value(s)
		}
		if s, ok := find(families, "samsa_topic_records_in_total", "topic="+topic); ok {
			recordsIn += value(s)
		}
		if s, ok := find(families, "samsa_topic_bytes_out_total", "topic="+topic); ok {
			bytesOut += value(s)
		}
		if s, ok := find(families, "samsa_group_rebalances_total", "group="+topic); ok {
			rebalances += value(s)
		}
	}
	const total = goroutines * calls
	if bytesIn != 100*total || recordsIn != 2*total || bytesOut != 50*total || rebalances != total {
		t.Errorf("bytes in %v, records in %v, bytes out %v, rebalances %v; want %d, %d, %d, %d",
			bytesIn, recordsIn, bytesOut, rebalances, 100*total, 2*total, 50*total, total)
	}
	var requests float64
	for _, f := range families["samsa_requests_total"].GetMetric() {
		requests += value(f)
	}
	if requests != total {
		t.Errorf("requests total %v, want %d", requests, total)
	}
	checkSamples(t, families, []sample{
		{"samsa_produce_errors_total", "error=" + kerr.NotLeaderForPartition.Message, total},
		{"samsa_fetch_errors_total", "error=" + kerr.OffsetOutOfRange.Message, total},
		{"samsa_isr_shrinks_total", "", total},
		{"samsa_isr_expands_total", "", total},
	})
}

func TestRecordersIgnoreNegativeCounts(t *testing.T) {
	m := newMetrics(t, Options{})
	m.ProducedBatch("t", -1, -100)
	m.FetchedBytes("t", -1, -100)
	m.RequestDone(0, 9, time.Millisecond, -1, -1)
	m.ProducedBatch("t", 1, 10)
	checkSamples(t, scrapeHandler(t, m), []sample{
		{"samsa_topic_bytes_in_total", "topic=t", 10},
		{"samsa_topic_records_in_total", "topic=t", 1},
		{"samsa_topic_bytes_out_total", "topic=t", 0},
		{"samsa_request_bytes_total", "api=Produce", 0},
	})
}

func TestForgetDropsSeries(t *testing.T) {
	m := newMetrics(t, Options{})
	m.ProducedBatch("gone", 1, 10)
	m.ProducedBatch("kept", 1, 10)
	m.Rebalance("gone")
	m.ForgetTopic("gone")
	m.ForgetGroup("gone")
	families := scrapeHandler(t, m)
	checkAbsent(t, families, "samsa_topic_bytes_in_total", "topic=gone")
	checkAbsent(t, families, "samsa_group_rebalances_total", "group=gone")
	checkSamples(t, families, []sample{{"samsa_topic_bytes_in_total", "topic=kept", 10}})

	// A topic recreated under the same name starts from zero.
	m.ProducedBatch("gone", 1, 7)
	checkSamples(t, scrapeHandler(t, m), []sample{{"samsa_topic_bytes_in_total", "topic=gone", 7}})
}

// Client-chosen strings (group ids) and a misbehaving Source must not break a scrape.
func TestScrapeSurvivesOddSourceData(t *testing.T) {
	badGroup := "g\xff\xfe"
	source := &fakeSource{
		partitions: []PartitionStats{
			{Topic: "t", Partition: 0, HighWatermark: 10, Replicas: 1, ISR: 1, Leader: true},
			{Topic: "t", Partition: 0, HighWatermark: 99, Replicas: 1, ISR: 1, Leader: true}, // duplicate
		},
		groups: []GroupStats{
			{Group: badGroup, State: "Stable", Members: 1, Offsets: []GroupOffset{
				{Topic: "t", Partition: 0, Committed: 4},
				{Topic: "t", Partition: 0, Committed: 5}, // duplicate
			}},
			{Group: "dup", State: "Stable"},
			{Group: "dup", State: "Stable"},
			{Group: "odd", State: "SomethingNew"},
		},
	}
	m := newMetrics(t, Options{Source: source})
	m.Rebalance(badGroup)
	families := scrapeHandler(t, m)
	fixed := "g\uFFFD"
	checkSamples(t, families, []sample{
		{"samsa_partitions", "", 1},
		{"samsa_high_watermark", "partition=0,topic=t", 10},
		{"samsa_group_lag", "group=" + fixed + ",partition=0,topic=t", 6},
		{"samsa_group_rebalances_total", "group=" + fixed, 1},
		{"samsa_groups", "state=Stable", 2},
		{"samsa_groups", "state=SomethingNew", 1},
	})
}

func TestLifecycle(t *testing.T) {
	t.Run("no listener", func(t *testing.T) {
		m := newMetrics(t, Options{})
		if err := m.Start(); err != nil {
			t.Fatalf("Start with empty Listen: %v", err)
		}
		if a := m.Addr(); a != nil {
			t.Errorf("Addr = %v, want nil without a listener", a)
		}
	})
	t.Run("start twice, close twice, start after close", func(t *testing.T) {
		m := newMetrics(t, Options{Listen: "127.0.0.1:0"})
		if a := m.Addr(); a != nil {
			t.Errorf("Addr before Start = %v, want nil", a)
		}
		if err := m.Start(); err != nil {
			t.Fatalf("Start: %v", err)
		}
		addr := m.Addr().String()
		if err := m.Start(); !errors.Is(err, ErrStarted) {
			t.Errorf("second Start = %v, want ErrStarted", err)
		}
		// Only /metrics is served.
		resp, err := (&http.Client{Timeout: 10 * time.Second}).Get("http://" + addr + "/other")
		if err != nil {
			t.Fatalf("GET /other: %v", err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("GET /other: status %d, want 404", resp.StatusCode)
		}
		if err := m.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		if err := m.Close(); err != nil {
			t.Errorf("second Close: %v", err)
		}
		if a := m.Addr(); a != nil {
			t.Errorf("Addr after Close = %v, want nil", a)
		}
		if err := m.Start(); !errors.Is(err, ErrClosed) {
			t.Errorf("Start after Close = %v, want ErrClosed", err)
		}
		if conn, err := net.Dial("tcp", addr); err == nil {
			conn.Close()
			t.Errorf("listener %s still accepts after Close", addr)
		}
		m.ProducedBatch("t", 1, 1) // recorders keep working after Close
	})
	t.Run("port in use", func(t *testing.T) {
		first := newMetrics(t, Options{Listen: "127.0.0.1:0"})
		if err := first.Start(); err != nil {
			t.Fatalf("Start: %v", err)
		}
		second := newMetrics(t, Options{Listen: first.Addr().String()})
		if err := second.Start(); err == nil {
			t.Errorf("Start on a port in use succeeded")
		}
	})
	t.Run("two instances keep separate registries", func(t *testing.T) {
		a := newMetrics(t, Options{})
		b := newMetrics(t, Options{})
		a.ProducedBatch("t", 1, 5)
		checkAbsent(t, scrapeHandler(t, b), "samsa_topic_bytes_in_total", "topic=t")
	})
}

func TestNewValidatesListen(t *testing.T) {
	for _, listen := range []string{"9644", "localhost", "[::1"} {
		if _, err := New(Options{Listen: listen}); !errors.Is(err, ErrInvalidOptions) {
			t.Errorf("New(Listen: %q) = %v, want ErrInvalidOptions", listen, err)
		}
	}
}

// The hot-path recorders allocate nothing once a label value has been seen.
func TestRecordersDoNotAllocate(t *testing.T) {
	m := newMetrics(t, Options{})
	topic := string([]byte("orders")) // not a constant: as a request hands it
	group := "billing"
	m.ProducedBatch(topic, 1, 1)
	m.FetchedBytes(topic, 1, 1)
	m.RequestDone(0, 9, time.Millisecond, 1, 1)
	m.ProduceError(6)
	m.FetchError(1)
	m.Rebalance(group)
	m.ShareAcquired(topic, 1)
	cases := map[string]func(){
		"ProducedBatch":     func() { m.ProducedBatch(topic, 10, 1000) },
		"FetchedBytes":      func() { m.FetchedBytes(topic, 10, 1000) },
		"RequestDone":       func() { m.RequestDone(0, 9, time.Millisecond, 100, 100) },
		"ProduceError":      func() { m.ProduceError(6) },
		"FetchError":        func() { m.FetchError(1) },
		"ISRShrink":         func() { m.ISRShrink() },
		"Rebalance":         func() { m.Rebalance(group) },
		"ShareAcquired":     func() { m.ShareAcquired(topic, 500) },
		"ShareAcknowledged": func() { m.ShareAcknowledged(500, 1, 1, 1) },
		"ShareLocksExpired": func() { m.ShareLocksExpired(3) },
		"ShareFetchWaited":  func() { m.ShareFetchWaited(false) },
	}
	for name, f := range cases {
		if allocs := testing.AllocsPerRun(100, f); allocs != 0 {
			t.Errorf("%s: %v allocations per call, want 0", name, allocs)
		}
	}
}

func BenchmarkProducedBatch(b *testing.B) {
	m := newMetrics(b, Options{})
	m.ProducedBatch("orders", 1, 1)
	b.ReportAllocs()
	for b.Loop() {
		m.ProducedBatch("orders", 10, 16384)
	}
}

func BenchmarkRequestDone(b *testing.B) {
	m := newMetrics(b, Options{})
	b.ReportAllocs()
	for b.Loop() {
		m.RequestDone(0, 9, time.Millisecond, 16384, 64)
	}
}

// Every Samsa metric follows the Prometheus naming conventions (units, _total suffix,
// help text), as promtool check metrics would report.
func TestMetricNamesLint(t *testing.T) {
	source := &shareSource{fakeSource: fakeSource{
		partitions: []PartitionStats{{Topic: "t", Replicas: 1, ISR: 1, Leader: true}},
		groups:     []GroupStats{{Group: "g", State: "Stable", Offsets: []GroupOffset{{Topic: "t", Committed: 1}}}},
	}, parts: []SharePartitionStats{{Group: "sg", Topic: "t", InFlight: 1}}}
	m := newMetrics(t, Options{Source: source})
	m.ProducedBatch("t", 1, 1)
	m.FetchedBytes("t", 1, 1)
	m.RequestDone(0, 9, time.Millisecond, 1, 1)
	m.ProduceError(6)
	m.FetchError(1)
	m.Rebalance("g")
	m.ShareAcquired("t", 1)
	gathered, err := m.Registry().Gather()
	if err != nil {
		t.Fatalf("Gather: %v", err)
	}
	var samsa []*dto.MetricFamily
	for _, f := range gathered {
		if strings.HasPrefix(f.GetName(), namespace+"_") {
			samsa = append(samsa, f)
		}
	}
	problems, err := promlint.NewWithMetricFamilies(samsa).Lint()
	if err != nil {
		t.Fatalf("Lint: %v", err)
	}
	for _, p := range problems {
		t.Errorf("%s: %s", p.Metric, p.Text)
	}
}

type quorumSource struct {
	fakeSource
	q QuorumStats
}

func (s *quorumSource) Quorum() QuorumStats { return s.q }

func TestQuorumGauges(t *testing.T) {
	source := &quorumSource{q: QuorumStats{State: "leader", Active: true, MetadataOffset: 42, OfflinePartitions: 3, PreferredReplicaImbalance: 2, FencedBrokers: 1, ActiveBrokers: 2}}
	m := newMetrics(t, Options{Source: source})
	families := scrapeHandler(t, m)
	want := map[string]float64{
		"samsa_active_controller_count":                1,
		"samsa_metadata_offset":                        42,
		"samsa_controller_offline_partitions":          3,
		"samsa_controller_preferred_replica_imbalance": 2,
		"samsa_controller_fenced_brokers":              1,
		"samsa_controller_active_brokers":              2,
	}
	for name, v := range want {
		f, ok := families[name]
		if !ok || f.GetMetric()[0].GetGauge().GetValue() != v {
			t.Errorf("%s = %v, want %v", name, f, v)
		}
	}
	states := map[string]float64{}
	for _, mt := range families["samsa_metadata_quorum_state"].GetMetric() {
		states[mt.GetLabel()[0].GetValue()] = mt.GetGauge().GetValue()
	}
	if states["leader"] != 1 || states["follower"] != 0 || len(states) != len(quorumStates) {
		t.Errorf("quorum states = %v", states)
	}
	// A Source without Quorum exports none of them.
	plain := newMetrics(t, Options{Source: &fakeSource{}})
	if _, ok := scrapeHandler(t, plain)["samsa_active_controller_count"]; ok {
		t.Error("controller gauges without a QuorumSource")
	}
}

// countingSource counts the scrapes that walked the partitions.
type countingSource struct {
	fakeSource
	walks atomic.Int32
}

func (s *countingSource) Partitions() []PartitionStats {
	s.walks.Add(1)
	return s.fakeSource.Partitions()
}

// TestRuntimeOnlyScrape: a scrape that names only Go runtime and process metrics
// (promhttp's name[] filter, as samsa bench samples the broker's CPU and memory) gets
// them without walking the partitions; a whole scrape serves both sets.
func TestRuntimeOnlyScrape(t *testing.T) {
	source := &countingSource{fakeSource: fakeSource{partitions: []PartitionStats{{Topic: "t", Replicas: 1, ISR: 1, Leader: true}}}}
	m := newMetrics(t, Options{Source: source})
	scrape := func(target string) map[string]*dto.MetricFamily {
		rec := httptest.NewRecorder()
		m.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, target, nil))
		if rec.Code != http.StatusOK {
			t.Fatalf("GET %s: status %d: %s", target, rec.Code, rec.Body.String())
		}
		return parseText(t, rec.Body.String())
	}

	got := scrape(Path + "?name[]=process_cpu_seconds_total&name[]=go_cpu_classes_gc_total_cpu_seconds_total")
	if len(got) != 2 || got["process_cpu_seconds_total"] == nil || got["go_cpu_classes_gc_total_cpu_seconds_total"] == nil {
		t.Fatalf("runtime-only scrape served %d families, want the two named: %v", len(got), slices.Collect(maps.Keys(got)))
	}
	if n := source.walks.Load(); n != 0 {
		t.Fatalf("runtime-only scrape walked the partitions %d times", n)
	}

	all := scrape(Path)
	if all["process_cpu_seconds_total"] == nil || all["samsa_partition_replicas"] == nil {
		t.Fatalf("whole scrape lacks process_cpu_seconds_total or samsa_partition_replicas: %v", slices.Collect(maps.Keys(all)))
	}
	mixed := scrape(Path + "?name[]=process_cpu_seconds_total&name[]=samsa_partition_replicas")
	if len(mixed) != 2 || source.walks.Load() != 2 {
		t.Fatalf("a filter naming a partition metric served %d families after %d walks, want 2 and 2", len(mixed), source.walks.Load())
	}
}
