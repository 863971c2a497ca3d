package integration

import (
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-streaming/samsa/internal/testutil"
)

func TestCreateTopicErrors(t *testing.T) {
	t.Parallel()
	b := testutil.StartBroker(t)
	adm := newAdmin(t, b)
	ctx := ctxT(t, 20*time.Second)
	createTopic(t, adm, "exists", 2, nil)

	cases := []struct {
		name  string
		topic string
		parts int32
		rf    int16
		cfg   map[string]*string
		want  error
	}{
		{"invalid name", "bad/name", 1, 1, nil, kerr.InvalidTopicException},
		{"dot", ".", 1, 1, nil, kerr.InvalidTopicException},
		{"already exists", "exists", 1, 1, nil, kerr.TopicAlreadyExists},
		{"replication factor above brokers", "rf3", 1, 3, nil, kerr.InvalidReplicationFactor},
		{"zero partitions", "zero", 0, 1, nil, kerr.InvalidPartitions},
		{"unknown config", "badcfg", 1, 1, map[string]*string{"no.such.config": kadm.StringPtr("1")}, kerr.InvalidConfig},
		{"bad config value", "badval", 1, 1, map[string]*string{"retention.ms": kadm.StringPtr("soon")}, kerr.InvalidConfig},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res, err := adm.CreateTopics(ctx, tc.parts, tc.rf, tc.cfg, tc.topic)
			if err != nil {
				t.Fatal(err)
			}
			if got := res[tc.topic].Err; !errors.Is(got, tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
	// The failed creations left nothing behind.
	topics, err := adm.ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if names := topics.Names(); len(names) != 1 || names[0] != "exists" {
		t.Fatalf("topics after failed creations: %v", names)
	}
}

func TestTopicConfigsAndPartitions(t *testing.T) {
	b := testutil.StartBroker(t)
	adm := newAdmin(t, b)
	ctx := ctxT(t, 30*time.Second)
	createTopic(t, adm, "cfg", 1, map[string]*string{"retention.ms": kadm.StringPtr("3600000")})

	describe := func(name string) (string, kmsg.ConfigSource) {
		t.Helper()
		rc, err := adm.DescribeTopicConfigs(ctx, "cfg")
		if err != nil {
			t.Fatal(err)
		}
		c, err := rc.On("cfg", nil)
		if err != nil || c.Err != nil {
			t.Fatalf("describe: %v %v", err, c.Err)
		}
		for _, e := range c.Configs {
			if e.Key == name {
				return e.MaybeValue(), e.Source
			}
		}
		t.Fatalf("config %s not described", name)
		return "", 0
	}
	if v, src := describe("retention.ms"); v != "3600000" || src != kmsg.ConfigSourceDynamicTopicConfig {
		t.Fatalf("retention.ms = %s (source %v)", v, src)
	}
	// Its synonyms, as kafka-configs --describe shows them: the override, then the
	// broker properties it would default to from log.retention.ms on (Kafka's
	// ConfigHelper), which is not set and has no default.
	rc, err := adm.DescribeTopicConfigs(ctx, "cfg")
	if err != nil {
		t.Fatal(err)
	}
	var synonyms []string
	for _, c := range rc[0].Configs {
		if c.Key == "retention.ms" {
			for _, s := range c.Synonyms {
				v := "<nil>"
				if s.Value != nil {
					v = *s.Value
				}
				synonyms = append(synonyms, fmt.Sprintf("%s:%s=%s", s.Source, s.Key, v))
			}
		}
	}
	if want := []string{"DYNAMIC_TOPIC_CONFIG:retention.ms=3600000"}; !slices.Equal(synonyms, want) {
		t.Fatalf("retention.ms synonyms = %v, want %v", synonyms, want)
	}
	if v, src := describe("cleanup.policy"); v != "delete" || src != kmsg.ConfigSourceDefaultConfig {
		t.Fatalf("cleanup.policy = %s (source %v)", v, src)
	}
	if v, src := describe("segment.jitter.ms"); v != "0" || src != kmsg.ConfigSourceDefaultConfig {
		t.Fatalf("segment.jitter.ms = %s (source %v)", v, src)
	}

	// Incremental alter: set one, delete another.
	_, err = adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{
		{Op: kadm.SetConfig, Name: "max.message.bytes", Value: kadm.StringPtr("2048")},
		{Op: kadm.DeleteConfig, Name: "retention.ms"},
		{Op: kadm.SetConfig, Name: "segment.jitter.ms", Value: kadm.StringPtr("60000")},
	}, "cfg")
	if err != nil {
		t.Fatal(err)
	}
	if v, src := describe("segment.jitter.ms"); v != "60000" || src != kmsg.ConfigSourceDynamicTopicConfig {
		t.Fatalf("segment.jitter.ms = %s (source %v)", v, src)
	}
	if v, _ := describe("max.message.bytes"); v != "2048" {
		t.Fatalf("max.message.bytes = %s", v)
	}
	if v, src := describe("retention.ms"); v != "604800000" || src != kmsg.ConfigSourceDefaultConfig {
		t.Fatalf("retention.ms after delete = %s (%v)", v, src)
	}
	// The new max.message.bytes applies to produce at once.
	c := newClient(t, b, kgo.DefaultProduceTopic("cfg"), kgo.ProducerBatchMaxBytes(1<<20))
	big := make([]byte, 4096)
	rand.Read(big) // incompressible, so the batch stays above 2048 bytes whatever the codec
	err = c.ProduceSync(ctx, &kgo.Record{Value: big}).FirstErr()
	if !errors.Is(err, kerr.MessageTooLarge) {
		t.Fatalf("oversize produce: %v, want MESSAGE_TOO_LARGE", err)
	}
	// Invalid value refused with a message naming it.
	res, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "segment.bytes", Value: kadm.StringPtr("-5")}}, "cfg")
	if err != nil {
		t.Fatal(err)
	}
	if r, _ := res.On("cfg", nil); !errors.Is(r.Err, kerr.InvalidConfig) || !strings.Contains(r.ErrMessage, "segment.bytes") {
		t.Fatalf("bad alter: %v %q", r.Err, r.ErrMessage)
	}

	// Partitions grow, never shrink.
	if _, err := adm.CreatePartitions(ctx, 3, "cfg"); err != nil {
		t.Fatal(err)
	}
	td, err := adm.ListTopics(ctx, "cfg")
	if err != nil || len(td["cfg"].Partitions) != 4 {
		t.Fatalf("after add: %v %v", err, td["cfg"].Partitions)
	}
	r2, err := adm.UpdatePartitions(ctx, 2, "cfg")
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(r2["cfg"].Err, kerr.InvalidPartitions) {
		t.Fatalf("shrink: %v", r2["cfg"].Err)
	}
	// The new partitions accept data.
	p3 := newClient(t, b, kgo.DefaultProduceTopic("cfg"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	produceSync(t, p3, &kgo.Record{Partition: 3, Value: []byte("x")})
}

func TestDeleteTopicRemovesFiles(t *testing.T) {
	b := testutil.StartBroker(t)
	adm := newAdmin(t, b)
	ctx := ctxT(t, 30*time.Second)
	createTopic(t, adm, "doomed", 2, nil)
	produceSync(t, newClient(t, b, kgo.DefaultProduceTopic("doomed")), &kgo.Record{Value: []byte("x")})
	dir := filepath.Join(b.Dir, "doomed-0")
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("partition dir missing before delete: %v", err)
	}
	res, err := adm.DeleteTopics(ctx, "doomed")
	if err != nil || res["doomed"].Err != nil {
		t.Fatalf("delete: %v %v", err, res["doomed"].Err)
	}
	testutil.WaitFor(t, 20*time.Second, func() bool {
		_, err := os.Stat(dir)
		return os.IsNotExist(err)
	}, "partition directory removed")
	td, err := adm.ListTopics(ctx)
	if err != nil || td.Has("doomed") {
		t.Fatalf("topic still listed: %v", err)
	}
	// The name can be used again, with a fresh log.
	createTopic(t, adm, "doomed", 1, nil)
	ends, err := adm.ListEndOffsets(ctx, "doomed")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := ends.Lookup("doomed", 0); o.Offset != 0 {
		t.Fatalf("recreated topic end offset %d", o.Offset)
	}
}

func TestListOffsetsAndDeleteRecords(t *testing.T) {
	b := testutil.StartBroker(t)
	adm := newAdmin(t, b)
	ctx := ctxT(t, 30*time.Second)
	createTopic(t, adm, "lo", 1, nil)
	c := newClient(t, b, kgo.DefaultProduceTopic("lo"), kgo.ProducerLinger(0))
	base := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	for i := 0; i < 10; i++ {
		produceSync(t, c, &kgo.Record{Value: value(i), Timestamp: base.Add(time.Duration(i) * time.Minute)})
	}
	// A record with an older timestamp after the newest one: max-timestamp must still
	// find offset 9.
	produceSync(t, c, &kgo.Record{Value: value(10), Timestamp: base})

	lookup := func(l kadm.ListedOffsets) kadm.ListedOffset {
		o, ok := l.Lookup("lo", 0)
		if !ok || o.Err != nil {
			t.Fatalf("list offsets: %v", o.Err)
		}
		return o
	}
	start, err := adm.ListStartOffsets(ctx, "lo")
	if err != nil || lookup(start).Offset != 0 {
		t.Fatalf("earliest: %v %v", err, start)
	}
	end, err := adm.ListEndOffsets(ctx, "lo")
	if err != nil || lookup(end).Offset != 11 {
		t.Fatalf("latest: %v %+v", err, lookup(end))
	}
	byTime, err := adm.ListOffsetsAfterMilli(ctx, base.Add(3*time.Minute+time.Second).UnixMilli(), "lo")
	if err != nil || lookup(byTime).Offset != 4 {
		t.Fatalf("by timestamp: %v %+v", err, lookup(byTime))
	}
	maxTS, err := adm.ListMaxTimestampOffsets(ctx, "lo")
	if err != nil || lookup(maxTS).Offset != 9 {
		t.Fatalf("max timestamp: %v %+v", err, lookup(maxTS))
	}

	// DeleteRecords moves the start; earliest and fetch follow it.
	offs := kadm.Offsets{}
	offs.Add(kadm.Offset{Topic: "lo", Partition: 0, At: 6})
	dr, err := adm.DeleteRecords(ctx, offs)
	if err != nil {
		t.Fatal(err)
	}
	if d, _ := dr.Lookup("lo", 0); d.Err != nil || d.LowWatermark != 6 {
		t.Fatalf("delete records: %+v", d)
	}
	start, err = adm.ListStartOffsets(ctx, "lo")
	if err != nil || lookup(start).Offset != 6 {
		t.Fatalf("earliest after delete: %+v", lookup(start))
	}
	got := consumeN(t, b, "lo", 5)
	if got[0].Offset != 6 || string(got[0].Value) != string(value(6)) {
		t.Fatalf("first record after delete: %d %s", got[0].Offset, got[0].Value)
	}
	// Fetching below the start is OFFSET_OUT_OF_RANGE.
	td, err := adm.ListTopics(ctx, "lo")
	if err != nil {
		t.Fatal(err)
	}
	req := kmsg.NewPtrFetchRequest()
	req.MaxBytes = 1 << 20
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = "lo"
	rt.TopicID = td["lo"].ID
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.FetchOffset = 2
	rp.PartitionMaxBytes = 1 << 20
	rp.CurrentLeaderEpoch = -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, newClient(t, b))
	if err != nil {
		t.Fatal(err)
	}
	if code := resp.Topics[0].Partitions[0].ErrorCode; code != kerr.OffsetOutOfRange.Code {
		t.Fatalf("fetch below start: error %d", code)
	}
}

func TestDescribeClusterAndLeaderEpochs(t *testing.T) {
	b := testutil.StartBroker(t)
	adm := newAdmin(t, b)
	ctx := ctxT(t, 20*time.Second)
	createTopic(t, adm, "ep", 1, nil)
	meta, err := adm.BrokerMetadata(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(meta.Brokers) != 1 || meta.Brokers[0].NodeID != 1 || meta.Cluster == "" || meta.Controller != 1 {
		t.Fatalf("cluster: %+v", meta)
	}
	td, err := adm.ListTopics(ctx, "ep")
	if err != nil {
		t.Fatal(err)
	}
	if td["ep"].ID == [16]byte{} {
		t.Fatal("topic id missing from metadata")
	}
	produceSync(t, newClient(t, b, kgo.DefaultProduceTopic("ep")), &kgo.Record{Value: []byte("a")}, &kgo.Record{Value: []byte("b")})

	// DescribeLogDirs reports the partition's size in its log directory.
	dirs, err := adm.DescribeAllLogDirs(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var size int64 = -1
	dirs.Each(func(d kadm.DescribedLogDir) {
		d.Topics.Each(func(p kadm.DescribedLogDirPartition) {
			if p.Topic == "ep" && p.Partition == 0 {
				size = p.Size
			}
		})
	})
	if size <= 0 {
		t.Fatalf("log dir size of ep-0 = %d", size)
	}

	// OffsetForLeaderEpoch: epoch 0 ends at the log end offset.
	req := kmsg.NewPtrOffsetForLeaderEpochRequest()
	rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
	rt.Topic = "ep"
	rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
	rp.CurrentLeaderEpoch = 0
	rp.LeaderEpoch = 0
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, newClient(t, b))
	if err != nil {
		t.Fatal(err)
	}
	p := resp.Topics[0].Partitions[0]
	if p.ErrorCode != 0 || p.LeaderEpoch != 0 || p.EndOffset != 2 {
		t.Fatalf("offset for leader epoch: %+v", p)
	}
	// A newer epoch than the broker's is UNKNOWN_LEADER_EPOCH, an older one FENCED.
	for epoch, want := range map[int32]*kerr.Error{5: kerr.UnknownLeaderEpoch} {
		req.Topics[0].Partitions[0].CurrentLeaderEpoch = epoch
		resp, err := req.RequestWith(ctx, newClient(t, b))
		if err != nil {
			t.Fatal(err)
		}
		if code := resp.Topics[0].Partitions[0].ErrorCode; code != want.Code {
			t.Fatalf("epoch %d: error %d, want %v", epoch, code, want)
		}
	}
}

// TestDeleteTopicDisabled: delete.topic.enable=false refuses deletions.
func TestDeleteTopicDisabled(t *testing.T) {
	b := testutil.StartBroker(t, "delete.topic.enable=false")
	adm := newAdmin(t, b)
	createTopic(t, adm, "kept", 1, nil)
	res, err := adm.DeleteTopics(ctxT(t, 10*time.Second), "kept")
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(res["kept"].Err, kerr.TopicDeletionDisabled) {
		t.Fatalf("delete with delete.topic.enable=false: %v", res["kept"].Err)
	}
}
