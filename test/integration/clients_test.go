package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/IBM/sarama"
	kafkago "github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/compress"

	"github.com/samsa-streaming/samsa/internal/testutil"
)

// TestSarama produces keyed records with every codec through sarama's sync producer
// and reads them back with its partition consumer.
func TestSarama(t *testing.T) {
	b := testutil.StartBroker(t)
	codecs := map[string]sarama.CompressionCodec{
		"none": sarama.CompressionNone, "gzip": sarama.CompressionGZIP, "snappy": sarama.CompressionSnappy,
		"lz4": sarama.CompressionLZ4, "zstd": sarama.CompressionZSTD,
	}
	for name, codec := range codecs {
		t.Run(name, func(t *testing.T) {
			topic := "sarama-" + name
			createTopic(t, newAdmin(t, b), topic, 1, nil)
			cfg := sarama.NewConfig()
			cfg.Version = sarama.V3_6_0_0
			cfg.Producer.Return.Successes = true
			cfg.Producer.RequiredAcks = sarama.WaitForAll
			cfg.Producer.Compression = codec
			cfg.Producer.Idempotent = true
			cfg.Net.MaxOpenRequests = 1
			producer, err := sarama.NewSyncProducer([]string{b.Addr}, cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer producer.Close()
			var msgs []*sarama.ProducerMessage
			for i := 0; i < 100; i++ {
				msgs = append(msgs, &sarama.ProducerMessage{Topic: topic, Key: sarama.StringEncoder(fmt.Sprint(i % 3)), Value: sarama.ByteEncoder(value(i))})
			}
			if err := producer.SendMessages(msgs); err != nil {
				t.Fatal(err)
			}

			consumer, err := sarama.NewConsumer([]string{b.Addr}, cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer consumer.Close()
			pc, err := consumer.ConsumePartition(topic, 0, sarama.OffsetOldest)
			if err != nil {
				t.Fatal(err)
			}
			defer pc.Close()
			timeout := time.After(30 * time.Second)
			for i := 0; i < 100; i++ {
				select {
				case m := <-pc.Messages():
					if string(m.Value) != string(value(i)) || m.Offset != int64(i) || string(m.Key) != fmt.Sprint(i%3) {
						t.Fatalf("message %d: offset %d key %s value %s", i, m.Offset, m.Key, m.Value)
					}
				case err := <-pc.Errors():
					t.Fatal(err)
				case <-timeout:
					t.Fatalf("received %d of 100 messages", i)
				}
			}
		})
	}
}

// TestKafkaGo produces and consumes with segmentio/kafka-go, including its admin calls.
func TestKafkaGo(t *testing.T) {
	b := testutil.StartBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	client := &kafkago.Client{Addr: kafkago.TCP(b.Addr), Timeout: 10 * time.Second}
	resp, err := client.CreateTopics(ctx, &kafkago.CreateTopicsRequest{Topics: []kafkago.TopicConfig{{Topic: "kgo-seg", NumPartitions: 2, ReplicationFactor: 1}}})
	if err != nil || resp.Errors["kgo-seg"] != nil {
		t.Fatalf("create: %v %v", err, resp.Errors)
	}
	for _, codec := range []compress.Compression{0, compress.Gzip, compress.Snappy, compress.Lz4, compress.Zstd} {
		w := &kafkago.Writer{Addr: kafkago.TCP(b.Addr), Topic: "kgo-seg", Balancer: &kafkago.Hash{},
			RequiredAcks: kafkago.RequireAll, Compression: codec, BatchTimeout: 5 * time.Millisecond}
		var msgs []kafkago.Message
		for i := 0; i < 50; i++ {
			msgs = append(msgs, kafkago.Message{Key: []byte(fmt.Sprint(i % 4)), Value: value(i)})
		}
		if err := w.WriteMessages(ctx, msgs...); err != nil {
			t.Fatalf("write with %v: %v", codec, err)
		}
		w.Close()
	}
	total := 0
	for p := 0; p < 2; p++ {
		r := kafkago.NewReader(kafkago.ReaderConfig{Brokers: []string{b.Addr}, Topic: "kgo-seg", Partition: p, MaxWait: 500 * time.Millisecond})
		lag, err := r.ReadLag(ctx)
		if err != nil {
			t.Fatal(err)
		}
		perKey := map[string]int{}
		for i := int64(0); i < lag; i++ {
			m, err := r.ReadMessage(ctx)
			if err != nil {
				t.Fatal(err)
			}
			// Key k carries values k, k+4, k+8, ... below 50, once per writer, in order.
			var k, n int
			fmt.Sscanf(string(m.Key), "%d", &k)
			fmt.Sscanf(string(m.Value), "value-%d", &n)
			perRound := (50 - k + 3) / 4
			j := perKey[string(m.Key)]
			if want := k + 4*(j%perRound); n != want {
				t.Fatalf("key %d: message %d has value %d, want %d", k, j, n, want)
			}
			perKey[string(m.Key)]++
			total++
		}
		r.Close()
	}
	if total != 250 {
		t.Fatalf("read %d messages, want 250", total)
	}
}
