package cli

import (
	"errors"
	"testing"
)

func TestParseResetSpec(t *testing.T) {
	tests := []struct {
		in      string
		want    resetSpec
		wantErr bool
	}{
		{in: "earliest", want: resetSpec{kind: resetEarliest}},
		{in: "latest", want: resetSpec{kind: resetLatest}},
		{in: "offset:42", want: resetSpec{kind: resetOffset, n: 42}},
		{in: "shift:-5", want: resetSpec{kind: resetShift, n: -5}},
		{in: "shift:+5", want: resetSpec{kind: resetShift, n: 5}},
		{in: "timestamp:1714564800000", want: resetSpec{kind: resetTimestamp, n: 1714564800000}},
		{in: "timestamp:@1714564800000", want: resetSpec{kind: resetTimestamp, n: 1714564800000}},
		{in: "timestamp:2024-05-01T12:00:00Z", want: resetSpec{kind: resetTimestamp, n: 1714564800000}},
		{in: "offset:-1", wantErr: true},
		{in: "offset:", wantErr: true},
		{in: "shift:x", wantErr: true},
		{in: "timestamp:noon", wantErr: true},
		{in: "beginning", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := parseResetSpec(tt.in)
			if tt.wantErr {
				if _, ok := errors.AsType[*usageError](err); !ok {
					t.Fatalf("err = %v, want a usage error", err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("got %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
}

func TestPlanReset(t *testing.T) {
	// Partition 0: log [10, 100), committed 50, first record after the time at 70.
	// Partition 1: log [0, 20), never committed, no record after the time.
	parts := []partitionOffsets{
		{Topic: "t", Partition: 0, Committed: 50, Start: 10, End: 100, AtTime: 70},
		{Topic: "t", Partition: 1, Committed: -1, Start: 0, End: 20, AtTime: -1},
	}
	tests := []struct {
		spec    resetSpec
		want    []int64
		wantErr error
	}{
		{spec: resetSpec{kind: resetEarliest}, want: []int64{10, 0}},
		{spec: resetSpec{kind: resetLatest}, want: []int64{100, 20}},
		{spec: resetSpec{kind: resetOffset, n: 15}, want: []int64{15, 15}},
		{spec: resetSpec{kind: resetOffset, n: 5}, want: []int64{10, 5}},
		{spec: resetSpec{kind: resetOffset, n: 500}, want: []int64{100, 20}},
		{spec: resetSpec{kind: resetTimestamp, n: 1}, want: []int64{70, 20}},
		{spec: resetSpec{kind: resetShift, n: 1}, wantErr: errNoCommitToShift},
	}
	for _, tt := range tests {
		got, err := planReset(parts, tt.spec)
		if tt.wantErr != nil {
			if !errors.Is(err, tt.wantErr) {
				t.Errorf("%+v: err = %v, want %v", tt.spec, err, tt.wantErr)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%+v: %v", tt.spec, err)
		}
		for i, row := range got {
			if row.NewOffset != tt.want[i] {
				t.Errorf("%+v: partition %d new offset %d, want %d", tt.spec, row.Partition, row.NewOffset, tt.want[i])
			}
		}
		if got[0].CurrentOffset == nil || *got[0].CurrentOffset != 50 || got[1].CurrentOffset != nil {
			t.Errorf("%+v: current offsets wrong: %+v", tt.spec, got)
		}
	}
}

func TestPlanResetShiftClamps(t *testing.T) {
	parts := []partitionOffsets{
		{Topic: "t", Partition: 0, Committed: 50, Start: 10, End: 100, AtTime: -1},
		{Topic: "t", Partition: 1, Committed: 15, Start: 10, End: 100, AtTime: -1},
		{Topic: "t", Partition: 2, Committed: 95, Start: 10, End: 100, AtTime: -1},
	}
	for _, tt := range []struct {
		shift int64
		want  []int64
	}{
		{shift: -10, want: []int64{40, 10, 85}},
		{shift: 10, want: []int64{60, 25, 100}},
	} {
		got, err := planReset(parts, resetSpec{kind: resetShift, n: tt.shift})
		if err != nil {
			t.Fatal(err)
		}
		for i, row := range got {
			if row.NewOffset != tt.want[i] {
				t.Errorf("shift %d: partition %d new offset %d, want %d", tt.shift, i, row.NewOffset, tt.want[i])
			}
		}
	}
}
