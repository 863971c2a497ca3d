package share

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"testing"
)

// TestSnapshotEncodeIsJSON: Encode writes exactly what json.Marshal writes for a
// snapshot — the stored format DecodeSnapshot reads — for the zero snapshot, the
// extremes of every field, and random ones, and DecodeSnapshot gives the snapshot back.
func TestSnapshotEncodeIsJSON(t *testing.T) {
	snaps := []Snapshot{
		{},
		{StateEpoch: 3, Start: 10, End: 10},
		{StateEpoch: math.MaxInt32, LeaderEpoch: math.MinInt32, Start: math.MinInt64, End: math.MaxInt64,
			Runs: []StateRun{{First: math.MinInt64, Last: math.MaxInt64, State: math.MaxUint8, Deliveries: math.MinInt16}}},
		{StateEpoch: -1, LeaderEpoch: 7, Start: 0, End: 5, Runs: []StateRun{}},
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 500 {
		s := Snapshot{StateEpoch: rng.Int32(), Start: rng.Int64N(1 << 40), End: rng.Int64N(1 << 40)}
		if rng.IntN(2) == 0 {
			s.LeaderEpoch = rng.Int32()
		}
		for range rng.IntN(6) {
			s.Runs = append(s.Runs, StateRun{First: rng.Int64(), Last: rng.Int64(), State: uint8(rng.IntN(256)), Deliveries: int16(rng.IntN(1 << 16))})
		}
		snaps = append(snaps, s)
	}
	for _, s := range snaps {
		want, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		got := s.Encode()
		if !bytes.Equal(got, want) {
			t.Fatalf("Encode of %+v:\n%s\nwant json.Marshal's\n%s", s, got, want)
		}
		back, err := DecodeSnapshot(got)
		if err != nil {
			t.Fatal(err)
		}
		if len(s.Runs) == 0 {
			s.Runs = nil // omitted when empty: decoded as none
		}
		if back.StateEpoch != s.StateEpoch || back.LeaderEpoch != s.LeaderEpoch || back.Start != s.Start || back.End != s.End || len(back.Runs) != len(s.Runs) {
			t.Fatalf("decoded %+v, want %+v", back, s)
		}
		for i := range s.Runs {
			if back.Runs[i] != s.Runs[i] {
				t.Fatalf("decoded run %d %+v, want %+v", i, back.Runs[i], s.Runs[i])
			}
		}
	}
}

// BenchmarkSnapshotEncode: a snapshot of the size an acknowledgement writes (a few
// runs), encoded as stored.
func BenchmarkSnapshotEncode(b *testing.B) {
	s := Snapshot{StateEpoch: 1, LeaderEpoch: 4, Start: 1_000_000, End: 1_002_000, Runs: []StateRun{
		{First: 1_000_000, Last: 1_000_499, State: 4, Deliveries: 1},
		{First: 1_000_500, Last: 1_001_499, State: 2, Deliveries: 1},
		{First: 1_001_500, Last: 1_001_999, State: 0, Deliveries: 0},
	}}
	b.ReportAllocs()
	for b.Loop() {
		_ = s.Encode()
	}
}
