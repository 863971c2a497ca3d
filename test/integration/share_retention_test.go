package integration

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/samsa-streaming/samsa/internal/testutil"
)

// TestShareGroupsRetentionUnderLoad: share consumers (kgo.ShareGroup) lag behind a
// producer on a topic of small segments whose retention (by size, then by time)
// deletes segments under them, while one consumer releases some records and another
// hangs holding records until retention deleted them. The partition never stalls,
// nothing accepted is delivered again, DescribeShareGroupOffsets never reports a
// negative lag or a start past the log end, every record left in the log is accepted
// exactly once, and after a broker restart nothing is delivered again.
func TestShareGroupsRetentionUnderLoad(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		configs map[string]*string
	}{
		{"bytes", map[string]*string{"segment.bytes": kadm.StringPtr("4096"), "retention.bytes": kadm.StringPtr("16384")}},
		{"time", map[string]*string{"segment.bytes": kadm.StringPtr("4096"), "retention.ms": kadm.StringPtr("1500")}},
	} {
		t.Run(tc.name, func(t *testing.T) { shareRetentionUnderLoad(t, tc.configs) })
	}
}

func shareRetentionUnderLoad(t *testing.T, configs map[string]*string) {
	b := startGroupBroker(t, "log.retention.check.interval.ms=50", "group.share.min.heartbeat.interval.ms=1000", "group.share.heartbeat.interval.ms=1000")
	adm := newAdmin(t, b)
	const topic, group, n = "share-ret", "share-ret-g", 4000
	createTopic(t, adm, topic, 1, configs)
	raw := newClient(t, b)
	setGroupConfigs(t, b, group, map[string]string{
		"share.auto.offset.reset":       "earliest",
		"share.record.lock.duration.ms": "1000",
		"share.delivery.count.limit":    "3",
	})
	logStart := func() int64 {
		s, err := adm.ListStartOffsets(ctxT(t, 5*time.Second), topic)
		if err != nil {
			return -1
		}
		o, _ := s.Lookup(topic, 0)
		return o.Offset
	}

	// The producer: values v-<offset> (one producer, one partition), padded so that
	// segments roll often.
	var producing atomic.Bool
	producing.Store(true)
	var prodWG sync.WaitGroup
	prodWG.Go(func() {
		defer producing.Store(false)
		c := newClient(t, b, kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(0))
		pad := bytes.Repeat([]byte("p"), 40)
		for i := 0; i < n; i += 20 {
			var recs []*kgo.Record
			for j := i; j < i+20; j++ {
				recs = append(recs, &kgo.Record{Value: []byte(fmt.Sprintf("v-%05d", j)), Headers: []kgo.RecordHeader{{Key: "pad", Value: pad}}})
			}
			if err := c.ProduceSync(ctxT(t, 20*time.Second), recs...).FirstErr(); err != nil {
				t.Errorf("produce: %v", err)
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	})

	// Consumers slower than the producer while it produces, so that retention
	// overtakes the share-partition start; one releases every seventh record at its
	// first delivery, one hangs with what it got first.
	slow := func(decide func(r *kgo.Record) kgo.AckStatus) func(r *kgo.Record) kgo.AckStatus {
		return func(r *kgo.Record) kgo.AckStatus {
			if producing.Load() {
				time.Sleep(4 * time.Millisecond)
			}
			return decide(r)
		}
	}
	offsetOf := func(r *kgo.Record) int64 {
		o, _ := strconv.ParseInt(strings.TrimPrefix(string(r.Value), "v-"), 10, 64)
		return o
	}
	var mismatched atomic.Int64
	check := func(decide func(r *kgo.Record) kgo.AckStatus) func(r *kgo.Record) kgo.AckStatus {
		return func(r *kgo.Record) kgo.AckStatus {
			if offsetOf(r) != r.Offset {
				mismatched.Add(1)
			}
			return decide(r)
		}
	}
	led, held := &shareLedger{}, &shareLedger{}
	shareMember(t, b, "hang", group, topic, held, holdRecords)
	_, _, stopAcc := shareMember(t, b, "acc", group, topic, led, check(slow(acceptAll)))
	_, _, stopRel := shareMember(t, b, "rel", group, topic, led, check(slow(func(r *kgo.Record) kgo.AckStatus {
		if r.DeliveryCount() == 1 && offsetOf(r)%7 == 0 {
			return kgo.AckRelease
		}
		return kgo.AckAccept
	})))

	// While it runs, DescribeShareGroupOffsets stays sane.
	var bad []string
	for producing.Load() {
		start, lag := shareStartOffset(t, raw, group, topic)
		end, err := adm.ListEndOffsets(ctxT(t, 5*time.Second), topic)
		if err == nil && start >= 0 {
			e, _ := end.Lookup(topic, 0)
			if lag < 0 || start > e.Offset {
				bad = append(bad, fmt.Sprintf("start %d lag %d log end %d", start, lag, e.Offset))
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	prodWG.Wait()
	if len(bad) > 0 {
		t.Errorf("DescribeShareGroupOffsets while retention ran: %v", bad)
	}
	if held.all() == nil {
		t.Errorf("the hanging consumer got nothing")
	}
	ls := logStart()
	t.Logf("produced %d; log start %d; accepted so far %d", n, ls, len(led.accepted()))
	if ls <= 0 {
		t.Fatalf("retention deleted nothing (log start %d)", ls)
	}
	testutil.WaitFor(t, 60*time.Second, func() bool {
		start, lag := shareStartOffset(t, raw, group, topic)
		return start == n && lag == 0
	}, "the share partition to reach the log end")
	// The broker may apply a consumer's last acknowledgements, and the share start
	// reach the end, before that consumer's flush returns and the ledger records them:
	// stopping the consumers waits for their flushes.
	stopAcc()
	stopRel()
	ls = logStart()
	t.Logf("log start at the end %d; %d values delivered", ls, len(led.accepted()))

	seen := map[string][]int32{}
	for _, s := range led.all() {
		seen[s.value] = append(seen[s.value], s.deliveries)
	}
	accepted := led.accepted()
	for v, c := range accepted {
		if c > 1 {
			t.Errorf("%s accepted %d times (deliveries %v)", v, c, seen[v])
		}
	}
	for o := ls; o < n; o++ {
		if v := fmt.Sprintf("v-%05d", o); accepted[v] != 1 {
			t.Errorf("%s, still in the log, accepted %d times (deliveries %v)", v, accepted[v], seen[v])
		}
	}
	if m := mismatched.Load(); m > 0 {
		t.Errorf("%d records delivered at an offset not theirs", m)
	}

	// After a restart the durable state agrees: nothing is delivered again.
	b.Restart(t)
	after := &shareLedger{}
	shareMember(t, b, "after", group, topic, after, acceptAll)
	time.Sleep(3 * time.Second)
	if got := after.all(); len(got) > 0 {
		t.Errorf("after the restart %d records delivered again, first %+v", len(got), got[0])
	}
	raw = newClient(t, b)
	if start, lag := shareStartOffset(t, raw, group, topic); start != n || lag != 0 {
		t.Errorf("after the restart: share start %d lag %d, want %d and 0", start, lag, n)
	}
}
