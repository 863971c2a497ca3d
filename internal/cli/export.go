package cli

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// What other clients of the cluster (the web console, internal/console) reuse from
// the commands: doctor's collector and the reset-offsets planner, for callers that
// hold their own kadm client and have no command line.

// Collect gathers doctor's Snapshot of every non-internal topic and every consumer
// group, sampling the groups across window (0: once, which skips the checks that
// need time), and returns the checks it could not run. seeds and timeout are what
// its error messages name.
func Collect(ctx context.Context, adm *kadm.Client, seeds []string, timeout, window time.Duration) (Snapshot, []string, error) {
	c := &collector{g: clientGlobals(seeds, timeout), adm: adm}
	snap, err := c.collect(ctx, window)
	return snap, c.skipped, err
}

// About names what a finding is about: group "g", topic "t", partitions 1,2.
func (f Finding) About() string {
	var about []string
	if f.Group != "" {
		about = append(about, fmt.Sprintf("group %q", f.Group))
	}
	if f.Topic != "" {
		about = append(about, fmt.Sprintf("topic %q", f.Topic))
	}
	if len(f.Partitions) > 0 {
		about = append(about, partitionList(f.Partitions))
	}
	return strings.Join(about, ", ")
}

// NumbersText renders a finding's numbers as name=value pairs sorted by name.
func (f Finding) NumbersText() string {
	var nums []string
	for _, k := range sortedKeys(f.Numbers) {
		nums = append(nums, fmt.Sprintf("%s=%d", k, f.Numbers[k]))
	}
	return strings.Join(nums, " ")
}

// ResetRow is one partition of a reset-offsets plan; CurrentOffset is nil when the
// group has not committed for the partition.
type ResetRow struct {
	Topic         string
	Partition     int32
	CurrentOffset *int64
	NewOffset     int64
}

// ResetOffsets plans new committed offsets of group for every partition of topics,
// as `samsa group reset-offsets` does, and commits them when execute is set. to is
// earliest, latest, offset:N, timestamp:T or shift:N. It refuses while the group
// has active members.
func ResetOffsets(ctx context.Context, adm *kadm.Client, seeds []string, timeout time.Duration,
	group string, topics []string, to string, execute bool) ([]ResetRow, error) {
	spec, err := parseResetSpec(to)
	if err != nil {
		return nil, err
	}
	rows, err := resetOffsets(ctx, clientGlobals(seeds, timeout), adm, group, topics, spec, execute)
	if err != nil {
		return nil, err
	}
	out := make([]ResetRow, len(rows))
	for i, r := range rows {
		out[i] = ResetRow{Topic: r.Topic, Partition: r.Partition, CurrentOffset: r.CurrentOffset, NewOffset: r.NewOffset}
	}
	return out, nil
}

// WithBrokerMessage puts the message a broker gave (or the caller's own words) in
// place of a Kafka error code's generic description: "CODE: msg", still matching the
// code with errors.Is. Any other err gets msg appended; an empty msg changes nothing.
func WithBrokerMessage(err error, msg string) error { return withBrokerMessage(err, msg) }

// HumanBytes renders a byte count with a binary unit ("1.5 MiB").
func HumanBytes(n int64) string { return humanBytes(n) }

// clientGlobals are the settings a command would have had for these seeds.
func clientGlobals(seeds []string, timeout time.Duration) *globals {
	return &globals{brokers: strings.Join(seeds, ","), output: outputText, timeout: timeout}
}
