package conformance

import (
	"strconv"
	"testing"
)

const (
	numKeys    = 10
	perKey     = 30
	partitions = 3
)

// TestClients runs every client against one broker: metadata, a produce/consume
// round trip per compression codec, and records produced by one client consumed by
// another.
func TestClients(t *testing.T) {
	tg := startTarget(t)

	t.Run("metadata", func(t *testing.T) {
		topic := tg.topic("meta")
		createTopic(t, tg, kcat, topic, partitions)
		for _, c := range allClients {
			t.Run(c.name, func(t *testing.T) {
				t.Parallel()
				checkMetadata(t, tg, c, topic)
			})
		}
	})

	t.Run("roundtrip", func(t *testing.T) {
		for _, c := range allClients {
			t.Run(c.name, func(t *testing.T) {
				t.Parallel()
				for _, codec := range codecs(t, tg, c) {
					t.Run(codec, func(t *testing.T) {
						roundTrip(t, tg, "rt", c, c, codec)
					})
				}
			})
		}
	})

	t.Run("cross", func(t *testing.T) {
		pairs := []struct{ producer, consumer client }{
			{kafkajs, kcat},
			{kafkajs, confluent},
			{confluent, kafkaPython},
			{kafkaPython, confluent},
			{kcat, kafkaPython},
		}
		for _, p := range pairs {
			t.Run(p.producer.name+"-to-"+p.consumer.name, func(t *testing.T) {
				t.Parallel()
				roundTrip(t, tg, "x", p.producer, p.consumer, "gzip")
			})
		}
	})
}

func checkMetadata(t *testing.T, tg *target, c client, topic string) {
	s := c.run(t, tg, "metadata")
	if len(s.Brokers) != 1 {
		t.Fatalf("brokers = %+v, want exactly one", s.Brokers)
	}
	b := s.Brokers[0]
	if addr := b.Host + ":" + strconv.Itoa(b.Port); addr != tg.addr {
		t.Errorf("broker advertised at %s, want %s", addr, tg.addr)
	}
	if got := s.Topics[topic]; got != partitions {
		t.Errorf("topic %s has %d partitions in metadata (topics %v), want %d", topic, got, s.Topics, partitions)
	}
}

// roundTrip creates a topic, produces the generated records with producer (using
// codec) and reads them back from the beginning with consumer.
func roundTrip(t *testing.T, tg *target, scenario string, producer, consumer client, codec string) {
	topic := tg.topic(scenario, producer.name, consumer.name, codec)
	tag := producer.name + "/" + codec
	createTopic(t, tg, producer, topic, partitions)
	p := producer.run(t, tg, "produce", "--topic", topic, "--codec", codec, "--tag", tag,
		"--keys", strconv.Itoa(numKeys), "--per-key", strconv.Itoa(perKey))
	if p.Produced != numKeys*perKey {
		t.Fatalf("%s produced %d records, want %d", producer.name, p.Produced, numKeys*perKey)
	}
	s := consumer.run(t, tg, "consume", "--topic", topic)
	if len(s.IncompletePartitions) > 0 {
		t.Errorf("%s did not reach the end of partitions %v", consumer.name, s.IncompletePartitions)
	}
	verifyRecords(t, tag, numKeys, perKey, producer.headers, p.Acks, s.Records)
}
