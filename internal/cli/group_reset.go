package cli

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// resetKind says how reset-offsets picks the new offset.
type resetKind int

const (
	resetEarliest  resetKind = iota // the log start offset
	resetLatest                     // the log end offset
	resetOffset                     // an absolute offset, clamped to the log
	resetTimestamp                  // the first offset at or after a time
	resetShift                      // the committed offset moved by n, clamped
)

// resetSpec is a parsed --to value.
type resetSpec struct {
	kind resetKind
	n    int64 // the offset, the shift, or the Unix milliseconds
}

// parseResetSpec parses earliest | latest | offset:N | timestamp:T | shift:N, where T
// is RFC3339, @unixms or unixms.
func parseResetSpec(s string) (resetSpec, error) {
	switch s {
	case "earliest":
		return resetSpec{kind: resetEarliest}, nil
	case "latest":
		return resetSpec{kind: resetLatest}, nil
	}
	kind, arg, _ := strings.Cut(s, ":")
	bad := usagef("--to wants earliest, latest, offset:N, timestamp:T or shift:N, not %q", s)
	switch kind {
	case "offset":
		n, err := strconv.ParseInt(arg, 10, 64)
		if err != nil || n < 0 {
			return resetSpec{}, bad
		}
		return resetSpec{kind: resetOffset, n: n}, nil
	case "shift":
		n, err := strconv.ParseInt(arg, 10, 64)
		if err != nil {
			return resetSpec{}, bad
		}
		return resetSpec{kind: resetShift, n: n}, nil
	case "timestamp":
		if ms, err := strconv.ParseInt(arg, 10, 64); err == nil {
			return resetSpec{kind: resetTimestamp, n: ms}, nil
		}
		ms, err := parseTimestamp(arg)
		if err != nil {
			return resetSpec{}, bad
		}
		return resetSpec{kind: resetTimestamp, n: ms}, nil
	}
	return resetSpec{}, bad
}

// partitionOffsets is what the planner knows about one partition. Committed and
// AtTime are -1 when there is none.
type partitionOffsets struct {
	Topic     string
	Partition int32
	Committed int64
	Start     int64
	End       int64
	AtTime    int64
}

// resetRow is one line of a reset plan; the JSON field names are documented.
type resetRow struct {
	Topic         string `json:"topic"`
	Partition     int32  `json:"partition"`
	CurrentOffset *int64 `json:"current_offset"`
	NewOffset     int64  `json:"new_offset"`
}

var errNoCommitToShift = errors.New("no committed offset to shift from")

// planReset computes the new offset of every partition; it does no I/O. New offsets
// are clamped into [log start, log end], as kafka-consumer-groups.sh does.
func planReset(parts []partitionOffsets, spec resetSpec) ([]resetRow, error) {
	rows := make([]resetRow, 0, len(parts))
	for _, p := range parts {
		row := resetRow{Topic: p.Topic, Partition: p.Partition}
		if p.Committed >= 0 {
			row.CurrentOffset = ptr(p.Committed)
		}
		var target int64
		switch spec.kind {
		case resetEarliest:
			target = p.Start
		case resetLatest:
			target = p.End
		case resetOffset:
			target = spec.n
		case resetTimestamp:
			target = p.End
			if p.AtTime >= 0 {
				target = p.AtTime
			}
		case resetShift:
			if p.Committed < 0 {
				return nil, fmt.Errorf("%s partition %d: %w (reset it with --to earliest, latest, offset:N or timestamp:T first)",
					p.Topic, p.Partition, errNoCommitToShift)
			}
			target = p.Committed + spec.n
		}
		row.NewOffset = min(max(target, p.Start), p.End)
		rows = append(rows, row)
	}
	return rows, nil
}

// resetPlan is the JSON result of `group reset-offsets`.
type resetPlan struct {
	Group    string     `json:"group"`
	Executed bool       `json:"executed"`
	Plan     []resetRow `json:"plan"`
}

func newGroupResetOffsetsCmd(g *globals) *cobra.Command {
	var (
		topics  []string
		to      string
		execute bool
	)
	cmd := &cobra.Command{
		Use:   "reset-offsets GROUP --topic T --to SPEC [--execute]",
		Short: "Move a group's committed offsets (dry run unless --execute)",
		Long: `Compute new committed offsets for every partition of the given topics and
print the plan; with --execute, commit them. The group must have no active members:
stop its consumers first (the broker would refuse commits from outside the group).

--to is one of:
  earliest       the log start offset
  latest         the log end offset
  offset:N       offset N (clamped to the log's start and end)
  timestamp:T    the first record at or after T (RFC3339, @unixms or unixms);
                 the log end when no record is that recent
  shift:N        the committed offset plus N (N may be negative; clamped)`,
		Example: `  samsa group reset-offsets billing --topic orders --to earliest
  samsa group reset-offsets billing --topic orders --to timestamp:2024-05-01T00:00:00Z --execute
  samsa group reset-offsets billing --topic orders --to shift:-100 --execute`,
		Args: args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			if len(topics) == 0 {
				return usagef("--topic is required")
			}
			if to == "" {
				return usagef("--to is required")
			}
			spec, err := parseResetSpec(to)
			if err != nil {
				return err
			}
			return runResetOffsets(cmd, g, a[0], topics, spec, execute)
		},
	}
	cmd.Flags().StringArrayVarP(&topics, "topic", "t", nil, "topic whose offsets to reset (repeatable)")
	cmd.Flags().StringVar(&to, "to", "", "earliest, latest, offset:N, timestamp:T or shift:N")
	cmd.Flags().BoolVar(&execute, "execute", false, "commit the new offsets (default: only print the plan)")
	return cmd
}

func runResetOffsets(cmd *cobra.Command, g *globals, group string, topics []string, spec resetSpec, execute bool) error {
	adm, ctx, done, err := g.admin(cmd.Context())
	if err != nil {
		return err
	}
	defer done()
	rows, err := resetOffsets(ctx, g, adm, group, topics, spec, execute)
	if err != nil {
		return err
	}
	return renderResetPlan(g.newOutput(cmd), resetPlan{Group: group, Executed: execute, Plan: rows})
}

// resetOffsets plans the reset and, with execute, commits it.
func resetOffsets(ctx context.Context, g *globals, adm *kadm.Client, group string, topics []string, spec resetSpec, execute bool) ([]resetRow, error) {
	st, err := loadGroupForReset(ctx, g, adm, group)
	if err != nil {
		return nil, err
	}
	parts, err := resetInputs(ctx, g, adm, st, topics, spec)
	if err != nil {
		return nil, err
	}
	rows, err := planReset(parts, spec)
	if err != nil {
		return nil, err
	}
	if execute {
		if err := commitPlan(ctx, g, adm, group, rows); err != nil {
			return nil, err
		}
	}
	return rows, nil
}

// loadGroupForReset loads the group and refuses while it has active members. A group
// that does not exist yet is fine: the commit creates it.
func loadGroupForReset(ctx context.Context, g *globals, adm *kadm.Client, group string) (groupState, error) {
	described, err := adm.DescribeGroups(ctx, group)
	if err != nil && len(described) == 0 {
		return groupState{}, g.explain(fmt.Sprintf("describe group %q", group), err)
	}
	d := described[group]
	if d.Err != nil && !errors.Is(d.Err, kerr.GroupIDNotFound) {
		return groupState{}, g.explain(fmt.Sprintf("describe group %q", group), d.Err)
	}
	if errors.Is(d.Err, kerr.GroupIDNotFound) {
		if st, ok := loadModernGroup(ctx, adm, group); ok {
			switch {
			case st.share != nil:
				return groupState{}, fmt.Errorf("group %q is a share group: its start offsets are not reset by this command", group)
			case len(st.consumer.Members) > 0:
				return groupState{}, fmt.Errorf("group %q has %d active member(s) (state %s): stop its consumers before resetting offsets",
					group, len(st.consumer.Members), st.consumer.State)
			}
		}
	}
	if n := len(d.Members); n > 0 || (d.State != "Empty" && d.State != "Dead" && d.State != "") {
		return groupState{}, fmt.Errorf("group %q has %d active member(s) (state %s): stop its consumers before resetting offsets",
			group, n, d.State)
	}
	commits, err := adm.FetchOffsets(ctx, group)
	if err != nil && len(commits) == 0 {
		commits = kadm.OffsetResponses{}
	}
	return groupState{described: d, commits: commits}, nil
}

// resetInputs gathers committed, start, end and (for timestamps) time-indexed offsets.
func resetInputs(ctx context.Context, g *globals, adm *kadm.Client, st groupState, topics []string, spec resetSpec) ([]partitionOffsets, error) {
	for _, t := range topics {
		if _, err := topicExists(ctx, g, adm, t); err != nil {
			return nil, err
		}
	}
	starts, err := adm.ListStartOffsets(ctx, topics...)
	if err != nil {
		return nil, g.explain("list start offsets", err)
	}
	ends, err := adm.ListEndOffsets(ctx, topics...)
	if err != nil {
		return nil, g.explain("list end offsets", err)
	}
	var atTime kadm.ListedOffsets
	if spec.kind == resetTimestamp {
		if atTime, err = adm.ListOffsetsAfterMilli(ctx, spec.n, topics...); err != nil {
			return nil, g.explain("list offsets by time", err)
		}
	}
	var parts []partitionOffsets
	for _, t := range topics {
		for _, s := range sortedListed(starts[t]) {
			if s.Err != nil {
				return nil, g.explain(fmt.Sprintf("list offsets of %s partition %d", t, s.Partition), s.Err)
			}
			p := partitionOffsets{Topic: t, Partition: s.Partition, Committed: -1, Start: s.Offset, AtTime: -1}
			p.End = valueOr(listedOffset(ends, t, s.Partition), s.Offset)
			p.AtTime = valueOr(listedOffset(atTime, t, s.Partition), -1)
			if c, ok := st.commits[t][s.Partition]; ok && c.Err == nil {
				p.Committed = c.At
			}
			parts = append(parts, p)
		}
	}
	return parts, nil
}

func sortedListed(m map[int32]kadm.ListedOffset) []kadm.ListedOffset {
	out := make([]kadm.ListedOffset, 0, len(m))
	for _, o := range m {
		out = append(out, o)
	}
	slices.SortFunc(out, func(a, b kadm.ListedOffset) int { return cmp.Compare(a.Partition, b.Partition) })
	return out
}

func commitPlan(ctx context.Context, g *globals, adm *kadm.Client, group string, rows []resetRow) error {
	var offsets kadm.Offsets
	for _, r := range rows {
		offsets.Add(kadm.Offset{Topic: r.Topic, Partition: r.Partition, At: r.NewOffset, LeaderEpoch: -1})
	}
	resps, err := adm.CommitOffsets(ctx, group, offsets)
	if err == nil {
		err = resps.Error()
	}
	if err != nil {
		return g.explain(fmt.Sprintf("commit offsets of group %q", group), err)
	}
	return nil
}

func renderResetPlan(o *output, plan resetPlan) error {
	return o.render(plan, func(w io.Writer) {
		t := newTable(w, "GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "NEW-OFFSET")
		for _, r := range plan.Plan {
			t.row(plan.Group, r.Topic, r.Partition, dashInt(r.CurrentOffset), r.NewOffset)
		}
		t.flush()
		if plan.Executed {
			fmt.Fprintf(w, "\ncommitted %d offsets for group %q\n", len(plan.Plan), plan.Group)
		} else {
			fmt.Fprintf(w, "\ndry run: nothing was committed; add --execute to apply this plan\n")
		}
	})
}
