package integration

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/samsa-streaming/samsa/internal/testutil"
)

// TestRestartPersistence: topics, configs, records and producer ids survive a clean
// restart.
func TestRestartPersistence(t *testing.T) {
	b := testutil.StartBroker(t)
	adm := newAdmin(t, b)
	createTopic(t, adm, "keep", 2, map[string]*string{"retention.bytes": kadm.StringPtr("123456789")})
	c := newClient(t, b, kgo.DefaultProduceTopic("keep"))
	var recs []*kgo.Record
	for i := 0; i < 1000; i++ {
		recs = append(recs, &kgo.Record{Key: []byte(fmt.Sprint(i % 7)), Value: value(i)})
	}
	produceSync(t, c, recs...)
	firstPID, _, _ := c.ProducerID(ctxT(t, 10*time.Second))
	c.Close()

	b.Restart(t)

	adm = newAdmin(t, b)
	ctx := ctxT(t, 20*time.Second)
	rc, err := adm.DescribeTopicConfigs(ctx, "keep")
	if err != nil {
		t.Fatal(err)
	}
	cfg, _ := rc.On("keep", nil)
	found := false
	for _, e := range cfg.Configs {
		if e.Key == "retention.bytes" && e.MaybeValue() == "123456789" {
			found = true
		}
	}
	if !found {
		t.Fatal("topic config lost across restart")
	}
	got := consumeN(t, b, "keep", 1000)
	seen := map[string]bool{}
	for _, r := range got {
		seen[string(r.Value)] = true
	}
	if len(seen) != 1000 {
		t.Fatalf("%d distinct records after restart, want 1000", len(seen))
	}
	c2 := newClient(t, b, kgo.DefaultProduceTopic("keep"))
	produceSync(t, c2, &kgo.Record{Value: []byte("after")})
	secondPID, _, _ := c2.ProducerID(ctxT(t, 10*time.Second))
	if secondPID <= firstPID {
		t.Fatalf("producer id reused or went backwards across restart: %d then %d", firstPID, secondPID)
	}
}

// TestKill9DuringProduce kills the broker while producers are writing and checks after
// a restart that every acknowledged record is there, in order, exactly once.
func TestKill9DuringProduce(t *testing.T) {
	b := testutil.StartBroker(t)
	createTopic(t, newAdmin(t, b), "crash", 2, nil)
	c := newClient(t, b, kgo.DefaultProduceTopic("crash"), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RecordRetries(0), kgo.ProduceRequestTimeout(5*time.Second), kgo.RequestRetries(0))

	var (
		mu    sync.Mutex
		acked = map[int32][]string{}
		wg    sync.WaitGroup
	)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var count int
	for i := 0; ctx.Err() == nil && i < 200000; i++ {
		p := int32(i % 2)
		v := fmt.Sprintf("%d-%08d", p, i)
		wg.Add(1)
		c.Produce(ctx, &kgo.Record{Partition: p, Value: []byte(v)}, func(r *kgo.Record, err error) {
			defer wg.Done()
			if err == nil {
				mu.Lock()
				acked[r.Partition] = append(acked[r.Partition], string(r.Value))
				mu.Unlock()
			}
		})
		count++
		mu.Lock()
		n := len(acked[0]) + len(acked[1])
		mu.Unlock()
		if n >= 5000 {
			b.Kill()
			break
		}
	}
	cancel()
	c.Close()
	wg.Wait()
	if len(acked[0])+len(acked[1]) < 5000 {
		t.Fatalf("only %d records acknowledged before the kill", len(acked[0])+len(acked[1]))
	}

	b.StartAgain(t)
	for p := int32(0); p < 2; p++ {
		got := consumePartition(t, b, "crash", p)
		checkAckedPresent(t, p, acked[p], got)
	}
}

// consumePartition reads a partition from its log start to its current end offset.
func consumePartition(t testing.TB, b *testutil.Broker, topic string, p int32) []string {
	t.Helper()
	adm := newAdmin(t, b)
	ends, err := adm.ListEndOffsets(ctxT(t, 10*time.Second), topic)
	if err != nil {
		t.Fatal(err)
	}
	end, _ := ends.Lookup(topic, p)
	c := newClient(t, b, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {p: kgo.NewOffset().AtStart()}}))
	ctx := ctxT(t, 60*time.Second)
	var out []string
	next := int64(0)
	for next < end.Offset {
		fs := c.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read up to offset %d of %d", next, end.Offset)
		}
		for _, r := range fs.Records() {
			out = append(out, string(r.Value))
			next = r.Offset + 1
		}
	}
	return out
}

// checkAckedPresent asserts that acked (in acknowledgement order, which is produce order
// within a partition) appears in got in the same order, each exactly once.
func checkAckedPresent(t testing.TB, p int32, acked, got []string) {
	t.Helper()
	index := make(map[string]int, len(got))
	for i, v := range got {
		if _, dup := index[v]; dup {
			t.Fatalf("partition %d: record %s stored twice", p, v)
		}
		index[v] = i
	}
	last := -1
	for _, v := range acked {
		i, ok := index[v]
		if !ok {
			t.Fatalf("partition %d: acknowledged record %s lost (%d acked, %d stored)", p, v, len(acked), len(got))
		}
		if i < last {
			t.Fatalf("partition %d: acknowledged record %s out of order", p, v)
		}
		last = i
	}
}

// TestTornTailRecovery damages the end of the last segment while the broker is down:
// on start-up the damage is detected by CRC, the tail is truncated to the last whole
// batch with a log line, and everything before it is served.
func TestTornTailRecovery(t *testing.T) {
	for _, damage := range []string{"cut", "flip"} {
		t.Run(damage, func(t *testing.T) {
			b := testutil.StartBroker(t)
			createTopic(t, newAdmin(t, b), "torn", 1, nil)
			c := newClient(t, b, kgo.DefaultProduceTopic("torn"), kgo.ProducerLinger(0))
			for i := 0; i < 50; i++ {
				produceSync(t, c, &kgo.Record{Value: value(i)})
			}
			c.Close()
			b.Kill()

			seg := lastSegment(t, filepath.Join(b.Dir, "torn-0"))
			data, err := os.ReadFile(seg)
			if err != nil {
				t.Fatal(err)
			}
			switch damage {
			case "cut":
				data = data[:len(data)-7] // tear the last batch
			case "flip":
				data[len(data)-3] ^= 0xff // corrupt the last batch's payload
			}
			if err := os.WriteFile(seg, data, 0o644); err != nil {
				t.Fatal(err)
			}

			b.StartAgain(t)
			got := consumePartition(t, b, "torn", 0)
			if len(got) != 49 {
				t.Fatalf("%d records after recovery, want the 49 before the damaged batch", len(got))
			}
			for i, v := range got {
				if v != string(value(i)) {
					t.Fatalf("record %d = %s", i, v)
				}
			}
			if !strings.Contains(b.Log(), "truncat") {
				t.Fatalf("no log line about truncating the damaged tail:\n%s", b.Log())
			}
			// The log continues at the right offset.
			c = newClient(t, b, kgo.DefaultProduceTopic("torn"))
			r := &kgo.Record{Value: []byte("next")}
			produceSync(t, c, r)
			if r.Offset != 49 {
				t.Fatalf("next offset %d, want 49", r.Offset)
			}
		})
	}
}

func lastSegment(t testing.TB, dir string) string {
	t.Helper()
	logs, err := filepath.Glob(filepath.Join(dir, "*.log"))
	if err != nil || len(logs) == 0 {
		t.Fatalf("no segments in %s: %v", dir, err)
	}
	sort.Strings(logs)
	return logs[len(logs)-1]
}

// TestRetention: small segments and retention.bytes make old segments go; the log start
// offset advances, earliest follows it and fetching below it is out of range.
func TestRetention(t *testing.T) {
	b := testutil.StartBroker(t, "log.retention.check.interval.ms=200")
	adm := newAdmin(t, b)
	createTopic(t, adm, "ret", 1, map[string]*string{
		"segment.bytes":   kadm.StringPtr("4096"),
		"retention.bytes": kadm.StringPtr("8192"),
	})
	c := newClient(t, b, kgo.DefaultProduceTopic("ret"), kgo.ProducerLinger(0))
	for i := 0; i < 200; i++ {
		produceSync(t, c, &kgo.Record{Value: bytes.Repeat([]byte("x"), 200)})
	}
	// 200 records of ~270 bytes make ~13 segments of 4 KiB; retention.bytes=8192 keeps
	// the active segment and the newest whole segments within 8 KiB.
	var start int64
	testutil.WaitFor(t, 20*time.Second, func() bool {
		segs, _ := filepath.Glob(filepath.Join(b.Dir, "ret-0", "*.log"))
		s, err := adm.ListStartOffsets(ctxT(t, 5*time.Second), "ret")
		if err != nil {
			return false
		}
		o, _ := s.Lookup("ret", 0)
		start = o.Offset
		return len(segs) <= 4 && start > 0
	}, "retention.bytes to delete the oldest segments")
	got := consumeN(t, b, "ret", 1)
	if got[0].Offset != start {
		t.Fatalf("first readable offset %d, want log start %d", got[0].Offset, start)
	}
}

// TestRetentionByTime: records older than retention.ms are deleted by whole segments.
func TestRetentionByTime(t *testing.T) {
	b := testutil.StartBroker(t, "log.retention.check.interval.ms=200")
	adm := newAdmin(t, b)
	createTopic(t, adm, "old", 1, map[string]*string{"segment.bytes": kadm.StringPtr("1024")})
	c := newClient(t, b, kgo.DefaultProduceTopic("old"), kgo.ProducerLinger(0))
	old := time.Now().Add(-48 * time.Hour)
	for i := 0; i < 30; i++ {
		produceSync(t, c, &kgo.Record{Value: bytes.Repeat([]byte("o"), 100), Timestamp: old})
	}
	for i := 0; i < 5; i++ {
		produceSync(t, c, &kgo.Record{Value: []byte("new")})
	}
	_, err := adm.AlterTopicConfigs(ctxT(t, 10*time.Second), []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "retention.ms", Value: kadm.StringPtr("86400000")}}, "old")
	if err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 20*time.Second, func() bool {
		s, err := adm.ListStartOffsets(ctxT(t, 5*time.Second), "old")
		if err != nil {
			return false
		}
		o, _ := s.Lookup("old", 0)
		return o.Offset > 0
	}, "segments older than retention.ms to be deleted")
	// Nothing younger than retention was deleted.
	fresh := 0
	for _, v := range consumePartition(t, b, "old", 0) {
		if v == "new" {
			fresh++
		}
	}
	if fresh != 5 {
		t.Fatalf("%d of the 5 recent records remain", fresh)
	}
}
