package integration

import (
	"crypto/rand"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-streaming/samsa/internal/testutil"
)

// throttleHook records the throttle times brokers report.
type throttleHook struct {
	mu  sync.Mutex
	max time.Duration
	n   int
}

func (h *throttleHook) OnBrokerThrottle(_ kgo.BrokerMetadata, d time.Duration, _ bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.n++
	h.max = max(h.max, d)
}

func (h *throttleHook) seen() (int, time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.n, h.max
}

// Client quotas are observed as throttled throughput and throttle_time_ms, for
// producers and consumers, while other clients run at full speed.
func TestClientQuotas(t *testing.T) {
	b := testutil.StartBroker(t, "quota.window.num=2", "quota.window.size.seconds=1",
		"controller.quota.window.num=2", "controller.quota.window.size.seconds=1")
	adm := newAdmin(t, b)
	ctx := ctxT(t, 90*time.Second)
	createTopic(t, adm, "quota", 1, nil)
	const rate = 256 << 10 // bytes/s
	for _, q := range []struct{ client, key string }{{"slow-producer", "producer_byte_rate"}, {"slow-consumer", "consumer_byte_rate"}} {
		res, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{
			Entity: []kadm.ClientQuotaEntityComponent{{Type: "client-id", Name: kadm.StringPtr(q.client)}},
			Ops:    []kadm.AlterClientQuotaOp{{Key: q.key, Value: rate}},
		}})
		if err == nil && len(res) == 1 {
			err = res[0].Err
		}
		if err != nil {
			t.Fatalf("set %s of %s: %v", q.key, q.client, err)
		}
	}
	const total = 1 << 20
	produce := func(clientID string) (time.Duration, *throttleHook) {
		hook := &throttleHook{}
		c := newClient(t, b, kgo.ClientID(clientID), kgo.WithHooks(hook), kgo.ProducerLinger(0),
			kgo.ProducerBatchMaxBytes(16<<10), kgo.ProducerBatchCompression(kgo.NoCompression()))
		start := time.Now()
		for sent := 0; sent < total; sent += 16 << 10 {
			var recs []*kgo.Record
			for range 16 {
				value := make([]byte, 1000)
				_, _ = rand.Read(value) // incompressible
				recs = append(recs, &kgo.Record{Topic: "quota", Value: value})
			}
			produceSync(t, c, recs...)
		}
		return time.Since(start), hook
	}
	fast, fastHook := produce("fast-producer")
	slow, slowHook := produce("slow-producer")
	n, maxThrottle := slowHook.seen()
	t.Logf("1 MiB: %s unthrottled, %s at %d KiB/s (%d throttled responses, up to %s)", fast, slow, rate>>10, n, maxThrottle)
	if n == 0 || maxThrottle <= 0 {
		t.Fatal("no throttle_time_ms reported to the throttled producer")
	}
	if want := time.Duration(float64(total-2*rate) / rate * float64(time.Second)); slow < want {
		t.Fatalf("1 MiB at %d B/s took %s, want at least %s", rate, slow, want)
	}
	if fn, _ := fastHook.seen(); fn != 0 {
		t.Fatalf("the unthrottled producer was throttled %d times", fn)
	}

	consume := func(clientID string) (time.Duration, *throttleHook) {
		hook := &throttleHook{}
		c := newClient(t, b, kgo.ClientID(clientID), kgo.WithHooks(hook), kgo.ConsumeTopics("quota"),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxBytes(64<<10), kgo.FetchMaxPartitionBytes(64<<10))
		start := time.Now()
		got := 0
		for got < 2*total/(16<<10)*16 { // both producers' records
			fs := c.PollFetches(ctx)
			if err := ctx.Err(); err != nil {
				t.Fatalf("%s consumed %d records: %v", clientID, got, err)
			}
			fs.EachError(func(_ string, _ int32, err error) {
				if err != kerr.ThrottlingQuotaExceeded {
					t.Fatalf("fetch: %v", err)
				}
			})
			got += fs.NumRecords()
		}
		return time.Since(start), hook
	}
	fastC, _ := consume("fast-consumer")
	slowC, slowCHook := consume("slow-consumer")
	n, maxThrottle = slowCHook.seen()
	t.Logf("2 MiB consumed: %s unthrottled, %s at %d KiB/s (%d throttled responses, up to %s)", fastC, slowC, rate>>10, n, maxThrottle)
	if n == 0 {
		t.Fatal("no throttle_time_ms reported to the throttled consumer")
	}
	if want := time.Duration(float64(2*total*1000/1024-2*rate) / rate * float64(time.Second)); slowC < want {
		t.Fatalf("2 MiB at %d B/s took %s, want at least %s", rate, slowC, want)
	}

	// controller_mutation_rate: once over it, topic creation is refused (KIP-599).
	res, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{
		Entity: []kadm.ClientQuotaEntityComponent{{Type: "client-id", Name: kadm.StringPtr("slow-admin")}},
		Ops:    []kadm.AlterClientQuotaOp{{Key: "controller_mutation_rate", Value: 1}},
	}})
	if err != nil || res[0].Err != nil {
		t.Fatalf("set controller_mutation_rate: %v %v", err, res)
	}
	adminHook := &throttleHook{}
	slowAdmin := kadm.NewClient(newClient(t, b, kgo.ClientID("slow-admin"), kgo.WithHooks(adminHook)))
	for _, topic := range []string{"mutations-1", "mutations-2"} {
		res, err := slowAdmin.CreateTopics(ctx, 4, 1, nil, topic)
		if err != nil || res[topic].Err != nil {
			t.Fatalf("create %s: %v %v", topic, err, res[topic].Err)
		}
	}
	// The second creation was refused with THROTTLING_QUOTA_EXCEEDED and a throttle
	// time, which franz-go waits out before it retries.
	if n, d := adminHook.seen(); n == 0 || d <= 0 {
		t.Fatal("creating topics over controller_mutation_rate was not throttled")
	}

	// request_percentage: the time handlers spend on a client's requests.
	res, err = adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{
		Entity: []kadm.ClientQuotaEntityComponent{{Type: "client-id", Name: kadm.StringPtr("busy")}},
		Ops:    []kadm.AlterClientQuotaOp{{Key: "request_percentage", Value: 0.001}},
	}})
	if err != nil || res[0].Err != nil {
		t.Fatalf("set request_percentage: %v %v", err, res)
	}
	busyHook := &throttleHook{}
	busy := newClient(t, b, kgo.ClientID("busy"), kgo.WithHooks(busyHook))
	for i := 0; i < 200; i++ {
		if n, _ := busyHook.seen(); n > 0 {
			break
		}
		if _, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, busy); err != nil {
			t.Fatal(err)
		}
	}
	if n, _ := busyHook.seen(); n == 0 {
		t.Fatal("200 Metadata requests over request_percentage=0.001 were not throttled")
	}
}
