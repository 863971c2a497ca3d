package share

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"
)

// partitionCopy is what Rollback must restore: the partition, with each record's
// member given by its id (the member table may keep ids added since Begin).
type partitionCopy struct {
	p       Partition
	holders []string
}

// clonePartition is a deep copy of what Rollback must restore.
func clonePartition(p *Partition) partitionCopy {
	c := *p
	c.recs = append([]record(nil), p.recs...)
	c.journal = journal{}
	// What changed since the last write: a rollback widens it to the whole window.
	c.unstored.from, c.unstored.to = 0, 0
	c.members, c.memberIndex = nil, nil
	var holders []string
	for i, r := range c.recs {
		if r.state == Acquired {
			holders = append(holders, p.members[r.member])
			c.recs[i].member = 0
		}
	}
	return partitionCopy{c, holders}
}

func samePartition(t *testing.T, step int, got *Partition, want partitionCopy) {
	t.Helper()
	g := clonePartition(got)
	if len(g.p.recs) == 0 && len(want.p.recs) == 0 {
		g.p.recs, want.p.recs = nil, nil
	}
	g.p.arr, want.p.arr = nil, nil // where the window lies in its array does not matter
	if !reflect.DeepEqual(g, want) {
		t.Fatalf("step %d:\n got  %+v\n want %+v", step, g, want)
	}
}

// TestPartitionRollback applies random operations, each between Begin and Rollback
// or Commit, and checks that a rollback gives back exactly the partition as it was; a
// quarter of the changes are first taken back by Undo (checked the same way) and made
// again.
// Each commit of a change the snapshot holds is written as the Manager writes it (the
// Changes laid over the stored snapshot), and a rolled-back one is stored half the
// time (a write whose answer was lost): after every write the stored snapshot is the
// window's.
func TestPartitionRollback(t *testing.T) {
	for seed := range uint64(8) {
		partitionRollback(t, seed)
	}
}

func partitionRollback(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 2))
	cfg := PartitionConfig{LockDuration: 10 * time.Second, DeliveryLimit: 3, MaxInFlight: 40}
	p := NewPartition(cfg, 0)
	now := t0
	members := []string{"a", "b", "c"}
	hw := int64(0)
	var stored Snapshot
	write := func() {
		ch := p.Changes()
		if p.reset {
			stored = Snapshot{StateEpoch: ch.StateEpoch, Start: ch.Start, End: ch.Start}
		}
		stored = stored.Merge(ch.Start, ch.Runs)
	}
	for step := range 5000 {
		now = now.Add(time.Duration(rng.IntN(3000)) * time.Millisecond)
		hw += int64(rng.IntN(4))
		before, unstored := clonePartition(p), p.unstored
		p.Begin()
		ops := func() {
			for range 1 + rng.IntN(3) {
				m := members[rng.IntN(len(members))]
				if seed%2 == 1 { // members come and go: the member table is compacted
					m = fmt.Sprintf("m%d", rng.IntN(step+1))
				}
				switch rng.IntN(8) {
				case 0, 1:
					first := p.Start() + int64(rng.IntN(5))
					p.Acquire(m, [][2]int64{{first, first + int64(rng.IntN(8))}}, hw, 1+rng.IntN(10), rng.IntN(2) == 0, now)
				case 2, 3:
					o := p.Start() + int64(rng.IntN(int(p.End()-p.Start()+1)))
					_ = p.Acknowledge(m, o, o+int64(rng.IntN(3)), []int8{int8(1 + rng.IntN(4))}, now, nil)
				case 4:
					p.ExpireLocks(now)
				case 5:
					p.ReleaseMember(m)
				case 6:
					if rng.IntN(10) == 0 {
						p.Reset(p.Start() + int64(rng.IntN(5)))
					} else {
						p.AdvanceStart(p.Start() + int64(rng.IntN(3)))
					}
				case 7:
					first := p.Start() + int64(rng.IntN(int(p.End()-p.Start()+2)))
					p.ArchiveUndelivered(first, first+int64(rng.IntN(4)), hw)
				}
				p.NextFetchOffset()
			}
		}
		ops()
		if rng.IntN(4) == 0 {
			// Undo takes the change back unwritten and records what follows as usual.
			p.Undo()
			samePartition(t, step, p, before)
			if p.unstored != unstored { // nothing was written: the next write is as it would have been
				t.Fatalf("step %d: unstored %+v after Undo, want %+v", step, p.unstored, unstored)
			}
			ops()
		}
		if rng.IntN(2) == 0 {
			if p.Dirty() && rng.IntN(2) == 0 {
				write()
			}
			p.Rollback()
			samePartition(t, step, p, before)
		} else {
			if len(p.members) > 2*(int(cfg.MaxInFlight)+10) { // at most 2× the holders
				t.Fatalf("step %d: %d member ids kept", step, len(p.members))
			}
			// Commit keeps what changed, wherever it moves the window in its array.
			changed := clonePartition(p)
			p.Commit()
			samePartition(t, step, p, changed)
			if p.Dirty() {
				write()
				p.ClearDirty()
				sameStored(t, step, stored, p.Snapshot())
			}
			p.TakeFreed()
			p.TakeReset()
		}
	}
}

// sameStored checks that the stored snapshot holds the window's: the same start and
// runs up to the window's end. Past it the store may keep runs of a write that was
// rolled back after it was stored; the window's end moving over them writes them again.
func sameStored(t *testing.T, step int, stored, want Snapshot) {
	t.Helper()
	var runs []StateRun
	for _, r := range stored.Runs {
		if r.First < want.End {
			r.Last = min(r.Last, want.End-1)
			runs = append(runs, r)
		}
	}
	if stored.Start != want.Start || !reflect.DeepEqual(runs, want.Runs) {
		t.Fatalf("step %d: stored start %d, runs %v\nwant start %d, runs %v", step, stored.Start, runs, want.Start, want.Runs)
	}
}

func TestSnapshotMerge(t *testing.T) {
	run := func(first, last int64, state uint8, deliveries int16) StateRun {
		return StateRun{First: first, Last: last, State: state, Deliveries: deliveries}
	}
	stored := Snapshot{StateEpoch: 2, LeaderEpoch: 4, Start: 10, End: 30, Runs: []StateRun{
		run(10, 14, Acknowledged, 1), run(15, 19, Available, 1), run(20, 29, Archived, 3),
	}}
	for _, tc := range []struct {
		name  string
		start int64
		runs  []StateRun
		want  Snapshot
	}{
		{"nothing new", -1, nil, stored},
		{"start moves past runs", 16, nil, Snapshot{StateEpoch: 2, LeaderEpoch: 4, Start: 16, End: 30, Runs: []StateRun{
			run(16, 19, Available, 1), run(20, 29, Archived, 3)}}},
		{"new run splits an old one", -1, []StateRun{run(16, 17, Acknowledged, 1)}, Snapshot{StateEpoch: 2, LeaderEpoch: 4, Start: 10, End: 30, Runs: []StateRun{
			run(10, 14, Acknowledged, 1), run(15, 15, Available, 1), run(16, 17, Acknowledged, 1), run(18, 19, Available, 1), run(20, 29, Archived, 3)}}},
		{"new runs join and extend", -1, []StateRun{run(15, 19, Acknowledged, 1), run(30, 34, Available, 1)}, Snapshot{StateEpoch: 2, LeaderEpoch: 4, Start: 10, End: 35, Runs: []StateRun{
			run(10, 19, Acknowledged, 1), run(20, 29, Archived, 3), run(30, 34, Available, 1)}}},
		{"out of order and overlapping new runs", 12, []StateRun{run(25, 40, Available, 2), run(11, 26, Acknowledged, 1)}, Snapshot{StateEpoch: 2, LeaderEpoch: 4, Start: 12, End: 41, Runs: []StateRun{
			run(12, 26, Acknowledged, 1), run(27, 40, Available, 2)}}},
		{"start beyond everything", 50, nil, Snapshot{StateEpoch: 2, LeaderEpoch: 4, Start: 50, End: 50}},
	} {
		got := stored.Merge(tc.start, tc.runs)
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s:\n got  %+v\n want %+v", tc.name, got, tc.want)
		}
	}
	if n := stored.DeliveryComplete(); n != 15 {
		t.Errorf("DeliveryComplete %d, want 15", n)
	}
	// A partition's full snapshot laid over the stored one gives the partition's.
	p := NewPartition(testCfg(), 0)
	p.Acquire("m", [][2]int64{{0, 9}}, 10, 10, false, t0)
	_ = p.Acknowledge("m", 2, 3, []int8{AckAccept}, t0, nil)
	first := p.Snapshot()
	_ = p.Acknowledge("m", 0, 1, []int8{AckAccept}, t0, nil)
	_ = p.Acknowledge("m", 4, 4, []int8{AckRelease}, t0, nil)
	second := p.Snapshot()
	if got := first.Merge(second.Start, second.Runs); !reflect.DeepEqual(got, second) {
		t.Errorf("full snapshot over the previous one:\n got  %+v\n want %+v", got, second)
	}
}
