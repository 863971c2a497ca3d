package share

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
)

// Snapshot is the persisted state of a share partition: its window and, for each run
// of offsets in it, the state and delivery count. Acquired records are persisted as
// Available with their delivery count, as Kafka does: after a restart they are
// delivered again, and only they and the records never delivered. Every offset in
// [Start, End) is in a run (End is one past the last run, or Start) — one released
// with its delivery count lowered to 0 too, so that the write replaces the count its
// acquisition stored — and the window travels in Kafka's form: a start offset and
// state batches.
type Snapshot struct {
	StateEpoch int32 `json:"state_epoch"`
	// LeaderEpoch is the leader epoch of the topic partition whose leader last read
	// or wrote the state (the share coordinator refuses older ones).
	LeaderEpoch int32      `json:"leader_epoch,omitempty"`
	Start       int64      `json:"start_offset"`
	End         int64      `json:"end_offset"`
	Runs        []StateRun `json:"runs,omitempty"`
}

// StateRun is a run of offsets [First, Last] with one state and delivery count.
type StateRun struct {
	First      int64 `json:"first"`
	Last       int64 `json:"last"`
	State      uint8 `json:"state"`
	Deliveries int16 `json:"deliveries"`
}

// Changes returns what of the persisted form changed since ClearDirty: the window's
// start and end, and the runs of the offsets that changed. Laid over the snapshot
// stored then (Snapshot.Merge), they give the whole window's persisted form. Kafka's
// share partition likewise writes only the state batches that changed.
func (p *Partition) Changes() Snapshot {
	s := Snapshot{StateEpoch: p.stateEpoch, Start: p.start, End: p.end}
	from, to := max(p.unstored.from, p.start), min(p.unstored.to, p.end)
	appended := p.end
	if p.unstored.appended >= 0 {
		appended = min(max(p.unstored.appended, p.start), p.end)
	}
	if from < to && to >= appended { // they touch: one range
		s.Runs = p.appendRuns(nil, min(from, appended), p.end)
		return s
	}
	if from < to {
		s.Runs = p.appendRuns(s.Runs, from, to)
	}
	s.Runs = p.appendRuns(s.Runs, appended, p.end)
	return s
}

// appendRuns appends the runs of offsets [from, to) of the window to runs.
func (p *Partition) appendRuns(runs []StateRun, from, to int64) []StateRun {
	n0 := len(runs)
	for i, r := range p.recs[from-p.start : to-p.start] {
		state := r.state
		if state == Acquired {
			state = Available
		}
		o := from + int64(i)
		if n := len(runs); n > n0 && runs[n-1].State == state && runs[n-1].Deliveries == r.deliveries {
			runs[n-1].Last = o
			continue
		}
		runs = append(runs, StateRun{First: o, Last: o, State: state, Deliveries: r.deliveries})
	}
	return runs
}

// FromSnapshot rebuilds a partition from its persisted form.
func FromSnapshot(cfg PartitionConfig, s Snapshot) (*Partition, error) {
	if s.End < s.Start {
		return nil, fmt.Errorf("share: snapshot end %d before start %d", s.End, s.Start)
	}
	if s.End-s.Start > MaxWindow {
		return nil, fmt.Errorf("%w: the stored window [%d, %d) spans more than the %d offsets a share partition holds; reset the group's offsets (AlterShareGroupOffsets) or delete them (DeleteShareGroupOffsets)", ErrWindowTooWide, s.Start, s.End, MaxWindow)
	}
	p := &Partition{cfg: cfg, stateEpoch: s.StateEpoch, start: s.Start, end: s.End, availFrom: s.Start, unstored: noChanges, arr: make([]record, s.End-s.Start)}
	p.recs = p.arr
	for _, run := range s.Runs {
		if run.First < s.Start || run.Last >= s.End || run.Last < run.First {
			return nil, fmt.Errorf("share: snapshot run [%d, %d] outside [%d, %d)", run.First, run.Last, s.Start, s.End)
		}
		for o := run.First; o <= run.Last; o++ {
			p.recs[o-s.Start] = record{state: run.State, deliveries: run.Deliveries}
		}
	}
	p.advance()
	p.ClearDirty()
	return p, nil
}

// Encode returns the snapshot as stored in __share_group_state: the JSON
// encoding/json gives it (DecodeSnapshot reads it with that), written field by field
// because every acknowledgement writes one and reflection made json.Marshal 2 % of
// the broker's CPU in the share benchmark (TestSnapshotEncodeIsJSON holds the two
// equal).
func (s Snapshot) Encode() []byte {
	b := make([]byte, 0, 96+64*len(s.Runs))
	b = append(b, `{"state_epoch":`...)
	b = strconv.AppendInt(b, int64(s.StateEpoch), 10)
	if s.LeaderEpoch != 0 {
		b = append(b, `,"leader_epoch":`...)
		b = strconv.AppendInt(b, int64(s.LeaderEpoch), 10)
	}
	b = append(b, `,"start_offset":`...)
	b = strconv.AppendInt(b, s.Start, 10)
	b = append(b, `,"end_offset":`...)
	b = strconv.AppendInt(b, s.End, 10)
	if len(s.Runs) > 0 {
		b = append(b, `,"runs":[`...)
		for i, r := range s.Runs {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"first":`...)
			b = strconv.AppendInt(b, r.First, 10)
			b = append(b, `,"last":`...)
			b = strconv.AppendInt(b, r.Last, 10)
			b = append(b, `,"state":`...)
			b = strconv.AppendUint(b, uint64(r.State), 10)
			b = append(b, `,"deliveries":`...)
			b = strconv.AppendInt(b, int64(r.Deliveries), 10)
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	return append(b, '}')
}

// DecodeSnapshot parses a stored snapshot.
func DecodeSnapshot(b []byte) (Snapshot, error) {
	var s Snapshot
	if err := json.Unmarshal(b, &s); err != nil {
		return s, fmt.Errorf("share: corrupt snapshot: %w", err)
	}
	return s, nil
}

// Merge returns the snapshot with the runs of a WriteShareGroupState laid over it, as
// Kafka's share coordinator combines state batches: offsets below start are dropped,
// a new run replaces what it overlaps, runs of equal state and delivery count that
// touch are joined. start -1 keeps the snapshot's start. It takes time linear in the
// number of runs.
func (s Snapshot) Merge(start int64, runs []StateRun) Snapshot {
	if start < 0 {
		start = s.Start
	}
	old, add := disjoint(s.Runs), disjoint(runs)
	// The parts of the old runs that no new run covers.
	var rest []StateRun
	j := 0
	for _, e := range old {
		for j < len(add) && add[j].Last < e.First {
			j++
		}
		from := e.First
		for k := j; k < len(add) && add[k].First <= e.Last; k++ {
			if add[k].First > from {
				rest = append(rest, StateRun{First: from, Last: add[k].First - 1, State: e.State, Deliveries: e.Deliveries})
			}
			from = max(from, add[k].Last+1)
		}
		if from <= e.Last {
			rest = append(rest, StateRun{First: from, Last: e.Last, State: e.State, Deliveries: e.Deliveries})
		}
	}
	out := Snapshot{StateEpoch: s.StateEpoch, LeaderEpoch: s.LeaderEpoch, Start: start}
	emit := func(r StateRun) {
		if r.Last < start {
			return
		}
		r.First = max(r.First, start)
		if n := len(out.Runs); n > 0 && out.Runs[n-1].Last+1 == r.First && out.Runs[n-1].State == r.State && out.Runs[n-1].Deliveries == r.Deliveries {
			out.Runs[n-1].Last = r.Last
			return
		}
		out.Runs = append(out.Runs, r)
	}
	for a, b := 0, 0; a < len(rest) || b < len(add); {
		if b == len(add) || a < len(rest) && rest[a].First < add[b].First {
			emit(rest[a])
			a++
		} else {
			emit(add[b])
			b++
		}
	}
	out.End = out.Start
	if n := len(out.Runs); n > 0 {
		out.End = max(out.End, out.Runs[n-1].Last+1)
	}
	return out
}

// disjoint returns runs sorted by offset with overlaps removed (an earlier run keeps
// what it covers) and empty runs dropped.
func disjoint(runs []StateRun) []StateRun {
	sorted := slices.IsSortedFunc(runs, func(a, b StateRun) int { return cmp.Compare(a.First, b.First) })
	if !sorted {
		runs = slices.Clone(runs)
		slices.SortStableFunc(runs, func(a, b StateRun) int { return cmp.Compare(a.First, b.First) })
	}
	out := runs[:0:0]
	for _, r := range runs {
		if n := len(out); n > 0 && r.First <= out[n-1].Last {
			r.First = out[n-1].Last + 1
		}
		if r.Last >= r.First {
			out = append(out, r)
		}
	}
	return out
}

// DeliveryComplete counts the offsets from the start on whose delivery is complete
// (acknowledged or archived): KIP-1226's DeliveryCompleteCount.
func (s Snapshot) DeliveryComplete() int64 {
	var n int64
	for _, r := range s.Runs {
		if r.Last >= s.Start && (r.State == Acknowledged || r.State == Archived) {
			n += r.Last - max(r.First, s.Start) + 1
		}
	}
	return n
}
