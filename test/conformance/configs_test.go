package conformance

import (
	"context"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestDescribeConfigs: kafka-python and confluent-kafka (librdkafka) describe a
// topic's and the broker's configs with synonyms and read what Kafka would answer:
// cleanup.policy, APPENDed compact through kadm, is "delete,compact" from
// DYNAMIC_TOPIC_CONFIG with the override and the broker default as synonyms;
// retention.ms is DEFAULT_CONFIG with no synonym (its list starts at
// log.retention.ms, unset); the broker's log.retention.hours is its default.
func TestDescribeConfigs(t *testing.T) {
	tg := startTarget(t)
	topic := tg.topic("configs")
	createTopic(t, tg, kafkaPython, topic, 1)

	admin := tg.addr
	if tg.admin != "" {
		admin = tg.admin
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(admin))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	compact := "compact"
	if _, err := adm.ValidateAlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.AppendConfig, Name: "cleanup.policy", Value: &compact}}, topic); err != nil {
		t.Fatalf("validate APPEND compact: %v", err)
	}
	resp, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.AppendConfig, Name: "cleanup.policy", Value: &compact}}, topic)
	if err == nil {
		_, err = resp.On(topic, nil)
	}
	if err != nil {
		t.Fatalf("APPEND compact to cleanup.policy: %v", err)
	}
	brokers, err := adm.ListBrokers(ctx)
	if err != nil || len(brokers) == 0 {
		t.Fatalf("list brokers: %v (%d)", err, len(brokers))
	}
	brokerID := strconv.Itoa(int(brokers[0].NodeID))

	for _, c := range []client{kafkaPython, confluent} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s := c.run(t, tg, "configs", "--topic", topic, "--broker-id", brokerID)
			check := func(resource, name, value, source string, synonyms ...string) {
				t.Helper()
				e, ok := s.Configs[resource][name]
				if !ok {
					t.Errorf("%s %s: not described", resource, name)
					return
				}
				got := "<null>"
				if e.Value != nil {
					got = *e.Value
				}
				if got != value || e.Source != source || !slices.Equal(e.Synonyms, synonyms) {
					t.Errorf("%s %s = %q from %s, synonyms %q; want %q from %s, synonyms %q", resource, name, got, e.Source, e.Synonyms, value, source, synonyms)
				}
			}
			check("topic", "cleanup.policy", "delete,compact", "DYNAMIC_TOPIC_CONFIG",
				"DYNAMIC_TOPIC_CONFIG:cleanup.policy=delete,compact", "DEFAULT_CONFIG:log.cleanup.policy=delete")
			check("topic", "retention.ms", "604800000", "DEFAULT_CONFIG")
			check("broker", "log.retention.hours", "168", "DEFAULT_CONFIG", "DEFAULT_CONFIG:log.retention.hours=168")
		})
	}
}
