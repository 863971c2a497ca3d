package integration

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/samsa-streaming/samsa/internal/testutil"
)

// TestKeyedOrderPerPartition produces keyed records and checks that every key's records
// come back in the order produced, all on one partition.
func TestKeyedOrderPerPartition(t *testing.T) {
	b := testutil.StartBroker(t)
	adm := newAdmin(t, b)
	createTopic(t, adm, "orders", 3, nil)

	c := newClient(t, b, kgo.DefaultProduceTopic("orders"))
	const perKey, keys = 200, 5
	var recs []*kgo.Record
	for i := 0; i < perKey; i++ {
		for k := 0; k < keys; k++ {
			recs = append(recs, &kgo.Record{Key: []byte(fmt.Sprintf("key-%d", k)), Value: value(i)})
		}
	}
	produceSync(t, c, recs...)

	got := consumeN(t, b, "orders", perKey*keys)
	next := map[string]int{}
	partOf := map[string]int32{}
	for _, r := range got {
		k := string(r.Key)
		if p, ok := partOf[k]; ok && p != r.Partition {
			t.Fatalf("key %s on partitions %d and %d", k, p, r.Partition)
		}
		partOf[k] = r.Partition
		if want := value(next[k]); !bytes.Equal(r.Value, want) {
			t.Fatalf("key %s: got %s, want %s", k, r.Value, want)
		}
		next[k]++
	}
	for k := 0; k < keys; k++ {
		if n := next[fmt.Sprintf("key-%d", k)]; n != perKey {
			t.Fatalf("key-%d: %d records, want %d", k, n, perKey)
		}
	}
}

// TestCompressionCodecs round-trips records through every codec.
func TestCompressionCodecs(t *testing.T) {
	b := testutil.StartBroker(t)
	adm := newAdmin(t, b)
	codecs := map[string]kgo.CompressionCodec{
		"none": kgo.NoCompression(), "gzip": kgo.GzipCompression(), "snappy": kgo.SnappyCompression(),
		"lz4": kgo.Lz4Compression(), "zstd": kgo.ZstdCompression(),
	}
	for name, codec := range codecs {
		t.Run(name, func(t *testing.T) {
			topic := "codec-" + name
			createTopic(t, adm, topic, 1, nil)
			c := newClient(t, b, kgo.DefaultProduceTopic(topic), kgo.ProducerBatchCompression(codec))
			var recs []*kgo.Record
			for i := 0; i < 500; i++ {
				recs = append(recs, &kgo.Record{Value: bytes.Repeat(value(i), 10)})
			}
			produceSync(t, c, recs...)
			got := consumeN(t, b, topic, len(recs))
			for i, r := range got {
				if !bytes.Equal(r.Value, bytes.Repeat(value(i), 10)) || r.Offset != int64(i) {
					t.Fatalf("record %d: offset %d value %.20s", i, r.Offset, r.Value)
				}
			}
		})
	}
}

// TestAcks produces with acks 0, 1 and all and reads everything back.
func TestAcks(t *testing.T) {
	b := testutil.StartBroker(t)
	adm := newAdmin(t, b)
	for _, tc := range []struct {
		name string
		acks kgo.Acks
		opts []kgo.Opt
	}{
		{"acks0", kgo.NoAck(), []kgo.Opt{kgo.DisableIdempotentWrite()}},
		{"acks1", kgo.LeaderAck(), []kgo.Opt{kgo.DisableIdempotentWrite()}},
		{"acksall", kgo.AllISRAcks(), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			topic := "acks-" + tc.name
			createTopic(t, adm, topic, 1, nil)
			opts := append([]kgo.Opt{kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(tc.acks)}, tc.opts...)
			c := newClient(t, b, opts...)
			var recs []*kgo.Record
			for i := 0; i < 300; i++ {
				recs = append(recs, &kgo.Record{Value: value(i)})
			}
			produceSync(t, c, recs...)
			got := consumeN(t, b, topic, len(recs))
			for i, r := range got {
				if !bytes.Equal(r.Value, value(i)) {
					t.Fatalf("record %d = %s", i, r.Value)
				}
			}
		})
	}
}

// TestFetchWaitsForData checks that a consumer blocked on an empty partition receives a
// record produced later (Fetch as a delayed operation woken by the append).
func TestFetchWaitsForData(t *testing.T) {
	b := testutil.StartBroker(t)
	createTopic(t, newAdmin(t, b), "later", 1, nil)
	consumer := newClient(t, b, kgo.ConsumeTopics("later"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(10*time.Second))
	got := make(chan *kgo.Record, 1)
	go func() {
		ctx := ctxT(t, 30*time.Second)
		for ctx.Err() == nil {
			if recs := consumer.PollFetches(ctx).Records(); len(recs) > 0 {
				got <- recs[0]
				return
			}
		}
	}()
	produceSync(t, newClient(t, b, kgo.DefaultProduceTopic("later")), &kgo.Record{Value: []byte("hello")})
	select {
	case r := <-got:
		if string(r.Value) != "hello" || r.Offset != 0 {
			t.Fatalf("got %q at %d", r.Value, r.Offset)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("consumer never received the record")
	}
}

// TestTopicCompressionType: a topic with compression.type=zstd stores uncompressed
// producer batches recompressed with zstd, and consumers read them unchanged.
func TestTopicCompressionType(t *testing.T) {
	b := testutil.StartBroker(t)
	createTopic(t, newAdmin(t, b), "zt", 1, map[string]*string{"compression.type": kadm.StringPtr("zstd")})
	c := newClient(t, b, kgo.DefaultProduceTopic("zt"), kgo.ProducerBatchCompression(kgo.NoCompression()))
	var recs []*kgo.Record
	for i := 0; i < 100; i++ {
		recs = append(recs, &kgo.Record{Key: []byte("k"), Value: bytes.Repeat(value(i), 20)})
	}
	produceSync(t, c, recs...)
	seg, err := os.ReadFile(filepath.Join(b.Dir, "zt-0", "00000000000000000000.log"))
	if err != nil {
		t.Fatal(err)
	}
	if len(seg) < 61 || seg[22]&0x07 != 4 {
		t.Fatalf("stored batch codec %d, want zstd (4)", seg[22]&0x07)
	}
	for i, r := range consumeN(t, b, "zt", 100) {
		if !bytes.Equal(r.Value, bytes.Repeat(value(i), 20)) || r.Offset != int64(i) {
			t.Fatalf("record %d: offset %d", i, r.Offset)
		}
	}
}

// TestTopicCompressionTypeMaxMessageBytes: a batch the broker recompresses with the
// topic's codec is held to max.message.bytes again, as Kafka holds it: a small zstd
// batch of 300 KiB of zeros becomes 300 KiB on a topic with
// compression.type=uncompressed and max.message.bytes=64 KiB, and is refused with
// MESSAGE_TOO_LARGE, nothing stored; a batch that stays under the limit is stored.
func TestTopicCompressionTypeMaxMessageBytes(t *testing.T) {
	b := testutil.StartBroker(t)
	createTopic(t, newAdmin(t, b), "plain", 1, map[string]*string{
		"compression.type": kadm.StringPtr("uncompressed"), "max.message.bytes": kadm.StringPtr("65536")})
	c := newClient(t, b, kgo.DefaultProduceTopic("plain"), kgo.ProducerBatchCompression(kgo.ZstdCompression()),
		kgo.RecordRetries(0))
	err := c.ProduceSync(ctxT(t, 20*time.Second), &kgo.Record{Value: make([]byte, 300<<10)}).FirstErr()
	if !errors.Is(err, kerr.MessageTooLarge) {
		t.Fatalf("produce of a batch 300 KiB once uncompressed: %v, want MESSAGE_TOO_LARGE", err)
	}
	produceSync(t, c, &kgo.Record{Value: make([]byte, 10<<10)})
	recs := consumeN(t, b, "plain", 1)
	if recs[0].Offset != 0 || len(recs[0].Value) != 10<<10 {
		t.Fatalf("first record stored: offset %d, %d bytes; want the 10 KiB record at offset 0", recs[0].Offset, len(recs[0].Value))
	}
}

// TestTopicCompressionLevel: compression.gzip.level applies when the broker
// recompresses (KIP-390): the same uncompressed records stored at level 9 take less
// disk than at level 1, and read back unchanged from both.
func TestTopicCompressionLevel(t *testing.T) {
	b := testutil.StartBroker(t)
	adm := newAdmin(t, b)
	gzip := kadm.StringPtr("gzip")
	createTopic(t, adm, "gz1", 1, map[string]*string{"compression.type": gzip, "compression.gzip.level": kadm.StringPtr("1")})
	createTopic(t, adm, "gz9", 1, map[string]*string{"compression.type": gzip, "compression.gzip.level": kadm.StringPtr("9")})
	values := make([][]byte, 200)
	for i := range values {
		values[i] = testutil.Words(uint64(i), 2000)
	}
	c := newClient(t, b, kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.ProducerLinger(50*time.Millisecond))
	sizes := map[string]int64{}
	for _, topic := range []string{"gz1", "gz9"} {
		var recs []*kgo.Record
		for _, v := range values {
			recs = append(recs, &kgo.Record{Topic: topic, Value: v})
		}
		produceSync(t, c, recs...)
		fi, err := os.Stat(filepath.Join(b.Dir, topic+"-0", "00000000000000000000.log"))
		if err != nil {
			t.Fatal(err)
		}
		sizes[topic] = fi.Size()
		for i, r := range consumeN(t, b, topic, len(values)) {
			if !bytes.Equal(r.Value, values[i]) {
				t.Fatalf("%s: record %d differs", topic, i)
			}
		}
	}
	if sizes["gz9"] >= sizes["gz1"] {
		t.Fatalf("stored at gzip level 9: %d bytes, at level 1: %d bytes; want level 9 smaller", sizes["gz9"], sizes["gz1"])
	}
}

// TestTopicPreallocate: a topic with preallocate=true reserves disk blocks past its
// active segment's end once the segment has grown by megabytes; without it (the
// default, as in Kafka) the segment holds no blocks past its end, until the config is
// altered on the running topic. Records read back unchanged either way.
//
// The reserve is used up by the appends after it and renewed by the one that passes
// it, so the disk past the end is sampled after every small step of producing and the
// largest sample is held to the reserve (a quarter of the segment, at least 1 MiB).
func TestTopicPreallocate(t *testing.T) {
	b := testutil.StartBroker(t)
	adm := newAdmin(t, b)
	createTopic(t, adm, "pre", 1, map[string]*string{"preallocate": kadm.StringPtr("true")})
	createTopic(t, adm, "nopre", 1, nil)
	c := newClient(t, b, kgo.ProducerLinger(20*time.Millisecond), kgo.ProducerBatchMaxBytes(1<<20),
		kgo.ProducerBatchCompression(kgo.NoCompression()))
	// pastEnd is the disk the active segment holds beyond its length.
	pastEnd := func(topic string) int64 {
		fi, err := os.Stat(filepath.Join(b.Dir, topic+"-0", "00000000000000000000.log"))
		if err != nil {
			t.Fatal(err)
		}
		return fi.Sys().(*syscall.Stat_t).Blocks*512 - (fi.Size()+4095)&^4095
	}
	// produce writes 6,000 records of 1.2 KB in steps of 100 and returns the most disk
	// the segment held past its end after a step.
	produce := func(topic string, from int) (most int64) {
		for step := from; step < from+6000; step += 100 {
			var recs []*kgo.Record
			for i := step; i < step+100; i++ {
				recs = append(recs, &kgo.Record{Topic: topic, Value: bytes.Repeat(value(i), 100)})
			}
			produceSync(t, c, recs...)
			most = max(most, pastEnd(topic))
		}
		return most
	}
	if !canFallocate(t, filepath.Dir(b.Dir)) {
		t.Skip("the test directory's file system cannot reserve blocks past a file's end")
	}
	if r := produce("pre", 0); r < 1<<20 {
		t.Fatalf("preallocate=true: at most %d bytes of disk past the segment's end, want the reserve", r)
	}
	if r := produce("nopre", 0); r > 64<<10 {
		t.Fatalf("default topic: %d bytes of disk past the segment's end, want none (preallocate defaults to false)", r)
	}
	res, err := adm.AlterTopicConfigs(ctxT(t, 10*time.Second),
		[]kadm.AlterConfig{{Op: kadm.SetConfig, Name: "preallocate", Value: kadm.StringPtr("true")}}, "nopre")
	if err == nil {
		err = res[0].Err
	}
	if err != nil {
		t.Fatalf("alter preallocate: %v", err)
	}
	if r := produce("nopre", 6000); r < 1<<20 {
		t.Fatalf("after preallocate=true: at most %d bytes past the segment's end, want the reserve", r)
	}
	for i, r := range consumeN(t, b, "nopre", 12000) {
		if !bytes.Equal(r.Value, bytes.Repeat(value(i), 100)) || r.Offset != int64(i) {
			t.Fatalf("record %d read back at offset %d differs", i, r.Offset)
		}
	}
}

// canFallocate reports whether dir's file system reserves blocks past a file's end.
func canFallocate(t *testing.T, dir string) bool {
	f, err := os.CreateTemp(dir, "fallocate")
	if err != nil {
		t.Fatal(err)
	}
	defer os.Remove(f.Name())
	defer f.Close()
	return syscall.Fallocate(int(f.Fd()), 1 /* FALLOC_FL_KEEP_SIZE */, 0, 1<<20) == nil
}

// TestLargeBatches produces many batches near 1 MiB on one connection (their request
// frames are read into reused buffers) and reads every record back intact.
func TestLargeBatches(t *testing.T) {
	b := testutil.StartBroker(t)
	createTopic(t, newAdmin(t, b), "large", 2, nil)
	c := newClient(t, b, kgo.DefaultProduceTopic("large"), kgo.ProducerLinger(20*time.Millisecond),
		kgo.ProducerBatchMaxBytes(1<<20), kgo.ProducerBatchCompression(kgo.NoCompression()))
	const n = 6000
	var recs []*kgo.Record
	for i := 0; i < n; i++ {
		v := bytes.Repeat([]byte{byte(i)}, 900)
		copy(v, value(i))
		recs = append(recs, &kgo.Record{Key: []byte(fmt.Sprint(i % 2)), Value: v})
	}
	produceSync(t, c, recs...)
	got := consumeN(t, b, "large", n)
	seen := make(map[string]bool, n)
	for _, r := range got {
		var i int
		fmt.Sscanf(string(r.Value[:12]), "value-%06d", &i)
		want := bytes.Repeat([]byte{byte(i)}, 900)
		copy(want, value(i))
		if !bytes.Equal(r.Value, want) {
			t.Fatalf("record %d at %d/%d is damaged", i, r.Partition, r.Offset)
		}
		seen[string(r.Value[:12])] = true
	}
	if len(seen) != n {
		t.Fatalf("%d distinct records, want %d", len(seen), n)
	}
}

// TestMinInsyncReplicas: acks=all is refused with NOT_ENOUGH_REPLICAS when the ISR is
// smaller than min.insync.replicas; acks=1 still writes.
func TestMinInsyncReplicas(t *testing.T) {
	b := testutil.StartBroker(t)
	createTopic(t, newAdmin(t, b), "strict", 1, map[string]*string{"min.insync.replicas": kadm.StringPtr("2")})
	all := newClient(t, b, kgo.DefaultProduceTopic("strict"), kgo.RecordRetries(1))
	err := all.ProduceSync(ctxT(t, 20*time.Second), &kgo.Record{Value: []byte("x")}).FirstErr()
	if !errors.Is(err, kerr.NotEnoughReplicas) {
		t.Fatalf("acks=all with ISR 1 < min.insync.replicas 2: %v", err)
	}
	one := newClient(t, b, kgo.DefaultProduceTopic("strict"), kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
	produceSync(t, one, &kgo.Record{Value: []byte("y")})
}

// TestLogAppendTime: with message.timestamp.type=LogAppendTime the broker stamps the
// append time, replacing the producer's timestamps.
func TestLogAppendTime(t *testing.T) {
	b := testutil.StartBroker(t)
	createTopic(t, newAdmin(t, b), "stamped", 1, map[string]*string{"message.timestamp.type": kadm.StringPtr("LogAppendTime")})
	c := newClient(t, b, kgo.DefaultProduceTopic("stamped"))
	old := time.Now().Add(-240 * time.Hour)
	before := time.Now().Add(-time.Second)
	produceSync(t, c, &kgo.Record{Value: []byte("x"), Timestamp: old})
	r := consumeN(t, b, "stamped", 1)[0]
	if r.Timestamp.Before(before) || r.Timestamp.After(time.Now().Add(time.Second)) {
		t.Fatalf("timestamp %v, want the append time (about %v)", r.Timestamp, time.Now())
	}
	if r.Attrs.TimestampType() != 1 {
		t.Fatal("record not marked LogAppendTime")
	}
}

// TestTimestampBounds: message.timestamp.before.max.ms and .after.max.ms (and the older
// .difference.max.ms standing in for both) refuse a record whose CreateTime timestamp
// is too far from the broker's clock with INVALID_TIMESTAMP, in compressed batches
// too; a LogAppendTime topic and a topic without bounds take any timestamp. Exactly
// the accepted records read back.
func TestTimestampBounds(t *testing.T) {
	b := testutil.StartBroker(t)
	adm := newAdmin(t, b)
	minute := kadm.StringPtr("60000")
	createTopic(t, adm, "bounded", 1, map[string]*string{
		"message.timestamp.before.max.ms": minute, "message.timestamp.after.max.ms": minute})
	createTopic(t, adm, "difference", 1, map[string]*string{"message.timestamp.difference.max.ms": minute})
	createTopic(t, adm, "appendtime", 1, map[string]*string{
		"message.timestamp.difference.max.ms": minute, "message.timestamp.type": kadm.StringPtr("LogAppendTime")})
	createTopic(t, adm, "unbounded", 1, nil)

	now := time.Now()
	hourAgo, inAnHour := now.Add(-time.Hour), now.Add(time.Hour)
	cases := []struct {
		topic   string
		ts      time.Time
		refused bool
	}{
		{"bounded", now, false}, {"bounded", hourAgo, true}, {"bounded", inAnHour, true},
		{"difference", now, false}, {"difference", hourAgo, true}, {"difference", inAnHour, true},
		{"appendtime", hourAgo, false},
		{"unbounded", hourAgo, false}, {"unbounded", inAnHour, false},
	}
	accepted := map[string][]time.Time{}
	for _, codec := range []kgo.CompressionCodec{kgo.NoCompression(), kgo.ZstdCompression()} {
		c := newClient(t, b, kgo.ProducerBatchCompression(codec), kgo.DisableIdempotentWrite())
		for _, tc := range cases {
			err := c.ProduceSync(ctxT(t, 20*time.Second), &kgo.Record{Topic: tc.topic, Timestamp: tc.ts, Value: []byte("v")}).FirstErr()
			switch {
			case tc.refused && !errors.Is(err, kerr.InvalidTimestamp):
				t.Fatalf("%s, timestamp %v from now: %v, want INVALID_TIMESTAMP", tc.topic, tc.ts.Sub(now).Round(time.Minute), err)
			case !tc.refused && err != nil:
				t.Fatalf("%s, timestamp %v from now: %v", tc.topic, tc.ts.Sub(now).Round(time.Minute), err)
			case !tc.refused:
				accepted[tc.topic] = append(accepted[tc.topic], tc.ts)
			}
		}
	}
	for topic, want := range accepted {
		got := consumeN(t, b, topic, len(want))
		if len(got) != len(want) {
			t.Fatalf("%s: read %d records, want the %d accepted", topic, len(got), len(want))
		}
		for i, r := range got {
			if topic == "appendtime" {
				if r.Timestamp.Before(now.Add(-time.Minute)) {
					t.Fatalf("appendtime: record %d has timestamp %v, want the broker's append time", i, r.Timestamp)
				}
				continue
			}
			if r.Timestamp.UnixMilli() != want[i].UnixMilli() {
				t.Fatalf("%s: record %d has timestamp %v, want %v", topic, i, r.Timestamp, want[i])
			}
		}
	}
}
