package auth

import (
	"fmt"
	"testing"
	"time"

	"github.com/samsa-streaming/samsa/internal/metadata"
)

func quotasWith(t *testing.T, recs ...metadata.ClientQuotaRecord) *Quotas {
	t.Helper()
	var rs []metadata.Record
	for _, r := range recs {
		rs = append(rs, r)
	}
	img, err := metadata.Apply(metadata.EmptyImage(), 1, rs)
	if err != nil {
		t.Fatal(err)
	}
	q := NewQuotas(11, time.Second)
	q.Update(img)
	return q
}

func name(s string) *string { return &s }

func TestQuotaPrecedenceAndThrottle(t *testing.T) {
	q := quotasWith(t,
		metadata.ClientQuotaRecord{Entity: []metadata.QuotaEntity{{Type: "user", Name: name("alice")}}, Key: ProducerByteRate, Value: 1000},
		metadata.ClientQuotaRecord{Entity: []metadata.QuotaEntity{{Type: "user", Name: name("alice")}, {Type: "client-id", Name: name("fast")}}, Key: ProducerByteRate, Value: 1e9},
		metadata.ClientQuotaRecord{Entity: []metadata.QuotaEntity{{Type: "client-id"}}, Key: ProducerByteRate, Value: 500},
	)
	now := time.Unix(1000, 0)
	// 10 s of padding: 1000 B/s allows 10,000 bytes at once.
	if d := q.Record(ProducerByteRate, "alice", "app", 10_000, now); d != 0 {
		t.Fatalf("within quota: throttle %s", d)
	}
	d := q.Record(ProducerByteRate, "alice", "other-app", 10_000, now) // shares alice's quota
	if want := 10 * time.Second; d != want {
		t.Fatalf("twice the quota: throttle %s, want %s", d, want)
	}
	if d := q.Record(ProducerByteRate, "alice", "fast", 1e6, now); d != 0 {
		t.Fatalf("user and client id quota wins: throttle %s", d)
	}
	if d := q.Record(ProducerByteRate, "bob", "x", 5000, now); d != 0 {
		t.Fatalf("default client-id quota, within: %s", d)
	}
	if d := q.Record(ProducerByteRate, "carol", "y", 6000, now); d == 0 {
		t.Fatal("the default client-id quota is per client id: carol's y is over it")
	}
	if d := q.Record(ConsumerByteRate, "alice", "app", 1e9, now); d != 0 {
		t.Fatalf("no consumer quota: throttle %s", d)
	}
	// The usage ages out of the window.
	if d := q.Throttle(ProducerByteRate, "alice", "app", now.Add(12*time.Second)); d != 0 {
		t.Fatalf("after the window: throttle %s", d)
	}
	if (&Quotas{}).Enabled() {
		t.Fatal("no quotas, enabled")
	}
}

// TestIdleQuotaUsageExpires: the usage of a client that stopped sending is dropped
// after an hour, as Kafka expires idle quota sensors, so that client ids seen once do
// not accumulate; a client still sending keeps its usage and its throttle.
func TestIdleQuotaUsageExpires(t *testing.T) {
	q := quotasWith(t,
		metadata.ClientQuotaRecord{Entity: []metadata.QuotaEntity{{Type: "client-id"}}, Key: ProducerByteRate, Value: 500},
	)
	now := time.Unix(1000, 0)
	for i := range 1000 {
		q.Record(ProducerByteRate, "", fmt.Sprintf("tool-%d", i), 100, now)
	}
	measured := func() int {
		q.mu.Lock()
		defer q.mu.Unlock()
		return len(q.mu.rates)
	}
	if n := measured(); n != 1000 {
		t.Fatalf("%d client ids measured, want 1000", n)
	}
	// "busy" keeps sending through the hour and is over its quota at the end.
	for m := range 61 {
		q.Record(ProducerByteRate, "", "busy", 100, now.Add(time.Duration(m)*time.Minute))
	}
	end := now.Add(61 * time.Minute)
	if d := q.Record(ProducerByteRate, "", "busy", 20_000, end); d == 0 {
		t.Fatal("a client over its quota after an hour of sending is not throttled")
	}
	if n := measured(); n != 1 {
		t.Fatalf("%d client ids measured after the others were idle for an hour, want 1 (busy)", n)
	}
}

// TestQuotasIgnoreOlderImage: requests update the quotas concurrently, each with the
// image it read; one with an image older than the quotas already taken leaves them,
// so a removed quota does not come back.
func TestQuotasIgnoreOlderImage(t *testing.T) {
	entity := []metadata.QuotaEntity{{Type: "user", Name: name("alice")}}
	old, err := metadata.Apply(metadata.EmptyImage(), 3, []metadata.Record{
		metadata.ClientQuotaRecord{Entity: entity, Key: ProducerByteRate, Value: 1000}})
	if err != nil {
		t.Fatal(err)
	}
	removed, err := metadata.Apply(old, 4, []metadata.Record{
		metadata.ClientQuotaRecord{Entity: entity, Key: ProducerByteRate, Remove: true}})
	if err != nil {
		t.Fatal(err)
	}
	q := NewQuotas(11, time.Second)
	q.Update(removed)
	q.Update(old) // a slower request's Update, with the image it read earlier
	if q.Enabled() {
		t.Fatal("the removed quota came back with an older image")
	}
	q = NewQuotas(11, time.Second)
	q.Update(old)
	if !q.Enabled() {
		t.Fatal("the quota of the first image was not taken")
	}
}

// TestRequestPercentageThrottleBoundedByWindow: a client far over its
// request_percentage quota waits at most one quota window, as Kafka's
// ClientRequestQuotaManager bounds it; the byte rates keep the longer bound.
func TestRequestPercentageThrottleBoundedByWindow(t *testing.T) {
	q := quotasWith(t,
		metadata.ClientQuotaRecord{Entity: []metadata.QuotaEntity{{Type: "user", Name: name("alice")}}, Key: RequestPercentage, Value: 10},
		metadata.ClientQuotaRecord{Entity: []metadata.QuotaEntity{{Type: "user", Name: name("alice")}}, Key: ProducerByteRate, Value: 10},
	)
	now := time.Unix(1000, 0)
	// 10 % of a thread over 10 s is 100 percent-seconds; 1,000 is ten times that.
	if d := q.Record(RequestPercentage, "alice", "app", 1000, now); d != time.Second {
		t.Fatalf("request_percentage far over its quota: throttle %s, want one window (1s)", d)
	}
	if d := q.Record(ProducerByteRate, "alice", "app", 1000, now); d <= time.Second {
		t.Fatalf("producer_byte_rate far over its quota: throttle %s, want more than one window", d)
	}
}

// TestControllerMutationWindow: controller_mutation_rate is measured over the windows
// SetWindow gives it (controller.quota.window.*), the other quotas over
// quota.window.*: the longest throttle is samples × window of the kind's own.
func TestControllerMutationWindow(t *testing.T) {
	q := quotasWith(t,
		metadata.ClientQuotaRecord{Entity: []metadata.QuotaEntity{{Type: "client-id"}}, Key: ControllerMutationRate, Value: 1},
		metadata.ClientQuotaRecord{Entity: []metadata.QuotaEntity{{Type: "client-id"}}, Key: ProducerByteRate, Value: 1},
	)
	q.SetWindow(ControllerMutationRate, 3, 2*time.Second)
	now := time.Unix(1000, 0)
	if d, want := q.Record(ControllerMutationRate, "u", "admin", 1000, now), 6*time.Second; d != want {
		t.Fatalf("controller_mutation_rate far over its quota: throttle %s, want %s (3 samples of 2 s)", d, want)
	}
	if d, want := q.Record(ProducerByteRate, "u", "producer", 1000, now), 11*time.Second; d != want {
		t.Fatalf("producer_byte_rate far over its quota: throttle %s, want %s (11 samples of 1 s)", d, want)
	}
	// The mutations age out of their own, longer window.
	if d := q.Throttle(ControllerMutationRate, "u", "admin", now.Add(5*time.Second)); d == 0 {
		t.Fatal("controller_mutation_rate usage gone after 5 s of a 6 s window")
	}
	if d := q.Throttle(ControllerMutationRate, "u", "admin", now.Add(7*time.Second)); d != 0 {
		t.Fatalf("controller_mutation_rate usage still counted after its 6 s window: throttle %s", d)
	}
}
