package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/samsa-streaming/samsa/internal/testutil"
)

// readKeyed reads partition 0 of topic from its start to its end (the last stable
// offset for read_committed) and returns every data record as key → values in offset
// order, a tombstone as "<nil>".
func readKeyed(t testing.TB, b *testutil.Broker, topic string, committed bool) map[string][]string {
	t.Helper()
	level := kgo.ReadUncommitted()
	if committed {
		level = kgo.ReadCommitted()
	}
	cl := newClient(t, b, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}),
		kgo.FetchIsolationLevel(level), kgo.KeepControlRecords())
	defer cl.Close()
	ctx := ctxT(t, 30*time.Second)
	adm := kadm.NewClient(cl)
	list := adm.ListEndOffsets
	if committed {
		list = adm.ListCommittedOffsets
	}
	ends, err := list(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	end, _ := ends.Lookup(topic, 0)
	got := map[string][]string{}
	pos := int64(0)
	for pos < end.Offset {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %s to %d of %d before the deadline", topic, pos, end.Offset)
		}
		fs.EachError(func(_ string, p int32, err error) { t.Fatalf("fetch %s/%d: %v", topic, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			pos = max(pos, r.Offset+1)
			if r.Attrs.IsControl() {
				return
			}
			v := string(r.Value)
			if r.Value == nil {
				v = "<nil>"
			}
			got[string(r.Key)] = append(got[string(r.Key)], v)
		})
	}
	return got
}

// cleanedUpTo reports whether the cleaner checkpointed topic-0 at offset or beyond.
func cleanedUpTo(b *testutil.Broker, topic string, offset int64) bool {
	data, err := os.ReadFile(filepath.Join(b.Dir, "cleaner-offset-checkpoint"))
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(data), "\n") {
		var tp string
		var part int32
		var off int64
		if n, _ := fmt.Sscanf(line, "%s %d %d", &tp, &part, &off); n == 3 && tp == topic && part == 0 && off >= offset {
			return true
		}
	}
	return false
}

// TestCompactionTransactionalTombstoneAcrossSegments: a committed transaction deletes
// a key and its commit marker lands in the next segment, still active when the
// transaction's segment is cleaned. The tombstone must shadow the key's older value
// (Kafka counts every transactional batch below the last stable offset that is not
// aborted), so once delete.retention.ms has passed and the tombstone is gone, the key
// stays deleted, before and after a kill -9 and restart; the aborted overwrite never
// shows, and read_committed sees the latest committed value of every other key.
func TestCompactionTransactionalTombstoneAcrossSegments(t *testing.T) {
	b := testutil.StartBroker(t, "log.cleaner.backoff.ms=100", "log.retention.check.interval.ms=100")
	adm := newAdmin(t, b)
	const topic = "compacted-txn"
	createTopic(t, adm, topic, 1, map[string]*string{
		"cleanup.policy":            kadm.StringPtr("compact"),
		"segment.bytes":             kadm.StringPtr("2048"),
		"min.cleanable.dirty.ratio": kadm.StringPtr("0.01"),
		"delete.retention.ms":       kadm.StringPtr("1000"),
		"file.delete.delay.ms":      kadm.StringPtr("100"),
	})
	// Uncompressed, so that the sizes below decide where segments roll.
	plain := newClient(t, b, kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(0), kgo.ProducerBatchCompression(kgo.NoCompression()))
	p := newTxnProducer(t, b, "compacted-txn", kgo.ProducerLinger(0), kgo.ProducerBatchCompression(kgo.NoCompression()))
	rec := func(key, val string) *kgo.Record {
		r := &kgo.Record{Topic: topic, Key: []byte(key)}
		if val != "" {
			r.Value = []byte(val)
		}
		return r
	}
	pad := strings.Repeat("p", 1900)
	produceSync(t, plain, rec("a", "old"), rec("b", "b-old"))
	inTxn(t, p, false, rec("b", "b-aborted"))
	// One batch nearly filling a segment: it starts a segment and its marker the next.
	del := []*kgo.Record{rec("a", ""), rec("pad", pad)}
	inTxn(t, p, true, del...)
	markerOffset := del[1].Offset + 1
	// Let a cleaning run while the marker's segment is the active one.
	testutil.WaitFor(t, 30*time.Second, func() bool { return cleanedUpTo(b, topic, markerOffset) },
		"the cleaner to clean up to the marker's segment")
	inTxn(t, p, true, rec("b", "b-new"))
	produceSync(t, plain, rec("end", pad)) // rolls the marker's segment
	produceSync(t, plain, rec("end", pad))

	check := func(when string) {
		t.Helper()
		var got map[string][]string
		testutil.WaitFor(t, 30*time.Second, func() bool {
			got = readKeyed(t, b, topic, true)
			return len(got["a"]) == 0 || (len(got["a"]) == 1 && got["a"][0] == "old")
		}, when+": the tombstone of a to be removed after delete.retention.ms")
		if len(got["a"]) != 0 {
			t.Fatalf("%s: the deleted key came back: a=%q", when, got["a"])
		}
		if b := got["b"]; len(b) == 0 || b[len(b)-1] != "b-new" {
			t.Fatalf("%s: read_committed b=%q, want b-new last", when, b)
		}
		for k, vs := range readKeyed(t, b, topic, false) {
			for _, v := range vs {
				if v == "b-aborted" || (k == "a" && v == "old") {
					t.Fatalf("%s: read_uncommitted sees %s=%s", when, k, v)
				}
			}
		}
	}
	check("after compaction")
	b.Kill()
	b.StartAgain(t)
	check("after kill -9 and restart")
}
