package integration

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/samsa-streaming/samsa/internal/testutil"
)

// ackedLog is what a partition acknowledged: offset → value, and value → timestamp.
type ackedLog struct {
	values map[int64]string
	ts     map[int64]time.Time
}

func newAckedLog() *ackedLog {
	return &ackedLog{values: map[int64]string{}, ts: map[int64]time.Time{}}
}

func (a *ackedLog) add(r *kgo.Record) {
	a.values[r.Offset] = string(r.Value)
	a.ts[r.Offset] = r.Timestamp
}

// end is the offset after the last acknowledged record.
func (a *ackedLog) end() int64 {
	end := int64(0)
	for o := range a.values {
		end = max(end, o+1)
	}
	return end
}

// produceTracked produces n records to one partition synchronously, with values
// "<prefix>-<i>" and timestamps a millisecond apart from start, and records what was
// acknowledged.
func produceTracked(t testing.TB, c *kgo.Client, topic string, p int32, prefix string, n int, start time.Time, acked *ackedLog) {
	t.Helper()
	recs := make([]*kgo.Record, n)
	for i := range recs {
		recs[i] = &kgo.Record{Topic: topic, Partition: p, Value: []byte(fmt.Sprintf("%s-%05d-%s", prefix, i, strings.Repeat("v", 60))),
			Timestamp: start.Add(time.Duration(i) * time.Millisecond)}
	}
	for i := 0; i < n; i += 50 { // batches of 50
		part := recs[i:min(i+50, n)]
		if err := c.ProduceSync(ctxT(t, 20*time.Second), part...).FirstErr(); err != nil {
			t.Fatalf("produce to %s/%d: %v", topic, p, err)
		}
		for _, r := range part {
			acked.add(r)
		}
	}
}

// storedRecord is a record read back from a partition.
type storedRecord struct {
	offset int64
	value  string
	ts     time.Time
}

// readPartition reads a partition from its log start to its end offset with a fresh
// client and returns the records and the log start.
func readPartition(t testing.TB, b *testutil.Broker, topic string, p int32) ([]storedRecord, int64) {
	t.Helper()
	adm := newAdmin(t, b)
	ctx := ctxT(t, 60*time.Second)
	starts, err := adm.ListStartOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	start, _ := starts.Lookup(topic, p)
	end, _ := ends.Lookup(topic, p)
	if start.Err != nil || end.Err != nil {
		t.Fatalf("offsets of %s/%d: %v %v", topic, p, start.Err, end.Err)
	}
	c := newClient(t, b, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {p: kgo.NewOffset().At(start.Offset)}}))
	var out []storedRecord
	next := start.Offset
	for next < end.Offset {
		fs := c.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("%s/%d: read up to offset %d of [%d, %d)", topic, p, next, start.Offset, end.Offset)
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Fatalf("fetch %s/%d: %v", topic, p, err) })
		for _, r := range fs.Records() {
			out = append(out, storedRecord{r.Offset, string(r.Value), r.Timestamp})
			next = r.Offset + 1
		}
	}
	if len(out) > 0 && out[0].offset > start.Offset {
		// Retention may delete the first segments between the listing and the fetch
		// (the client then starts at the new log start): the log start is where the
		// partition starts now, if that is where the read began.
		if now, err := adm.ListStartOffsets(ctx, topic); err == nil {
			if s, _ := now.Lookup(topic, p); s.Err == nil && s.Offset == out[0].offset {
				return out, s.Offset
			}
		}
	}
	return out, start.Offset
}

// checkPartition reads a partition and checks that every acknowledged record at or
// above the log start (and below lostFrom, where the test destroyed data) is at its
// offset with its value, that offsets come once, in order, and — unless compacted —
// without gaps. It returns the log end offset.
func checkPartition(t testing.TB, b *testutil.Broker, topic string, p int32, acked *ackedLog, compacted bool, lostFrom int64) int64 {
	t.Helper()
	got, start := readPartition(t, b, topic, p)
	at := map[int64]string{}
	seen := map[string]int64{}
	for i, r := range got {
		if o, dup := seen[r.value]; dup {
			t.Fatalf("%s/%d: %q stored twice, at %d and %d", topic, p, r.value, o, r.offset)
		}
		seen[r.value] = r.offset
		if i > 0 && r.offset <= got[i-1].offset {
			t.Fatalf("%s/%d: offset %d after %d", topic, p, r.offset, got[i-1].offset)
		}
		if !compacted && r.offset != start+int64(i) {
			t.Fatalf("%s/%d: offset %d where %d was expected (record %d read from the log start %d): a gap", topic, p, r.offset, start+int64(i), i, start)
		}
		if v, ok := acked.values[r.offset]; ok && v != r.value {
			t.Fatalf("%s/%d: offset %d holds %q, %q was acknowledged there", topic, p, r.offset, r.value, v)
		}
		at[r.offset] = r.value
	}
	offsets := make([]int64, 0, len(acked.values))
	for o := range acked.values {
		offsets = append(offsets, o)
	}
	sort.Slice(offsets, func(i, j int) bool { return offsets[i] < offsets[j] })
	latest := map[string]int64{} // compacted: key → latest acknowledged offset
	for _, o := range offsets {
		if o < start || o >= lostFrom {
			continue
		}
		if compacted {
			latest[keyOf(acked.values[o])] = o
			continue
		}
		if _, ok := at[o]; !ok {
			t.Fatalf("%s/%d: acknowledged record %q at offset %d lost (log from %d, %d records)", topic, p, acked.values[o], o, start, len(got))
		}
	}
	if compacted {
		present := map[string]int64{}
		for _, r := range got {
			present[keyOf(r.value)] = r.offset
		}
		for k, o := range latest {
			if p, ok := present[k]; !ok || p < o {
				t.Fatalf("%s: key %s: latest acknowledged value at offset %d lost", topic, k, o)
			}
		}
	}
	if len(got) == 0 {
		return start
	}
	return got[len(got)-1].offset + 1
}

// keyOf is the key part of a compacted test value "<key>/<n>".
func keyOf(v string) string { k, _, _ := strings.Cut(v, "/"); return k }

// runSamsa runs `samsa serve` with the given overrides and waits for it to exit (it is
// expected to refuse the start); it returns its output. A process still running after
// the timeout is killed and fails the test.
func runSamsa(t testing.TB, overrides ...string) string {
	t.Helper()
	args := []string{"serve"}
	for _, o := range overrides {
		args = append(args, "--override", o)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, testutil.SamsaBinary(t), args...)
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("samsa serve %v did not exit:\n%s", overrides, out)
	}
	if err == nil {
		t.Fatalf("samsa serve %v started, want it refused:\n%s", overrides, out)
	}
	return string(out)
}

// treeOf describes every file under root (name, size, content prefix), to tell
// whether anything changed.
func treeOf(t testing.TB, root string) string {
	t.Helper()
	var out []string
	err := filepath.Walk(root, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		r, _ := filepath.Rel(root, p)
		if info.IsDir() {
			out = append(out, r+"/")
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		out = append(out, fmt.Sprintf("%s %d %x", r, len(b), b[:min(len(b), 256)]))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(out, "\n")
}

func createTopicOrFail(t testing.TB, adm *kadm.Client, name string, partitions int32, configs map[string]string) {
	t.Helper()
	cfg := map[string]*string{}
	for k, v := range configs {
		cfg[k] = kadm.StringPtr(v)
	}
	createTopic(t, adm, name, partitions, cfg)
}
