package cli

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

func TestBuildGroupDescriptionLag(t *testing.T) {
	st := groupState{
		described: kadm.DescribedGroup{Group: "g", State: "Empty", ProtocolType: "consumer"},
		commits: kadm.OffsetResponses{
			"a": {
				0: {Offset: kadm.Offset{Topic: "a", Partition: 0, At: 10}},
				1: {Offset: kadm.Offset{Topic: "a", Partition: 1, At: 40}},
				2: {Offset: kadm.Offset{Topic: "a", Partition: 2, At: -1}},
			},
			"b": {0: {Offset: kadm.Offset{Topic: "b", Partition: 0, At: 5}, Err: kerr.UnstableOffsetCommit}},
		},
	}
	ends := kadm.ListedOffsets{
		"a": {
			0: {Topic: "a", Partition: 0, Offset: 25},
			1: {Topic: "a", Partition: 1, Offset: 40},
			2: {Topic: "a", Partition: 2, Offset: 7},
		},
		"b": {0: {Topic: "b", Partition: 0, Offset: 9}},
	}
	d := buildGroupDescription(st, ends)
	if d.TotalLag != 15 {
		t.Fatalf("total lag %d, want 15 (partitions without a commit do not count)", d.TotalLag)
	}
	type row struct {
		topic     string
		partition int32
		committed string
		lag       string
	}
	want := []row{{"a", 0, "10", "15"}, {"a", 1, "40", "0"}, {"a", 2, "-", "-"}, {"b", 0, "-", "-"}}
	if len(d.Partitions) != len(want) {
		t.Fatalf("%d rows, want %d: %+v", len(d.Partitions), len(want), d.Partitions)
	}
	for i, w := range want {
		p := d.Partitions[i]
		got := row{p.Topic, p.Partition, dashInt(p.CommittedOffset), dashInt(p.Lag)}
		if got != w {
			t.Errorf("row %d = %+v, want %+v", i, got, w)
		}
	}
	if d.Partitions[3].Error == nil {
		t.Errorf("a commit error is not reported")
	}
}
