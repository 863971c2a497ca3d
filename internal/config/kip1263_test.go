package config

import (
	"errors"
	"strings"
	"testing"
)

// TestKIP1263AssignmentIntervals: Kafka 4.3's assignment intervals load at its
// defaults (1 s within [0, 15 s]); the broker's value must lie within its bounds, a
// group's within the broker's, and a group's value stored before the bounds narrowed
// counts as the nearest bound; a refusal names the property, the value and the bound.
func TestKIP1263AssignmentIntervals(t *testing.T) {
	d := Default()
	for _, got := range [][3]int32{
		{d.GroupConsumerAssignmentIntervalMs, d.GroupConsumerMinAssignmentIntervalMs, d.GroupConsumerMaxAssignmentIntervalMs},
		{d.GroupShareAssignmentIntervalMs, d.GroupShareMinAssignmentIntervalMs, d.GroupShareMaxAssignmentIntervalMs},
	} {
		if got != [3]int32{1000, 0, 15000} {
			t.Errorf("assignment interval %d in [%d, %d], want 1000 in [0, 15000]", got[0], got[1], got[2])
		}
	}
	if _, err := Load("", []string{"group.consumer.assignment.interval.ms=0", "group.share.assignment.interval.ms=15000"}); err != nil {
		t.Errorf("0 and 15000: %v", err)
	}
	for _, c := range []struct {
		overrides []string
		sentinel  error
		want      string
	}{
		{[]string{"group.consumer.assignment.interval.ms=-1"}, ErrInvalidValue, `group.consumer.assignment.interval.ms="-1"`},
		{[]string{"group.consumer.assignment.interval.ms=20000"}, ErrInvalidConfig,
			"group.consumer.assignment.interval.ms=20000 is outside [group.consumer.min.assignment.interval.ms=0, group.consumer.max.assignment.interval.ms=15000]"},
		{[]string{"group.share.min.assignment.interval.ms=2000"}, ErrInvalidConfig,
			"group.share.assignment.interval.ms=1000 is outside [group.share.min.assignment.interval.ms=2000, group.share.max.assignment.interval.ms=15000]"},
	} {
		_, err := Load("", c.overrides)
		if !errors.Is(err, c.sentinel) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: err = %v, want %v containing %q", c.overrides, err, c.sentinel, c.want)
		}
	}

	for _, c := range []struct{ name, value, want string }{
		{"consumer.assignment.interval.ms", "0", ""},
		{"share.assignment.interval.ms", "15000", ""},
		{"consumer.assignment.interval.ms", "15001",
			"consumer.assignment.interval.ms=15001 is outside [group.consumer.min.assignment.interval.ms=0, group.consumer.max.assignment.interval.ms=15000]"},
		{"share.assignment.interval.ms", "-5", "share.assignment.interval.ms=-5 must be an integer of at least 0"},
	} {
		err := ValidateGroupConfigs(d, map[string]string{c.name: c.value}, []string{c.name})
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s=%s: %v", c.name, c.value, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s=%s: error %v, want one containing %q", c.name, c.value, err, c.want)
		}
	}

	narrowed, err := Load("", []string{"group.consumer.min.assignment.interval.ms=500", "group.consumer.max.assignment.interval.ms=3000"})
	if err != nil {
		t.Fatal(err)
	}
	for stored, want := range map[string]int{"": 1000, "0": 500, "2000": 2000, "9000": 3000} {
		overrides := map[string]string{}
		if stored != "" {
			overrides["consumer.assignment.interval.ms"] = stored
		}
		if got := GroupInt(narrowed, overrides, "consumer.assignment.interval.ms"); got != want {
			t.Errorf("consumer.assignment.interval.ms stored %q under narrowed bounds: %d, want %d", stored, got, want)
		}
	}
}
