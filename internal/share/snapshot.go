package share

import (
	"encoding/json"
	"fmt"
)

// Snapshot is the persisted state of a share partition: its window and, for each run
// of offsets in it that is not plainly available and never delivered, the state and
// delivery count. Acquired records are persisted as Available with their delivery
// count, as Kafka does: after a restart they are delivered again, and only they and
// the records never delivered.
type Snapshot struct {
	StateEpoch int32      `json:"state_epoch"`
	Start      int64      `json:"start_offset"`
	End        int64      `json:"end_offset"`
	Runs       []StateRun `json:"runs,omitempty"`
}

// StateRun is a run of offsets [First, Last] with one state and delivery count.
type StateRun struct {
	First      int64 `json:"first"`
	Last       int64 `json:"last"`
	State      uint8 `json:"state"`
	Deliveries int16 `json:"deliveries"`
}

// Snapshot returns the partition's persisted form.
func (p *Partition) Snapshot() Snapshot {
	s := Snapshot{Start: p.start, End: p.end}
	for i, r := range p.recs {
		state := r.state
		if state == Acquired {
			state = Available
		}
		if state == Available && r.deliveries == 0 {
			continue
		}
		o := p.start + int64(i)
		if n := len(s.Runs); n > 0 && s.Runs[n-1].Last == o-1 && s.Runs[n-1].State == state && s.Runs[n-1].Deliveries == r.deliveries {
			s.Runs[n-1].Last = o
			continue
		}
		s.Runs = append(s.Runs, StateRun{First: o, Last: o, State: state, Deliveries: r.deliveries})
	}
	return s
}

// FromSnapshot rebuilds a partition from its persisted form.
func FromSnapshot(cfg PartitionConfig, s Snapshot) (*Partition, error) {
	if s.End < s.Start {
		return nil, fmt.Errorf("share: snapshot end %d before start %d", s.End, s.Start)
	}
	p := &Partition{cfg: cfg, start: s.Start, end: s.End, availFrom: s.Start, recs: make([]record, s.End-s.Start)}
	for _, run := range s.Runs {
		if run.First < s.Start || run.Last >= s.End || run.Last < run.First {
			return nil, fmt.Errorf("share: snapshot run [%d, %d] outside [%d, %d)", run.First, run.Last, s.Start, s.End)
		}
		for o := run.First; o <= run.Last; o++ {
			p.recs[o-s.Start] = record{state: run.State, deliveries: run.Deliveries}
		}
	}
	p.advance()
	p.dirty = false
	return p, nil
}

// Encode returns the snapshot as stored in __share_group_state.
func (s Snapshot) Encode() []byte {
	b, _ := json.Marshal(s)
	return b
}

// DecodeSnapshot parses a stored snapshot.
func DecodeSnapshot(b []byte) (Snapshot, error) {
	var s Snapshot
	if err := json.Unmarshal(b, &s); err != nil {
		return s, fmt.Errorf("share: corrupt snapshot: %w", err)
	}
	return s, nil
}
