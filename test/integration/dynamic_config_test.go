package integration

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-streaming/samsa/internal/testutil"
)

// alterBroker sets (value non-nil) or deletes (nil) one broker config, on the cluster
// default when broker is -1, else on that broker, and returns the resource's error.
func alterBroker(t *testing.T, adm *kadm.Client, broker int32, name string, value *string) error {
	t.Helper()
	op := kadm.SetConfig
	if value == nil {
		op = kadm.DeleteConfig
	}
	var brokers []int32
	if broker >= 0 {
		brokers = []int32{broker}
	}
	resps, err := adm.AlterBrokerConfigs(ctxT(t, 10*time.Second), []kadm.AlterConfig{{Op: op, Name: name, Value: value}}, brokers...)
	if err != nil {
		t.Fatalf("alter %s on broker %d: %v", name, broker, err)
	}
	if len(resps) != 1 {
		t.Fatalf("alter %s on broker %d: %d responses", name, broker, len(resps))
	}
	if resps[0].Err != nil {
		return fmt.Errorf("%w: %s", resps[0].Err, resps[0].ErrMessage)
	}
	return nil
}

// describedConfig describes one config of a resource as "value SOURCE: synonyms".
func describedConfig(t *testing.T, adm *kadm.Client, describe func(context.Context) (kadm.ResourceConfigs, error), name string) string {
	t.Helper()
	rcs, err := describe(ctxT(t, 10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if len(rcs) != 1 || rcs[0].Err != nil {
		t.Fatalf("describe: %+v", rcs)
	}
	for _, c := range rcs[0].Configs {
		if c.Key != name {
			continue
		}
		s := fmt.Sprintf("%s %v:", c.MaybeValue(), c.Source)
		for _, syn := range c.Synonyms {
			v := ""
			if syn.Value != nil {
				v = *syn.Value
			}
			s += fmt.Sprintf(" %v/%s=%s", syn.Source, syn.Key, v)
		}
		return s
	}
	return "absent"
}

// TestDynamicBrokerConfigs: the broker properties that are topic defaults may be set at
// run time (KIP-226) for the cluster (resource "") and per broker, as kafka-configs.sh
// --entity-type brokers does; a topic without an override follows them at once (its
// old segments deleted under a lowered log.retention.ms; a batch above a lowered
// message.max.bytes refused MESSAGE_TOO_LARGE), DescribeConfigs reports them with
// their dynamic source in Kafka's synonym order, the per-broker value wins over the
// cluster default, DELETE restores the static value, a static-only property is
// INVALID_REQUEST naming it, and the values survive a restart. Samsa refused every
// broker alteration ("broker properties are static").
func TestDynamicBrokerConfigs(t *testing.T) {
	b := testutil.StartBroker(t, "log.retention.check.interval.ms=100", "log.retention.hours=100")
	adm := newAdmin(t, b)
	const topic = "dyn-retention"
	createTopic(t, adm, topic, 1, map[string]*string{"segment.bytes": kmsg.StringPtr("1024")})
	cl := newClient(t, b, kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(0), kgo.ProducerBatchCompression(kgo.NoCompression()))
	for i := range 20 {
		produceSync(t, cl, &kgo.Record{Value: []byte(strings.Repeat("x", 200) + fmt.Sprint(i))})
	}
	topicConfig := func(name string) string {
		return describedConfig(t, adm, func(ctx context.Context) (kadm.ResourceConfigs, error) {
			return adm.DescribeTopicConfigs(ctx, topic)
		}, name)
	}
	brokerConfig := func(broker int32, name string) string {
		return describedConfig(t, adm, func(ctx context.Context) (kadm.ResourceConfigs, error) {
			if broker < 0 {
				return adm.DescribeBrokerConfigs(ctx)
			}
			return adm.DescribeBrokerConfigs(ctx, broker)
		}, name)
	}
	check := func(what, got, want string) {
		t.Helper()
		if got != want {
			t.Errorf("%s:\n got  %s\n want %s", what, got, want)
		}
	}

	// A static-only property is refused, naming it and saying where to set it.
	for _, name := range []string{"listeners", "log.dirs"} {
		err := alterBroker(t, adm, -1, name, kmsg.StringPtr("x"))
		if !errors.Is(err, kerr.InvalidRequest) || !strings.Contains(err.Error(), name) || !strings.Contains(err.Error(), "server.properties") {
			t.Errorf("set %s dynamically: %v, want INVALID_REQUEST naming it and server.properties", name, err)
		}
	}
	// A bad value is refused, naming the property and the value.
	if err := alterBroker(t, adm, -1, "log.retention.ms", kmsg.StringPtr("soon")); !errors.Is(err, kerr.InvalidRequest) || !strings.Contains(err.Error(), "log.retention.ms") || !strings.Contains(err.Error(), "soon") {
		t.Errorf("log.retention.ms=soon: %v, want INVALID_REQUEST naming it and the value", err)
	}

	// The cluster default reaches the topic: reported, and old segments deleted.
	if err := alterBroker(t, adm, -1, "log.retention.ms", kmsg.StringPtr("1")); err != nil {
		t.Fatalf("set the cluster default log.retention.ms: %v", err)
	}
	check("retention.ms with the cluster default", topicConfig("retention.ms"),
		"1 DYNAMIC_DEFAULT_BROKER_CONFIG: DYNAMIC_DEFAULT_BROKER_CONFIG/log.retention.ms=1 STATIC_BROKER_CONFIG/log.retention.hours=100 DEFAULT_CONFIG/log.retention.hours=168")
	check("the cluster default resource", brokerConfig(-1, "log.retention.ms"),
		"1 DYNAMIC_DEFAULT_BROKER_CONFIG: DYNAMIC_DEFAULT_BROKER_CONFIG/log.retention.ms=1 STATIC_BROKER_CONFIG/log.retention.hours=100 DEFAULT_CONFIG/log.retention.hours=168")
	testutil.WaitFor(t, 30*time.Second, func() bool {
		offs, err := adm.ListStartOffsets(context.Background(), topic)
		if err != nil {
			return false
		}
		o, _ := offs.Lookup(topic, 0)
		return o.Err == nil && o.Offset > 0
	}, "old segments deleted under the dynamic cluster default log.retention.ms=1")

	// This broker's own value wins over the cluster default.
	if err := alterBroker(t, adm, 1, "log.retention.ms", kmsg.StringPtr("3600000")); err != nil {
		t.Fatalf("set broker 1's log.retention.ms: %v", err)
	}
	check("retention.ms with both", topicConfig("retention.ms"),
		"3600000 DYNAMIC_BROKER_CONFIG: DYNAMIC_BROKER_CONFIG/log.retention.ms=3600000 DYNAMIC_DEFAULT_BROKER_CONFIG/log.retention.ms=1 STATIC_BROKER_CONFIG/log.retention.hours=100 DEFAULT_CONFIG/log.retention.hours=168")
	rcs, err := adm.DescribeBrokerConfigs(ctxT(t, 10*time.Second), 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range rcs[0].Configs {
		if c.Key == "log.retention.ms" && c.Source != kmsg.ConfigSourceDynamicBrokerConfig {
			t.Errorf("broker 1's log.retention.ms: source %v", c.Source)
		}
	}
	// DELETE of both restores the static value.
	for _, broker := range []int32{1, -1} {
		if err := alterBroker(t, adm, broker, "log.retention.ms", nil); err != nil {
			t.Fatalf("delete log.retention.ms of broker %d: %v", broker, err)
		}
	}
	check("retention.ms after DELETE", topicConfig("retention.ms"), "360000000 DEFAULT_CONFIG:")
	check("the cluster default resource after DELETE", brokerConfig(-1, "log.retention.ms"), "absent")

	// message.max.bytes lowered at the cluster default refuses a bigger batch.
	if err := alterBroker(t, adm, -1, "message.max.bytes", kmsg.StringPtr("500")); err != nil {
		t.Fatalf("set message.max.bytes: %v", err)
	}
	err = cl.ProduceSync(ctxT(t, 20*time.Second), &kgo.Record{Value: make([]byte, 2000)}).FirstErr()
	if !errors.Is(err, kerr.MessageTooLarge) {
		t.Errorf("produce 2000 bytes under message.max.bytes=500: %v, want MESSAGE_TOO_LARGE", err)
	}

	// Persisted in the metadata log: a restart keeps it.
	b.Restart(t)
	adm = newAdmin(t, b)
	check("max.message.bytes after a restart", topicConfig("max.message.bytes"),
		"500 DYNAMIC_DEFAULT_BROKER_CONFIG: DYNAMIC_DEFAULT_BROKER_CONFIG/message.max.bytes=500 DEFAULT_CONFIG/message.max.bytes=1048588")
}
