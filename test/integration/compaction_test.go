package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/samsa-streaming/samsa/internal/testutil"
)

// dirSize sums the sizes of a partition's segment files.
func dirSize(t testing.TB, dir string) int64 {
	t.Helper()
	logs, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	var n int64
	for _, l := range logs {
		if st, err := os.Stat(l); err == nil {
			n += st.Size()
		}
	}
	return n
}

// TestCompaction writes many updates to few keys and tombstones some of them; the
// cleaner leaves exactly the latest value per key at its original offset, removes the
// tombstones after delete.retention.ms, and shrinks the log.
func TestCompaction(t *testing.T) {
	b := testutil.StartBroker(t, "log.cleaner.backoff.ms=100", "log.retention.check.interval.ms=100")
	adm := newAdmin(t, b)
	createTopic(t, adm, "compacted", 1, map[string]*string{
		"cleanup.policy":            kadm.StringPtr("compact"),
		"segment.bytes":             kadm.StringPtr("2048"),
		"min.cleanable.dirty.ratio": kadm.StringPtr("0.01"),
		"delete.retention.ms":       kadm.StringPtr("2000"),
		"file.delete.delay.ms":      kadm.StringPtr("100"),
	})
	c := newClient(t, b, kgo.DefaultProduceTopic("compacted"), kgo.ProducerLinger(0))

	// A keyless record is refused on a compacted topic.
	if err := c.ProduceSync(ctxT(t, 10*time.Second), &kgo.Record{Value: []byte("no key")}).FirstErr(); err == nil {
		t.Fatal("keyless record accepted on a compacted topic")
	} else if !isInvalidRecord(err) {
		t.Fatalf("keyless record: %v, want INVALID_RECORD", err)
	}

	const keys, rounds = 10, 40
	latest := map[string]int64{} // key → offset of its latest value
	latestValue := map[string]string{}
	for r := 0; r < rounds; r++ {
		for k := 0; k < keys; k++ {
			key, val := fmt.Sprintf("k%d", k), fmt.Sprintf("v%d-%d", k, r)
			rec := &kgo.Record{Key: []byte(key), Value: []byte(val)}
			produceSync(t, c, rec)
			latest[key], latestValue[key] = rec.Offset, val
		}
	}
	for k := 0; k < 3; k++ { // tombstones for k0..k2
		key := fmt.Sprintf("k%d", k)
		rec := &kgo.Record{Key: []byte(key)}
		produceSync(t, c, rec)
		latest[key], latestValue[key] = rec.Offset, "<tombstone>"
	}
	// Roll past everything above: the active segment is never cleaned.
	end := &kgo.Record{Key: []byte("end"), Value: make([]byte, 3000)}
	produceSync(t, c, end)
	before := dirSize(t, filepath.Join(b.Dir, "compacted-0"))

	read := func() map[string][]int64 {
		got := map[string][]int64{}
		cl := newClient(t, b, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"compacted": {0: kgo.NewOffset().AtStart()}}))
		defer cl.Close()
		ctx := ctxT(t, 20*time.Second)
		for {
			fs := cl.PollFetches(ctx)
			if ctx.Err() != nil {
				t.Fatal("could not read the compacted topic to its end")
			}
			for _, r := range fs.Records() {
				v := string(r.Value)
				if r.Value == nil {
					v = "<tombstone>"
				}
				if string(r.Key) != "end" && v != latestValue[string(r.Key)] {
					got[string(r.Key)] = append(got[string(r.Key)], -r.Offset-1) // a superseded value
				} else {
					got[string(r.Key)] = append(got[string(r.Key)], r.Offset)
				}
				if r.Offset == end.Offset {
					return got
				}
			}
		}
	}
	compactedWithTombstones := func(got map[string][]int64, wantTombstones bool) bool {
		for k := 0; k < keys; k++ {
			key := fmt.Sprintf("k%d", k)
			offs := got[key]
			if k < 3 && !wantTombstones {
				if len(offs) != 0 {
					return false
				}
				continue
			}
			if len(offs) != 1 || offs[0] != latest[key] {
				return false
			}
		}
		return true
	}
	// First the cleaner keeps one value per key, tombstones included.
	var got map[string][]int64
	testutil.WaitFor(t, 30*time.Second, func() bool {
		got = read()
		return compactedWithTombstones(got, true) || compactedWithTombstones(got, false)
	}, "the cleaner to keep exactly the latest value of each key")
	// After delete.retention.ms the tombstones go too.
	testutil.WaitFor(t, 30*time.Second, func() bool {
		got = read()
		return compactedWithTombstones(got, false)
	}, "tombstones to be removed after delete.retention.ms")
	for k := 3; k < keys; k++ {
		key := fmt.Sprintf("k%d", k)
		if got[key][0] != latest[key] {
			t.Fatalf("%s survives at offset %d, produced at %d", key, got[key][0], latest[key])
		}
	}
	testutil.WaitFor(t, 10*time.Second, func() bool {
		return dirSize(t, filepath.Join(b.Dir, "compacted-0")) < before/2
	}, "the log to shrink on disk")
}

func isInvalidRecord(err error) bool {
	ke, ok := err.(*kerr.Error)
	return ok && ke.Code == kerr.InvalidRecord.Code
}
