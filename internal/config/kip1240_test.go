package config

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

// KIP-1240 (Kafka 4.3): share.partition.max.record.locks is a group config, and it and
// share.delivery.count.limit lie within the broker's group.share.min.X and
// group.share.max.X.

// TestKIP1240BrokerBounds: the bounds load at Kafka 4.3's defaults, each within its
// own range, and the broker's own value must lie within them; a refusal names the
// property, the value and the bound.
func TestKIP1240BrokerBounds(t *testing.T) {
	d := Default()
	if d.GroupSharePartitionMaxRecordLocks != 2000 || d.GroupShareMinPartitionMaxRecordLocks != 100 || d.GroupShareMaxPartitionMaxRecordLocks != 4000 {
		t.Errorf("record locks: %d in [%d, %d], want 2000 in [100, 4000]",
			d.GroupSharePartitionMaxRecordLocks, d.GroupShareMinPartitionMaxRecordLocks, d.GroupShareMaxPartitionMaxRecordLocks)
	}
	if d.GroupShareDeliveryCountLimit != 5 || d.GroupShareMinDeliveryCountLimit != 2 || d.GroupShareMaxDeliveryCountLimit != 10 {
		t.Errorf("delivery count limit: %d in [%d, %d], want 5 in [2, 10]",
			d.GroupShareDeliveryCountLimit, d.GroupShareMinDeliveryCountLimit, d.GroupShareMaxDeliveryCountLimit)
	}
	accepted := [][]string{
		{"group.share.min.partition.max.record.locks=100", "group.share.max.partition.max.record.locks=4000",
			"group.share.min.delivery.count.limit=2", "group.share.max.delivery.count.limit=10"}, // Kafka 4.3's defaults
		{"group.share.max.partition.max.record.locks=10000", "group.share.partition.max.record.locks=10000"},
		{"group.share.min.partition.max.record.locks=2000", "group.share.max.partition.max.record.locks=2000"},
		{"group.share.min.delivery.count.limit=5", "group.share.max.delivery.count.limit=5"},
	}
	for _, overrides := range accepted {
		if _, err := Load("", overrides); err != nil {
			t.Errorf("%v: %v", overrides, err)
		}
	}
	refused := []struct {
		overrides []string
		sentinel  error
		want      string
	}{
		{[]string{"group.share.min.partition.max.record.locks=99"}, ErrInvalidValue, `group.share.min.partition.max.record.locks="99": must be in [100,...,2000]`},
		{[]string{"group.share.min.partition.max.record.locks=2001"}, ErrInvalidValue, `group.share.min.partition.max.record.locks="2001": must be in [100,...,2000]`},
		{[]string{"group.share.max.partition.max.record.locks=1999"}, ErrInvalidValue, `group.share.max.partition.max.record.locks="1999": must be in [2000,...,10000]`},
		{[]string{"group.share.max.partition.max.record.locks=10001"}, ErrInvalidValue, `group.share.max.partition.max.record.locks="10001": must be in [2000,...,10000]`},
		{[]string{"group.share.min.delivery.count.limit=1"}, ErrInvalidValue, `group.share.min.delivery.count.limit="1": must be in [2,...,10]`},
		{[]string{"group.share.max.delivery.count.limit=11"}, ErrInvalidValue, `group.share.max.delivery.count.limit="11": must be in [2,...,10]`},
		{[]string{"group.share.partition.max.record.locks=5000"}, ErrInvalidConfig,
			"group.share.partition.max.record.locks=5000 is outside [group.share.min.partition.max.record.locks=100, group.share.max.partition.max.record.locks=4000]"},
		{[]string{"group.share.min.partition.max.record.locks=500", "group.share.partition.max.record.locks=200"}, ErrInvalidConfig,
			"group.share.partition.max.record.locks=200 is outside [group.share.min.partition.max.record.locks=500, group.share.max.partition.max.record.locks=4000]"},
		{[]string{"group.share.max.delivery.count.limit=4"}, ErrInvalidConfig,
			"group.share.delivery.count.limit=5 is outside [group.share.min.delivery.count.limit=2, group.share.max.delivery.count.limit=4]"},
		{[]string{"group.share.min.delivery.count.limit=6"}, ErrInvalidConfig,
			"group.share.delivery.count.limit=5 is outside [group.share.min.delivery.count.limit=6, group.share.max.delivery.count.limit=10]"},
	}
	for _, c := range refused {
		_, err := Load("", c.overrides)
		if !errors.Is(err, c.sentinel) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: err = %v, want %v containing %q", c.overrides, err, c.sentinel, c.want)
		}
	}
}

// TestKIP1240GroupConfigs: share.partition.max.record.locks and
// share.delivery.count.limit set on a group must lie within the broker's bounds; a
// value stored before the bounds narrowed counts as the nearest bound.
func TestKIP1240GroupConfigs(t *testing.T) {
	b := Default()
	cases := []struct {
		name, value string
		want        string // "" for valid, else a part of the error
	}{
		{"share.partition.max.record.locks", "100", ""},
		{"share.partition.max.record.locks", "4000", ""},
		{"share.partition.max.record.locks", "50",
			"share.partition.max.record.locks=50 is outside [group.share.min.partition.max.record.locks=100, group.share.max.partition.max.record.locks=4000]"},
		{"share.partition.max.record.locks", "5000",
			"share.partition.max.record.locks=5000 is outside [group.share.min.partition.max.record.locks=100, group.share.max.partition.max.record.locks=4000]"},
		{"share.partition.max.record.locks", "many", "share.partition.max.record.locks=many must be an integer"},
		{"share.delivery.count.limit", "2", ""},
		{"share.delivery.count.limit", "10", ""},
		{"share.delivery.count.limit", "1",
			"share.delivery.count.limit=1 is outside [group.share.min.delivery.count.limit=2, group.share.max.delivery.count.limit=10]"},
		{"share.delivery.count.limit", "11", "share.delivery.count.limit=11 is outside"},
	}
	for _, c := range cases {
		err := ValidateGroupConfigs(b, map[string]string{c.name: c.value}, []string{c.name})
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s=%s: %v", c.name, c.value, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s=%s: error %v, want one containing %q", c.name, c.value, err, c.want)
		}
	}

	narrowed, err := Load("", []string{
		"group.share.min.partition.max.record.locks=500", "group.share.max.partition.max.record.locks=3000",
		"group.share.min.delivery.count.limit=3", "group.share.max.delivery.count.limit=6",
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, stored string // "": no override
		want         int
	}{
		{"share.partition.max.record.locks", "", 2000},
		{"share.partition.max.record.locks", "1000", 1000},
		{"share.partition.max.record.locks", "100", 500},
		{"share.partition.max.record.locks", "4000", 3000},
		{"share.delivery.count.limit", "", 5},
		{"share.delivery.count.limit", "2", 3},
		{"share.delivery.count.limit", "10", 6},
	} {
		overrides := map[string]string{}
		if c.stored != "" {
			overrides[c.name] = c.stored
		}
		if got := GroupInt(narrowed, overrides, c.name); got != c.want {
			t.Errorf("%s stored %q under narrowed bounds: %d, want %d", c.name, c.stored, got, c.want)
		}
	}
}

// TestKIP1240DescribeGroup: DescribeConfigs of a GROUP shows
// share.partition.max.record.locks with the broker's
// group.share.partition.max.record.locks as its synonym, as for the other share
// configs.
func TestKIP1240DescribeGroup(t *testing.T) {
	b, err := Load("", []string{"group.share.partition.max.record.locks=3000"})
	if err != nil {
		t.Fatal(err)
	}
	find := func(entries []Entry, name string) Entry {
		t.Helper()
		for _, e := range entries {
			if e.Name == name {
				return e
			}
		}
		t.Fatalf("DescribeGroup lists no %s", name)
		return Entry{}
	}
	e := find(DescribeGroup(b, nil), "share.partition.max.record.locks")
	want := []Synonym{
		{Name: "group.share.partition.max.record.locks", Value: "3000", Source: SourceStaticBroker},
		{Name: "group.share.partition.max.record.locks", Value: "2000", Source: SourceDefault},
	}
	if e.Value != "3000" || e.Source != SourceStaticBroker || e.Type != TypeInt || !reflect.DeepEqual(e.Synonyms, want) {
		t.Errorf("unset: %+v, want value 3000 from the static broker config, synonyms %+v", e, want)
	}
	e = find(DescribeGroup(Default(), map[string]string{"share.partition.max.record.locks": "150"}), "share.partition.max.record.locks")
	want = []Synonym{
		{Name: "share.partition.max.record.locks", Value: "150", Source: SourceGroup},
		{Name: "group.share.partition.max.record.locks", Value: "2000", Source: SourceDefault},
	}
	if e.Value != "150" || e.Source != SourceGroup || !reflect.DeepEqual(e.Synonyms, want) {
		t.Errorf("set on the group: %+v, want value 150 (GROUP_CONFIG), synonyms %+v", e, want)
	}
	e = find(DescribeGroup(Default(), nil), "share.delivery.count.limit")
	if e.Value != "5" || e.Source != SourceDefault || len(e.Synonyms) != 1 || e.Synonyms[0].Name != "group.share.delivery.count.limit" {
		t.Errorf("share.delivery.count.limit: %+v, want 5 with the synonym group.share.delivery.count.limit", e)
	}
}
