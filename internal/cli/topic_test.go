package cli

import (
	"errors"
	"maps"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
)

func TestSizesFromLogDirs(t *testing.T) {
	detail := kadm.TopicDetail{Topic: "t", Partitions: kadm.PartitionDetails{
		0: {Topic: "t", Partition: 0, Leader: 1},
		1: {Topic: "t", Partition: 1, Leader: 2},
		2: {Topic: "t", Partition: 2, Leader: 3},
	}}
	part := func(broker, p int32, size int64, future bool) kadm.DescribedLogDirPartition {
		return kadm.DescribedLogDirPartition{Broker: broker, Topic: "t", Partition: p, Size: size, IsFuture: future}
	}
	dir := func(broker int32, parts ...kadm.DescribedLogDirPartition) kadm.DescribedLogDirs {
		topics := kadm.DescribedLogDirTopics{"t": {}}
		for _, p := range parts {
			topics["t"][p.Partition] = p
		}
		return kadm.DescribedLogDirs{"/data": {Broker: broker, Dir: "/data", Topics: topics}}
	}
	dirs := kadm.DescribedAllLogDirs{
		1: dir(1, part(1, 0, 100, false), part(1, 1, 900, false)),
		2: dir(2, part(2, 0, 80, false), part(2, 1, 500, false), part(2, 2, 7, false)),
		3: dir(3, part(3, 2, 999, true)),
		4: {"/bad": {Broker: 4, Dir: "/bad", Err: errors.New("offline"), Topics: kadm.DescribedLogDirTopics{"t": {2: part(4, 2, 12345, false)}}}},
	}
	got := sizesFromLogDirs(dirs, detail)
	// 0: leader 1 says 100. 1: leader 2 says 500 (not the larger follower).
	// 2: leader 3 only has a future replica, so the largest other replica: 7.
	want := map[int32]int64{0: 100, 1: 500, 2: 7}
	if !maps.Equal(got, want) {
		t.Fatalf("sizes = %v, want %v", got, want)
	}
	if sizes := sizesFromLogDirs(kadm.DescribedAllLogDirs{}, detail); sizes != nil {
		t.Fatalf("no log dirs: sizes = %v, want nil (n/a)", sizes)
	}
}

func TestAlterOps(t *testing.T) {
	ops, err := alterOps([]string{"b=2", "a=1=1"}, []string{"c"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"set a=1=1", "set b=2", "delete c"}
	var got []string
	for _, op := range ops {
		if op.Op == kadm.SetConfig {
			got = append(got, "set "+op.Name+"="+*op.Value)
		} else {
			got = append(got, "delete "+op.Name)
		}
	}
	if len(got) != len(want) {
		t.Fatalf("ops %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("ops %v, want %v", got, want)
		}
	}
	for _, bad := range []struct{ sets, deletes []string }{
		{nil, nil},
		{[]string{"novalue"}, nil},
		{[]string{"=1"}, nil},
		{[]string{"a=1", "a=2"}, nil},
		{nil, []string{"a=1"}},
		{[]string{"a=1"}, []string{"a"}},
	} {
		if _, err := alterOps(bad.sets, bad.deletes); err == nil {
			t.Errorf("alterOps(%v, %v) accepted", bad.sets, bad.deletes)
		}
	}
}

func TestHumanBytes(t *testing.T) {
	for n, want := range map[int64]string{0: "0 B", 1023: "1023 B", 1024: "1.0 KiB", 1536: "1.5 KiB", 5 << 30: "5.0 GiB"} {
		if got := humanBytes(n); got != want {
			t.Errorf("humanBytes(%d) = %q, want %q", n, got, want)
		}
	}
}
