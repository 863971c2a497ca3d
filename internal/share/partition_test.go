package share

import (
	"errors"
	"math"
	"testing"
	"time"
)

var t0 = time.Unix(1_700_000_000, 0)

// Snapshot returns the partition's whole persisted form (what the stored state must
// be after every write of Changes).
func (p *Partition) Snapshot() Snapshot {
	s := Snapshot{StateEpoch: p.stateEpoch, Start: p.start, End: p.end}
	s.Runs = p.appendRuns(nil, p.start, p.end)
	return s
}

func testCfg() PartitionConfig {
	return PartitionConfig{LockDuration: 30 * time.Second, DeliveryLimit: 3, MaxInFlight: 100}
}

func TestPartitionAcquireAcknowledge(t *testing.T) {
	p := NewPartition(testCfg(), 0)
	batches := [][2]int64{{0, 4}, {5, 9}}
	a := p.Acquire("a", batches, 10, 3, true, t0)
	if len(a) != 1 || a[0] != (AcquiredRun{0, 2, 1}) {
		t.Fatalf("a acquired %v", a)
	}
	// Batch-aligned: b gets the rest of the first batch it starts.
	b := p.Acquire("b", batches, 10, 1, false, t0)
	if len(b) != 1 || b[0] != (AcquiredRun{3, 4, 1}) {
		t.Fatalf("b acquired %v", b)
	}
	if err := p.Acknowledge("b", 0, 0, []int8{AckAccept}, t0, nil); !errors.Is(err, ErrInvalidRecordState) {
		t.Fatalf("b acknowledging a's record: %v", err)
	}
	if err := p.Acknowledge("a", 0, 2, []int8{AckAccept, AckRelease, AckReject}, t0, nil); err != nil {
		t.Fatal(err)
	}
	if p.Start() != 1 {
		t.Fatalf("start %d, want 1 (offset 1 released)", p.Start())
	}
	// The released offset is redelivered first, with delivery count 2.
	c := p.Acquire("c", [][2]int64{{0, 4}}, 10, 10, false, t0)
	if len(c) != 1 || c[0] != (AcquiredRun{1, 1, 2}) {
		t.Fatalf("c acquired %v", c)
	}
	// Locks expire: b's records (3, 4) come back, and c's (1).
	if n := p.ExpireLocks(t0.Add(31 * time.Second)); n != 3 {
		t.Fatalf("%d locks expired, want 3", n)
	}
	if st, n := p.StateOf(3); st != Available || n != 1 {
		t.Fatalf("offset 3 after expiry: state %d deliveries %d", st, n)
	}
}

func TestPartitionDeliveryLimitAndSnapshot(t *testing.T) {
	p := NewPartition(testCfg(), 10)
	a := p.Acquire("m", [][2]int64{{10, 11}}, 12, 10, false, t0)
	if len(a) != 1 || a[0] != (AcquiredRun{10, 11, 1}) {
		t.Fatalf("first delivery: %v", a)
	}
	if err := p.Acknowledge("m", 10, 11, []int8{AckRelease, AckAccept}, t0, nil); err != nil {
		t.Fatal(err)
	}
	for round := int16(2); round <= 3; round++ {
		a := p.Acquire("m", [][2]int64{{10, 11}}, 12, 10, false, t0)
		if len(a) != 1 || a[0] != (AcquiredRun{10, 10, round}) {
			t.Fatalf("delivery %d: %v", round, a)
		}
		if round == 2 {
			if err := p.Acknowledge("m", 10, 10, []int8{AckRelease}, t0, nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	// The third delivery's lock expires: at the limit, 10 is archived.
	if n := p.ExpireLocks(t0.Add(time.Hour)); n != 1 {
		t.Fatalf("%d locks expired, want 1", n)
	}
	if p.Start() != 12 {
		t.Fatalf("start %d, want 12 (10 archived at the delivery limit, 11 accepted)", p.Start())
	}

	// A snapshot keeps what was not acknowledged.
	q := NewPartition(testCfg(), 0)
	q.Acquire("m", [][2]int64{{0, 9}}, 10, 10, false, t0)
	if err := q.Acknowledge("m", 0, 4, []int8{AckAccept}, t0, nil); err != nil {
		t.Fatal(err)
	}
	if err := q.Acknowledge("m", 6, 6, []int8{AckAccept}, t0, nil); err != nil {
		t.Fatal(err)
	}
	snap, err := DecodeSnapshot(q.Snapshot().Encode())
	if err != nil {
		t.Fatal(err)
	}
	r, err := FromSnapshot(testCfg(), snap)
	if err != nil {
		t.Fatal(err)
	}
	got := r.Acquire("n", [][2]int64{{0, 9}}, 10, 100, false, t0)
	want := []AcquiredRun{{5, 5, 2}, {7, 9, 2}}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("after restore acquired %v, want %v", got, want)
	}
}

// TestPartitionArchiveUndelivered: records a read_committed group skips are archived
// whether available again or never acquired, never while acquired or past offsets not
// looked at yet, and the window moves past them.
func TestPartitionArchiveUndelivered(t *testing.T) {
	p := NewPartition(testCfg(), 0)
	if a := p.Acquire("m", [][2]int64{{0, 1}}, 10, 10, false, t0); len(a) != 1 || a[0] != (AcquiredRun{0, 1, 1}) {
		t.Fatalf("acquired %v", a)
	}
	if err := p.Acknowledge("m", 1, 1, []int8{AckRelease}, t0, nil); err != nil {
		t.Fatal(err)
	}
	p.ArchiveUndelivered(0, 5, 4) // offset 0 is acquired; 4 and 5 are not below the bound
	for o, want := range map[int64]uint8{0: Acquired, 1: Archived, 2: Archived, 3: Archived, 4: Available} {
		if st, _ := p.StateOf(o); st != want {
			t.Errorf("offset %d: state %d, want %d", o, st, want)
		}
	}
	if p.End() != 4 || !p.Dirty() {
		t.Fatalf("end %d dirty %v, want 4 and dirty", p.End(), p.Dirty())
	}
	p.ArchiveUndelivered(6, 7, 10) // past a hole: offsets 4–5 are not looked at yet
	if p.End() != 4 {
		t.Fatalf("archiving past a hole moved the end to %d", p.End())
	}
	if err := p.Acknowledge("m", 0, 0, []int8{AckAccept}, t0, nil); err != nil {
		t.Fatal(err)
	}
	if next, ok := p.NextFetchOffset(); p.Start() != 4 || next != 4 || !ok {
		t.Fatalf("start %d, next fetch %d (%v), want 4", p.Start(), next, ok)
	}
}

// TestPartitionReleaseMemberLowersDeliveryCount: what a member still holds when it
// leaves or closes its session goes back with its delivery count lowered by one, as
// Kafka does (the records were acquired, most likely never processed), so that a
// record at the limit is delivered again instead of archived; a RELEASE and a lock
// expiry keep the count.
func TestPartitionReleaseMemberLowersDeliveryCount(t *testing.T) {
	p := NewPartition(testCfg(), 0) // delivery limit 3
	for round := int16(1); round <= 2; round++ {
		if a := p.Acquire("m", [][2]int64{{0, 1}}, 2, 10, false, t0); len(a) != 1 || a[0] != (AcquiredRun{0, 1, round}) {
			t.Fatalf("delivery %d: %v", round, a)
		}
		if err := p.Acknowledge("m", 0, 1, []int8{AckRelease}, t0, nil); err != nil {
			t.Fatal(err)
		}
	}
	if a := p.Acquire("m", [][2]int64{{0, 1}}, 2, 10, false, t0); len(a) != 1 || a[0] != (AcquiredRun{0, 1, 3}) {
		t.Fatalf("third delivery: %v", a)
	}
	if err := p.Acknowledge("m", 1, 1, []int8{AckAccept}, t0, nil); err != nil {
		t.Fatal(err)
	}
	p.Begin()
	p.ReleaseMember("m")
	p.Commit()
	if st, n := p.StateOf(0); st != Available || n != 2 {
		t.Fatalf("offset 0 after its member left at the limit: state %d deliveries %d, want available with 2", st, n)
	}
	if !p.Dirty() || !p.TakeFreed() {
		t.Fatal("releasing a member's records did not mark the partition dirty and freed")
	}
	if next, ok := p.NextFetchOffset(); next != 0 || !ok {
		t.Fatalf("next fetch offset %d (%v), want 0", next, ok)
	}
	if a := p.Acquire("n", [][2]int64{{0, 1}}, 2, 10, false, t0); len(a) != 1 || a[0] != (AcquiredRun{0, 0, 3}) {
		t.Fatalf("after the member left: %v, want offset 0 at delivery 3", a)
	}
}

// TestPartitionFreedOnlyWhenAcquirable: a fetch waiting on a full window is woken
// (TakeFreed) only when something became acquirable — a release, or the window's
// start moving it under its limit — not by records accepted or rejected behind the
// start, which leave the window as full as it was, nor by a start that moves in a
// window a whole batch took past its limit and that stays at it.
func TestPartitionFreedOnlyWhenAcquirable(t *testing.T) {
	cfg := testCfg()
	cfg.MaxInFlight = 10
	p := NewPartition(cfg, 0)
	batches := [][2]int64{{0, 4}, {5, 9}, {10, 14}}
	if a := p.Acquire("a", batches, 15, 5, true, t0); len(a) != 1 || a[0] != (AcquiredRun{0, 4, 1}) {
		t.Fatalf("a acquired %v", a)
	}
	if b := p.Acquire("b", batches, 15, 5, true, t0); len(b) != 1 || b[0] != (AcquiredRun{5, 9, 1}) {
		t.Fatalf("b acquired %v", b)
	}
	p.TakeFreed()
	if _, ok := p.NextFetchOffset(); ok {
		t.Fatal("a window of 10 acquired records leaves room for more")
	}
	if err := p.Acknowledge("b", 5, 9, []int8{AckAccept, AckReject, AckAccept, AckGap, AckAccept}, t0, nil); err != nil {
		t.Fatal(err)
	}
	if !p.Dirty() || p.TakeFreed() {
		t.Fatalf("accepting behind the window's start: dirty %v, freed reported (nothing became acquirable)", p.Dirty())
	}
	if _, ok := p.NextFetchOffset(); ok {
		t.Fatal("the window is still full, yet a fetch offset is offered")
	}
	if err := p.Acknowledge("a", 4, 4, []int8{AckRelease}, t0, nil); err != nil {
		t.Fatal(err)
	}
	if !p.TakeFreed() {
		t.Fatal("a released record did not free the window")
	}
	if next, ok := p.NextFetchOffset(); next != 4 || !ok {
		t.Fatalf("next fetch offset %d (%v), want the released 4", next, ok)
	}
	if err := p.Acknowledge("a", 0, 3, []int8{AckAccept}, t0, nil); err != nil {
		t.Fatal(err)
	}
	if p.Start() != 4 || !p.TakeFreed() {
		t.Fatalf("start %d after accepting its first records, freed not reported", p.Start())
	}

	// A window a whole batch took past its limit: the start moving frees nothing
	// until the window is under the limit again.
	p = NewPartition(cfg, 0)
	wide := [][2]int64{{0, 3}, {4, 11}, {12, 19}}
	if a := p.Acquire("a", wide, 20, 4, false, t0); len(a) != 1 || a[0] != (AcquiredRun{0, 3, 1}) {
		t.Fatalf("a acquired %v", a)
	}
	if b := p.Acquire("b", wide, 20, 8, false, t0); len(b) != 1 || b[0] != (AcquiredRun{4, 11, 1}) {
		t.Fatalf("b acquired %v, want the batch [4, 11] whole past the limit of 10", b)
	}
	p.TakeFreed()
	if err := p.Acknowledge("a", 0, 1, []int8{AckAccept}, t0, nil); err != nil {
		t.Fatal(err)
	}
	if _, ok := p.NextFetchOffset(); p.Start() != 2 || ok || p.TakeFreed() {
		t.Fatalf("start %d, a window of %d records with room %v: freed reported while still at its limit of 10", p.Start(), 12-p.Start(), ok)
	}
	if err := p.Acknowledge("a", 2, 2, []int8{AckAccept}, t0, nil); err != nil {
		t.Fatal(err)
	}
	if _, ok := p.NextFetchOffset(); p.Start() != 3 || !ok || !p.TakeFreed() {
		t.Fatalf("start %d, room %v: the window back under its limit, freed not reported", p.Start(), ok)
	}
}

// TestPartitionInFlightLimitWholeBatches: the window grows by whole batches — the
// batch that reaches MaxInFlight is taken to its end, as Kafka does — and no batch is
// started once the window is full; strict mode stops at MaxInFlight exactly.
func TestPartitionInFlightLimitWholeBatches(t *testing.T) {
	var batches [][2]int64
	for o := int64(0); o < 300; o += 30 {
		batches = append(batches, [2]int64{o, o + 29})
	}
	p := NewPartition(testCfg(), 0) // MaxInFlight 100
	a := p.Acquire("a", batches, 300, 1000, false, t0)
	if len(a) != 1 || a[0] != (AcquiredRun{0, 119, 1}) {
		t.Fatalf("a acquired %v, want [0, 119]: four whole batches", a)
	}
	if _, ok := p.NextFetchOffset(); ok {
		t.Fatal("the window is full, yet NextFetchOffset offers an offset")
	}
	if b := p.Acquire("b", batches[4:], 300, 1000, false, t0); len(b) != 0 {
		t.Fatalf("b acquired %v from a full window", b)
	}
	strict := NewPartition(testCfg(), 0)
	if s := strict.Acquire("a", batches, 300, 1000, true, t0); len(s) != 1 || s[0] != (AcquiredRun{0, 99, 1}) {
		t.Fatalf("strict acquired %v, want [0, 99]", s)
	}
}

// TestPartitionCompactionGap: offsets a compacted log no longer has, between an empty
// window and the next batch, move the window instead of filling it; behind records
// still in flight they count toward the in-flight limit like records, so a gap of
// millions costs nothing and waits for the window to empty.
func TestPartitionCompactionGap(t *testing.T) {
	p := NewPartition(testCfg(), 0) // MaxInFlight 100
	if a := p.Acquire("a", [][2]int64{{0, 0}}, 1<<40, 10, false, t0); len(a) != 1 || a[0] != (AcquiredRun{0, 0, 1}) {
		t.Fatalf("a acquired %v", a)
	}
	// A small gap behind a record in flight is held as done.
	if b := p.Acquire("b", [][2]int64{{50, 59}}, 1<<40, 10, false, t0); len(b) != 1 || b[0] != (AcquiredRun{50, 59, 1}) {
		t.Fatalf("b acquired %v after a gap of 49", b)
	}
	if st, _ := p.StateOf(20); st != Archived {
		t.Fatalf("offset 20 in the gap is %d, want archived", st)
	}
	// A gap wider than the limit waits for the records before it.
	far := int64(10_000_000)
	if c := p.Acquire("c", [][2]int64{{far, far + 9}}, 1<<40, 10, false, t0); len(c) != 0 || p.End() != 60 {
		t.Fatalf("c acquired %v across a gap of millions behind records in flight; end %d", c, p.End())
	}
	if err := p.Acknowledge("a", 0, 0, []int8{AckAccept}, t0, nil); err != nil {
		t.Fatal(err)
	}
	if err := p.Acknowledge("b", 50, 59, []int8{AckAccept, AckAccept, AckAccept, AckAccept, AckAccept, AckAccept, AckAccept, AckAccept, AckAccept, AckAccept}, t0, nil); err != nil {
		t.Fatal(err)
	}
	if p.Start() != 60 || p.End() != 60 {
		t.Fatalf("window [%d, %d) after everything was acknowledged, want [60, 60)", p.Start(), p.End())
	}
	p.Begin()
	c := p.Acquire("c", [][2]int64{{far, far + 9}}, 1<<40, 10, false, t0)
	if len(c) != 1 || c[0] != (AcquiredRun{far, far + 9, 1}) || p.Start() != far || cap(p.arr) > 1000 {
		t.Fatalf("c acquired %v; window [%d, %d) in an array of %d", c, p.Start(), p.End(), cap(p.arr))
	}
	// Undone (the state write failed): the window is back where it was.
	p.Rollback()
	if p.Start() != 60 || p.End() != 60 {
		t.Fatalf("window [%d, %d) after the rollback, want [60, 60)", p.Start(), p.End())
	}
	if c := p.Acquire("c", [][2]int64{{far, far + 9}}, 1<<40, 10, false, t0); len(c) != 1 || c[0] != (AcquiredRun{far, far + 9, 1}) {
		t.Fatalf("c acquired %v after the rollback", c)
	}
	if s := p.Snapshot(); s.Start != far || s.End != far+10 {
		t.Fatalf("snapshot window [%d, %d)", s.Start, s.End)
	}
}

// TestWindowBound: neither a batch of millions of records nor a stored state can
// make a window wider than MaxWindow.
func TestWindowBound(t *testing.T) {
	p := NewPartition(testCfg(), 0)
	if a := p.Acquire("a", [][2]int64{{0, 5 * MaxWindow}}, 1<<40, 1<<30, false, t0); len(a) != 1 || a[0] != (AcquiredRun{0, MaxWindow - 1, 1}) {
		t.Fatalf("acquired %v from one huge batch, want [0, %d]", a, MaxWindow-1)
	}
	wide := Snapshot{Start: 5, End: 5 + 1<<40, Runs: []StateRun{{First: 5, Last: 4 + 1<<40, State: Archived, Deliveries: 1}}}
	if _, err := FromSnapshot(testCfg(), wide); !errors.Is(err, ErrWindowTooWide) {
		t.Fatalf("a stored window of 2^40 offsets: %v, want ErrWindowTooWide", err)
	}
	wide.End, wide.Runs[0].Last = 5+MaxWindow, 4+MaxWindow
	if q, err := FromSnapshot(testCfg(), wide); err != nil || q.Start() != 5+MaxWindow {
		t.Fatalf("a stored window of MaxWindow offsets: %v", err)
	}
}

// TestAcknowledgeHostileRanges: ranges an int64 cannot count and ranges without types
// are refused, not indexed.
func TestAcknowledgeHostileRanges(t *testing.T) {
	p := NewPartition(testCfg(), 0)
	p.Acquire("a", [][2]int64{{0, 9}}, 10, 10, false, t0)
	for _, c := range []struct {
		first, last int64
		types       []int8
	}{
		{math.MinInt64, math.MaxInt64, nil},
		{math.MinInt64, math.MaxInt64, []int8{AckAccept}},
		{0, 9, nil},
		{-1, 0, []int8{AckAccept, AckAccept}},
		{0, math.MaxInt64, []int8{}},
	} {
		if err := p.Acknowledge("a", c.first, c.last, c.types, t0, nil); !errors.Is(err, ErrInvalidAck) {
			t.Errorf("Acknowledge(%d, %d, %v) = %v, want ErrInvalidAck", c.first, c.last, c.types, err)
		}
	}
	if err := p.Acknowledge("a", 0, math.MaxInt64, []int8{AckAccept}, t0, nil); !errors.Is(err, ErrInvalidRecordState) {
		t.Errorf("a range past the window: %v, want ErrInvalidRecordState", err)
	}
	if st, _ := p.StateOf(0); st != Acquired {
		t.Errorf("offset 0 is %d after refused acknowledgements, want acquired", st)
	}
}

// TestPartitionAcknowledgeAcrossTheStart: the start moved past acquired records (the
// log start moved); an acknowledgement reaching below it applies to the records that
// remain, per-offset types aligned, as Kafka skips offsets below its start offset. A
// batch wholly below the start is refused.
func TestPartitionAcknowledgeAcrossTheStart(t *testing.T) {
	for _, types := range [][]int8{{AckAccept}, {AckAccept, AckAccept, AckAccept, AckAccept, AckAccept, AckAccept, AckAccept, AckReject, AckAccept, AckAccept}} {
		p := NewPartition(testCfg(), 0)
		p.Acquire("a", [][2]int64{{0, 9}}, 10, 10, false, t0)
		p.AdvanceStart(5)
		if err := p.Acknowledge("a", 0, 4, types[:1], t0, nil); !errors.Is(err, ErrInvalidRecordState) {
			t.Fatalf("a batch wholly below the start: %v", err)
		}
		if err := p.Acknowledge("a", 0, 9, types, t0, nil); err != nil {
			t.Fatalf("acknowledging 0..9 with the start at 5 (types %v): %v", types, err)
		}
		if p.Start() != 10 {
			t.Fatalf("start %d, want 10", p.Start())
		}
	}
}

// TestPartitionAcknowledgeCounts: the records an acknowledgement applies are counted
// by type — one type for a range, or one per offset; gaps in their own slot; offsets
// skipped below the start and refused batches not at all.
func TestPartitionAcknowledgeCounts(t *testing.T) {
	p := NewPartition(testCfg(), 0)
	p.Acquire("a", [][2]int64{{0, 19}}, 20, 20, false, t0)
	var counts AckCounts
	if err := p.Acknowledge("a", 0, 3, []int8{AckAccept}, t0, &counts); err != nil {
		t.Fatal(err)
	}
	if err := p.Acknowledge("a", 4, 9, []int8{AckRelease, AckReject, AckRenew, AckGap, AckAccept, AckRenew}, t0, &counts); err != nil {
		t.Fatal(err)
	}
	// Refused: offset 4 is no longer acquired (released); nothing of the batch counts.
	if err := p.Acknowledge("a", 4, 12, []int8{AckAccept}, t0, &counts); !errors.Is(err, ErrInvalidRecordState) {
		t.Fatalf("acknowledging a released offset again: %v", err)
	}
	if err := p.Acknowledge("b", 10, 10, []int8{AckAccept}, t0, &counts); !errors.Is(err, ErrInvalidRecordState) {
		t.Fatalf("acknowledging another member's offset: %v", err)
	}
	// The start moves past 15: of 12..17 only 15..17 are applied.
	p.AdvanceStart(15)
	if err := p.Acknowledge("a", 12, 17, []int8{AckReject, AckReject, AckReject, AckAccept, AckReject, AckRelease}, t0, &counts); err != nil {
		t.Fatal(err)
	}
	want := AckCounts{AckGap: 1, AckAccept: 4 + 1 + 1, AckRelease: 1 + 1, AckReject: 1 + 1, AckRenew: 2}
	if counts != want {
		t.Fatalf("counted %v, want %v", counts, want)
	}
}
