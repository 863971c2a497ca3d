package storage

import (
	"context"
	"fmt"
	"math/rand"
	"testing"

	"github.com/samsa-streaming/samsa/internal/record"
)

// kv is one record to write: key, value; del makes it a tombstone (null value).
type kv struct {
	k, v string
	del  bool
}

// kvBatch builds one batch of the pairs with opts (BaseTimestamp is set by the caller).
func kvBatch(t testing.TB, opts record.BuildOptions, pairs ...kv) []byte {
	t.Helper()
	b, err := record.Build(opts, kvRecords(pairs))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func kvRecords(pairs []kv) []record.Record {
	recs := make([]record.Record, len(pairs))
	for i, p := range pairs {
		recs[i] = record.Record{OffsetDelta: int32(i), TimestampDelta: int64(i), Key: []byte(p.k)}
		if !p.del {
			recs[i].Value = []byte(p.v)
		}
	}
	return recs
}

// plainOpts is a non-idempotent batch at the log's current time.
func (tl *testLog) plainOpts() record.BuildOptions {
	o := record.DefaultBuildOptions()
	o.BaseTimestamp = tl.clock.Now().UnixMilli()
	return o
}

// kvRecord is a record as read back from the log.
type kvRecord struct {
	offset int64
	key    string
	value  string
	del    bool
	batch  record.Header
}

// readRecords decodes every record from the log start to the log end, checking CRCs.
func (tl *testLog) readRecords() []kvRecord {
	tl.t.Helper()
	var out []kvRecord
	tl.eachBatch(tl.LogStartOffset(), func(h record.Header, batch []byte) {
		_, recs, err := record.Records(batch)
		if err != nil {
			tl.t.Fatalf("batch at %d: %v", h.BaseOffset, err)
		}
		for _, r := range recs {
			out = append(out, kvRecord{offset: h.BaseOffset + int64(r.OffsetDelta), key: string(r.Key),
				value: string(r.Value), del: r.Value == nil, batch: h})
		}
	})
	for i := 1; i < len(out); i++ {
		if out[i].offset <= out[i-1].offset {
			tl.t.Fatalf("offsets not increasing: %d after %d", out[i].offset, out[i-1].offset)
		}
	}
	return out
}

// latestByKey returns, for each key, its last record.
func latestByKey(recs []kvRecord) map[string]kvRecord {
	m := map[string]kvRecord{}
	for _, r := range recs {
		if !r.batch.IsControl() {
			m[r.key] = r
		}
	}
	return m
}

// newTestCleaner returns a cleaner over tl (following reopens) on tl's clock.
func newTestCleaner(tl *testLog) *Cleaner {
	return NewCleaner(CleanerOptions{Clock: tl.clock, Logger: testLogger(tl.t)}, func() []*Log {
		if tl.Log.closed.Load() {
			return nil
		}
		return []*Log{tl.Log}
	})
}

func cleanOnce(t testing.TB, c *Cleaner) int {
	t.Helper()
	n, err := c.CleanOnce(context.Background())
	if err != nil {
		t.Fatalf("CleanOnce: %v", err)
	}
	return n
}

// writeUpdates appends count records spread over keys (random, seeded) in batches of
// perBatch, plus a final batch so the latest writes span segments. It returns what was
// written by offset.
func writeUpdates(tl *testLog, seed int64, keys, count, perBatch int, opts func() record.BuildOptions) map[int64]kv {
	rng := rand.New(rand.NewSource(seed))
	written := map[int64]kv{}
	for n := 0; n < count; n += perBatch {
		var pairs []kv
		for i := 0; i < perBatch && n+i < count; i++ {
			pairs = append(pairs, kv{k: fmt.Sprintf("key-%d", rng.Intn(keys)), v: fmt.Sprintf("value-%d-%s", n+i, pad)})
		}
		info := tl.mustAppend(kvBatch(tl.t, opts(), pairs...))
		for i, p := range pairs {
			written[info.BaseOffset+int64(i)] = p
		}
	}
	return written
}

const pad = "...................................."

// checkCompacted asserts the result of a full cleaning of everything below the active
// segment: every key's latest record is there with its offset and value, every record
// is one that was written at that offset, records below the active segment are unique
// per key, and records in the active segment are all there.
func checkCompacted(t *testing.T, before, after []kvRecord, activeBase int64) {
	t.Helper()
	byOffset := map[int64]kvRecord{}
	for _, r := range before {
		byOffset[r.offset] = r
	}
	for k, want := range latestByKey(before) {
		got, ok := latestByKey(after)[k]
		if !ok || got.offset != want.offset || got.value != want.value {
			t.Fatalf("key %s: latest %+v, want offset %d value %q", k, got, want.offset, want.value)
		}
	}
	seen := map[string]bool{}
	activeCount := 0
	for _, r := range after {
		orig, ok := byOffset[r.offset]
		if !ok || orig.key != r.key || orig.value != r.value || orig.del != r.del {
			t.Fatalf("record at %d is %q=%q, was %+v", r.offset, r.key, r.value, orig)
		}
		if r.offset >= activeBase {
			activeCount++
			continue
		}
		if !r.batch.IsControl() && seen[r.key] {
			t.Fatalf("key %s appears twice below the active segment", r.key)
		}
		seen[r.key] = true
	}
	want := 0
	for _, r := range before {
		if r.offset >= activeBase {
			want++
		}
	}
	if activeCount != want {
		t.Fatalf("active segment holds %d records, want %d", activeCount, want)
	}
}
