package broker

import (
	"context"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/samsa-streaming/samsa/internal/metrics"
	"github.com/samsa-streaming/samsa/internal/share"
)

// counterValue is the value of the counter name whose labels are labels (name,
// value pairs), 0 when it has no such series.
func counterValue(t *testing.T, m *metrics.Metrics, name string, labels ...string) float64 {
	t.Helper()
	families, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	next:
		for _, s := range f.GetMetric() {
			have := map[string]string{}
			for _, l := range s.GetLabel() {
				have[l.GetName()] = l.GetValue()
			}
			for i := 0; i+1 < len(labels); i += 2 {
				if have[labels[i]] != labels[i+1] {
					continue next
				}
			}
			return s.GetCounter().GetValue()
		}
	}
	return 0
}

// TestShareMetricsCountOnlyWritten: acknowledgements are counted once the share
// partition's state holding them is written — not while the share coordinator's log
// is out of space (the write fails, the change is undone and answered with an error),
// nor when the coordinator fences the write, nor for a batch refused
// (INVALID_RECORD_STATE) — on ShareFetch (piggy-backed) as on ShareAcknowledge; and
// records acquired are counted once, also when the acknowledgements they came with
// failed and they were acquired again without them.
func TestShareMetricsCountOnlyWritten(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a")
	full := &failingFS{under: filepath.Join(dir, shareStateTopic+"-"), errno: syscall.ENOSPC}
	m, err := metrics.New(metrics.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// A ShareFetch's state writes, retried while the coordinator cannot write, give
	// up after offsets.commit.timeout.ms.
	b := startTestBrokerOptions(t, Options{FS: full, Metrics: m}, []string{"offsets.commit.timeout.ms=300"}, dir)
	k := shareTestTopic(t, b, "counted")
	type counts struct{ acquired, accepted, released, rejected float64 }
	check := func(when string, want counts) {
		t.Helper()
		got := counts{
			acquired: counterValue(t, m, "samsa_share_records_acquired_total", "topic", "counted"),
			accepted: counterValue(t, m, "samsa_share_records_acknowledged_total", "type", "accept"),
			released: counterValue(t, m, "samsa_share_records_acknowledged_total", "type", "release"),
			rejected: counterValue(t, m, "samsa_share_records_acknowledged_total", "type", "reject"),
		}
		if got != want {
			t.Fatalf("%s: counted %+v, want %+v", when, got, want)
		}
	}
	produce := func() {
		t.Helper()
		if code := produceTo(t, b, "counted"); code != 0 {
			t.Fatalf("produce: %v", kerr.ErrorForCode(code))
		}
	}

	shareFetchAcking(t, b, k, "m", 0) // the share partition starts at the log's end
	for range 3 {
		produce()
	}
	if rp := shareFetchAcking(t, b, k, "m", 1); len(rp.AcquiredRecords) != 1 || rp.AcquiredRecords[0].LastOffset != 2 {
		t.Fatalf("acquired %v, want offsets 0-2", rp.AcquiredRecords)
	}
	check("after acquiring 0-2", counts{acquired: 3})

	produce()              // offset 3
	full.armed.Store(true) // every write of the share state fails from now on
	rp := shareFetchAcking(t, b, k, "m", 2, ackBatch(0, 1, share.AckAccept), ackBatch(2, 2, share.AckRelease))
	if rp.AcknowledgeErrorCode == 0 {
		t.Fatal("acknowledgements whose write failed were answered as applied")
	}
	if got := acquiredOffsets(rp.AcquiredRecords); len(got) != 1 || got[3] != 1 {
		t.Fatalf("acquired %v with the acknowledgements refused, want offset 3", rp.AcquiredRecords)
	}
	check("while the state writes fail", counts{acquired: 4})

	full.armed.Store(false)
	if _, code := shareAcknowledge(t, b, 0, k, "m", 3, 7, 7, share.AckAccept); code != kerr.InvalidRecordState.Code {
		t.Fatalf("acknowledging an offset never acquired: %v, want INVALID_RECORD_STATE", kerr.ErrorForCode(code))
	}
	check("after a refused acknowledgement", counts{acquired: 4})

	rp = shareFetchAcking(t, b, k, "m", 4, ackBatch(0, 1, share.AckAccept), ackBatch(2, 2, share.AckRelease))
	if got := acquiredOffsets(rp.AcquiredRecords); rp.AcknowledgeErrorCode != 0 || len(got) != 1 || got[2] != 2 {
		t.Fatalf("once writes succeed: acknowledgement %v, acquired %v (want offset 2 again)", kerr.ErrorForCode(rp.AcknowledgeErrorCode), rp.AcquiredRecords)
	}
	if _, code := shareAcknowledge(t, b, 0, k, "m", 5, 2, 3, share.AckReject); code != 0 {
		t.Fatalf("rejecting 2-3: %v", kerr.ErrorForCode(code))
	}
	check("once writes succeed", counts{acquired: 5, accepted: 2, released: 1, rejected: 2})

	// A newer leader of the topic partition (as the coordinator sees it) read the
	// state: this one's write is fenced, and the acknowledgement refused.
	produce() // offset 4
	if got := acquiredOffsets(shareFetchAcking(t, b, k, "m", 6).AcquiredRecords); len(got) != 1 || got[4] != 1 {
		t.Fatalf("acquired %v, want offset 4", got)
	}
	epoch, err := b.shareLeaderEpoch(k)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.shareState.readState(context.Background(), k, epoch+1); err != nil {
		t.Fatal(err)
	}
	if _, code := shareAcknowledge(t, b, 0, k, "m", 7, 4, 4, share.AckAccept); code == 0 {
		t.Fatal("an acknowledgement whose write was fenced was answered as applied")
	}
	check("after a fenced write", counts{acquired: 6, accepted: 2, released: 1, rejected: 2})
}
