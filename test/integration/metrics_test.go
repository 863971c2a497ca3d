package integration

import (
	"fmt"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/samsa-streaming/samsa/internal/testutil"
)

// scrape fetches /metrics and parses it as Prometheus text exposition format.
func scrape(t *testing.T, addr string) map[string]*dto.MetricFamily {
	t.Helper()
	families, err := testutil.ScrapeMetrics(ctxT(t, 10*time.Second), addr)
	if err != nil {
		t.Fatal(err)
	}
	return families
}

// TestMetricsDuringLoad scrapes the metrics endpoint while records are produced and
// consumed by a group: counters move, gauges follow the log and the group's lag.
func TestMetricsDuringLoad(t *testing.T) {
	metricsAddr := fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t))
	b := testutil.StartBroker(t, "metrics.listener="+metricsAddr, "group.initial.rebalance.delay.ms=0")
	createTopic(t, newAdmin(t, b), "observed", 1, nil)
	before := scrape(t, metricsAddr)
	if v := testutil.MetricValue(before, "samsa_topic_bytes_in_total", map[string]string{"topic": "observed"}); v > 0 {
		t.Fatalf("bytes in before any produce: %v", v)
	}

	p := newClient(t, b, kgo.DefaultProduceTopic("observed"))
	for i := 0; i < 10; i++ {
		var recs []*kgo.Record
		for j := 0; j < 100; j++ {
			recs = append(recs, &kgo.Record{Value: value(i*100 + j)})
		}
		produceSync(t, p, recs...)
	}
	g := newClient(t, b, kgo.ConsumerGroup("watchers"), kgo.ConsumeTopics("observed"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	ctx := ctxT(t, 30*time.Second)
	for n := 0; n < 500; {
		fs := g.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatal("group did not consume")
		}
		n += len(fs.Records())
	}
	if err := g.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatal(err)
	}

	var after map[string]*dto.MetricFamily
	testutil.WaitFor(t, 20*time.Second, func() bool {
		after = scrape(t, metricsAddr)
		return testutil.MetricValue(after, "samsa_group_committed_offset", map[string]string{"group": "watchers", "topic": "observed"}) >= 0
	}, "the group's committed offsets to be exported")

	checks := []struct {
		name   string
		labels map[string]string
		min    float64
	}{
		{"samsa_topic_records_in_total", map[string]string{"topic": "observed"}, 1000},
		{"samsa_topic_bytes_in_total", map[string]string{"topic": "observed"}, 1000},
		{"samsa_topic_bytes_out_total", map[string]string{"topic": "observed"}, 1},
		{"samsa_requests_total", map[string]string{"api": "Produce"}, 1},
		{"samsa_requests_total", map[string]string{"api": "Fetch"}, 1},
		{"samsa_request_duration_seconds", map[string]string{"api": "JoinGroup"}, 1},
		{"samsa_log_size_bytes", map[string]string{"topic": "observed", "partition": "0"}, 1},
		{"samsa_log_end_offset", map[string]string{"topic": "observed"}, 1},
		{"samsa_partitions", nil, 1},
		{"samsa_group_members", map[string]string{"group": "watchers"}, 1},
		{"samsa_group_rebalances_total", map[string]string{"group": "watchers"}, 1},
	}
	for _, c := range checks {
		if v := testutil.MetricValue(after, c.name, c.labels); v < c.min {
			t.Errorf("%s%v = %v, want at least %v", c.name, c.labels, v, c.min)
		}
	}
	// Lag is high watermark − committed, per partition.
	total := 0.0
	for _, part := range []string{"0"} {
		if v := testutil.MetricValue(after, "samsa_group_lag", map[string]string{"group": "watchers", "topic": "observed", "partition": part}); v >= 0 {
			total += v
		}
	}
	if committed := testutil.MetricValue(after, "samsa_group_committed_offset", map[string]string{"group": "watchers", "topic": "observed"}); committed < 0 {
		t.Fatal("no committed offset exported")
	}
	if total > 500 {
		t.Fatalf("lag %v after consuming and committing at least 500 of 1000 records", total)
	}
}
