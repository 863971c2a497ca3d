package share

import (
	"errors"
	"testing"
	"time"
)

var t0 = time.Unix(1_700_000_000, 0)

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
	if err := p.Acknowledge("b", 0, 0, []int8{AckAccept}, t0); !errors.Is(err, ErrInvalidRecordState) {
		t.Fatalf("b acknowledging a's record: %v", err)
	}
	if err := p.Acknowledge("a", 0, 2, []int8{AckAccept, AckRelease, AckReject}, t0); err != nil {
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
	// Locks expire: b's records come back.
	if !p.ExpireLocks(t0.Add(31 * time.Second)) {
		t.Fatal("no lock expired")
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
	if err := p.Acknowledge("m", 10, 11, []int8{AckRelease, AckAccept}, t0); err != nil {
		t.Fatal(err)
	}
	for round := int16(2); round <= 3; round++ {
		a := p.Acquire("m", [][2]int64{{10, 11}}, 12, 10, false, t0)
		if len(a) != 1 || a[0] != (AcquiredRun{10, 10, round}) {
			t.Fatalf("delivery %d: %v", round, a)
		}
		if round == 2 {
			if err := p.Acknowledge("m", 10, 10, []int8{AckRelease}, t0); err != nil {
				t.Fatal(err)
			}
		}
	}
	// The third delivery's lock expires: at the limit, 10 is archived.
	p.ExpireLocks(t0.Add(time.Hour))
	if p.Start() != 12 {
		t.Fatalf("start %d, want 12 (10 archived at the delivery limit, 11 accepted)", p.Start())
	}

	// A snapshot keeps what was not acknowledged.
	q := NewPartition(testCfg(), 0)
	q.Acquire("m", [][2]int64{{0, 9}}, 10, 10, false, t0)
	if err := q.Acknowledge("m", 0, 4, []int8{AckAccept}, t0); err != nil {
		t.Fatal(err)
	}
	if err := q.Acknowledge("m", 6, 6, []int8{AckAccept}, t0); err != nil {
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
