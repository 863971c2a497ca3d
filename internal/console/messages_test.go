package console

import (
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
)

func TestParseBrowseQuery(t *testing.T) {
	q, err := parseBrowseQuery(url.Values{"partition": {"2"}, "from": {"offset"}, "offset": {"7"}, "limit": {"9999"}, "key": {" k "}}, 50, 500)
	if err != nil || q.Partition != 2 || q.From != fromOffset || q.Offset != 7 || q.Limit != 500 || q.Key != "k" {
		t.Errorf("got %+v, %v", q, err)
	}
	q, err = parseBrowseQuery(url.Values{}, 50, 500)
	if err != nil || q.Partition != -1 || q.From != fromNewest || q.Limit != 50 {
		t.Errorf("defaults: %+v, %v", q, err)
	}
	_, err = parseBrowseQuery(url.Values{"partition": {"x"}, "from": {"time"}, "time": {"yesterday"}, "limit": {"0"}}, 50, 500)
	for _, want := range []string{"partition", "time", "limit"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not name %s", err, want)
		}
	}
}

func TestPlanReads(t *testing.T) {
	parts := []kadm.PartitionDetail{{Partition: 0, Leader: 1}, {Partition: 1, Leader: 1}, {Partition: 2, Leader: -1}, {Partition: 3, Leader: 2}}
	starts := map[int32]int64{0: 0, 1: 10, 2: 0, 3: 5}
	ends := map[int32]int64{0: 100, 1: 12, 2: 50, 3: 5}
	newest := planReads(browseQuery{From: fromNewest, Limit: 20}, parts, starts, ends, nil)
	// Partition 2 is offline and partition 3 empty; 1 holds only 2 records.
	want := []readPlan{{Partition: 0, Leader: 1, Start: 80, Stop: 100, Count: 20}, {Partition: 1, Leader: 1, Start: 10, Stop: 12, Count: 20}}
	if !slices.Equal(newest, want) {
		t.Errorf("newest: %+v, want %+v", newest, want)
	}
	fromOffset := planReads(browseQuery{From: fromOffset, Offset: 11, Limit: 5}, parts, starts, ends, nil)
	want = []readPlan{{Partition: 0, Leader: 1, Start: 11, Stop: 100, Count: 5}, {Partition: 1, Leader: 1, Start: 11, Stop: 12, Count: 5}}
	if !slices.Equal(fromOffset, want) {
		t.Errorf("from offset: %+v, want %+v", fromOffset, want)
	}
	atTime := planReads(browseQuery{From: fromTime, Limit: 5}, parts, starts, ends, map[int32]int64{0: 42})
	if len(atTime) != 1 || atTime[0].Start != 42 {
		t.Errorf("from time: %+v", atTime)
	}
	// Many partitions share the read budget: at least one record each, at most
	// maxReadRecords in all, the busiest first.
	var many []kadm.PartitionDetail
	s, e := map[int32]int64{}, map[int32]int64{}
	for p := range int32(5000) {
		many = append(many, kadm.PartitionDetail{Partition: p, Leader: 1})
		s[p], e[p] = 0, int64(1+p%7)
	}
	plans := planReads(browseQuery{From: fromNewest, Limit: 50}, many, s, e, nil)
	total, planned, leastPlanned := 0, map[int32]bool{}, int64(1<<62)
	for _, p := range plans {
		total += p.Count
		planned[p.Partition] = true
		leastPlanned = min(leastPlanned, e[p.Partition])
	}
	for p, end := range e {
		if !planned[p] && end > leastPlanned {
			t.Fatalf("partition %d with %d records left out for one with %d", p, end, leastPlanned)
		}
	}
	if len(plans) != maxReadRecords || total != maxReadRecords {
		t.Errorf("%d partitions and %d records planned, want %d of each", len(plans), total, maxReadRecords)
	}
}
