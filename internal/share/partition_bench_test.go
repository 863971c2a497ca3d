package share

import (
	"fmt"
	"testing"
	"time"
)

// BenchmarkPartitionCycle drives a partition as BenchmarkShareConsume (test/perf)
// does: four members, each holding the records of its last two fetches, accept
// the older ones and acquire up to 500 more (batches of 130 records) in a window
// of 2,000 locks, with Manager's Begin, Changes, ClearDirty and Commit around each
// change.
// ns/op is per record accepted.
func BenchmarkPartitionCycle(b *testing.B) {
	const batch, maxRecords, members = 130, 500, 4
	p := NewPartition(PartitionConfig{LockDuration: 30 * time.Second, DeliveryLimit: 5, MaxInFlight: 2000}, 0)
	held := make([][][]AcquiredRun, members) // per member, per fetch
	names := make([]string, members)
	starved := make([]bool, members)
	for i := range names {
		names[i] = fmt.Sprintf("member-%d", i)
	}
	now := t0
	var batches [][2]int64
	accepted := 0
	b.ResetTimer()
	for m := 0; accepted < b.N; m = (m + 1) % members {
		p.Begin()
		// A member whose last fetch got nothing (the window was full) sends the
		// acknowledgements of what it holds.
		if len(held[m]) >= 2 || len(held[m]) == 1 && starved[m] {
			for _, r := range held[m][0] {
				if err := p.Acknowledge(names[m], r.First, r.Last, []int8{AckAccept}, now, nil); err != nil {
					b.Fatal(err)
				}
				accepted += int(r.Last - r.First + 1)
			}
			held[m] = held[m][1:]
		}
		persist(p)
		p.Commit()
		p.Begin()
		from, ok := p.NextFetchOffset()
		starved[m] = !ok
		if !ok {
			p.Commit()
			continue
		}
		batches = batches[:0]
		for o := from - from%batch; o < from+maxRecords+batch; o += batch {
			batches = append(batches, [2]int64{o, o + batch - 1})
		}
		runs := p.Acquire(names[m], batches, 1<<62, maxRecords, false, now)
		persist(p)
		p.Commit()
		starved[m] = len(runs) == 0
		if len(runs) > 0 {
			held[m] = append(held[m], runs)
		}
	}
}

// persist is what Manager writes after a change: the changes, when the snapshot holds
// any.
func persist(p *Partition) {
	if p.Dirty() {
		_ = p.Changes()
		p.ClearDirty()
	}
}
