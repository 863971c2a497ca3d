package metrics

import "testing"

// shareSource is a Source that serves share partitions.
type shareSource struct {
	fakeSource
	parts []SharePartitionStats
}

func (s *shareSource) SharePartitions() []SharePartitionStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]SharePartitionStats(nil), s.parts...)
}

// TestShareMetrics: the share counters count what their recorders are told — the
// acknowledgement types and wait results exported from the start at 0, the acquired
// records per topic once a topic has some, dropped with the topic — and the in-flight
// gauge is one series per share partition the ShareSource reports (a duplicate
// skipped), none without a ShareSource.
func TestShareMetrics(t *testing.T) {
	source := &shareSource{}
	m := newMetrics(t, Options{Source: source})
	families := scrapeHandler(t, m)
	checkSamples(t, families, []sample{
		{"samsa_share_records_acknowledged_total", "type=accept", 0},
		{"samsa_share_records_acknowledged_total", "type=release", 0},
		{"samsa_share_records_acknowledged_total", "type=reject", 0},
		{"samsa_share_records_acknowledged_total", "type=renew", 0},
		{"samsa_share_fetch_waits_total", "result=records", 0},
		{"samsa_share_fetch_waits_total", "result=empty", 0},
		{"samsa_share_lock_timeouts_total", "", 0},
	})
	checkAbsent(t, families, "samsa_share_records_acquired_total", "topic=orders")
	if _, ok := families["samsa_share_partition_in_flight_records"]; ok {
		t.Error("in-flight gauges with no share partition")
	}

	m.ShareAcquired("orders", 500)
	m.ShareAcquired("orders", 20)
	m.ShareAcquired("audit", 0) // nothing handed out: no series
	m.ShareAcknowledged(400, 10, 3, 0)
	m.ShareAcknowledged(100, 0, 0, 7)
	m.ShareLocksExpired(7)
	m.ShareLocksExpired(0)
	m.ShareFetchWaited(true)
	m.ShareFetchWaited(false)
	m.ShareFetchWaited(false)
	source.mu.Lock()
	source.parts = []SharePartitionStats{
		{Group: "g", Topic: "orders", Partition: 0, InFlight: 480},
		{Group: "g", Topic: "orders", Partition: 1, InFlight: 0},
		{Group: "h", Topic: "orders", Partition: 0, InFlight: 3},
		{Group: "g", Topic: "orders", Partition: 0, InFlight: 9}, // a duplicate
	}
	source.mu.Unlock()
	families = scrapeHandler(t, m)
	checkSamples(t, families, []sample{
		{"samsa_share_records_acquired_total", "topic=orders", 520},
		{"samsa_share_records_acknowledged_total", "type=accept", 500},
		{"samsa_share_records_acknowledged_total", "type=release", 10},
		{"samsa_share_records_acknowledged_total", "type=reject", 3},
		{"samsa_share_records_acknowledged_total", "type=renew", 7},
		{"samsa_share_lock_timeouts_total", "", 7},
		{"samsa_share_fetch_waits_total", "result=records", 1},
		{"samsa_share_fetch_waits_total", "result=empty", 2},
		{"samsa_share_partition_in_flight_records", "group=g,partition=0,topic=orders", 480},
		{"samsa_share_partition_in_flight_records", "group=g,partition=1,topic=orders", 0},
		{"samsa_share_partition_in_flight_records", "group=h,partition=0,topic=orders", 3},
	})
	checkAbsent(t, families, "samsa_share_records_acquired_total", "topic=audit")
	if n := len(families["samsa_share_partition_in_flight_records"].GetMetric()); n != 3 {
		t.Errorf("%d in-flight series, want 3", n)
	}

	m.ForgetTopic("orders")
	checkAbsent(t, scrapeHandler(t, m), "samsa_share_records_acquired_total", "topic=orders")
	m.ShareAcquired("orders", 5) // recreated: from zero
	checkSamples(t, scrapeHandler(t, m), []sample{{"samsa_share_records_acquired_total", "topic=orders", 5}})

	plain := newMetrics(t, Options{Source: &fakeSource{}})
	if _, ok := scrapeHandler(t, plain)["samsa_share_partition_in_flight_records"]; ok {
		t.Error("in-flight gauges without a ShareSource")
	}
}
