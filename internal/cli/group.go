package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

func newGroupCmd(g *globals) *cobra.Command {
	cmd := newGroupingCmd("group", "List, describe, delete consumer groups and reset their offsets",
		"Inspect and manage groups — classic and KIP-848 consumer groups, KIP-932 share groups:\nmembers, assignments, committed offsets (share-partition start offsets) and lag.")
	cmd.AddCommand(
		newGroupListCmd(g),
		newGroupDescribeCmd(g),
		newGroupDeleteCmd(g),
		newGroupResetOffsetsCmd(g),
		newGroupAlterConfigCmd(g),
	)
	return cmd
}

// groupSummary is one row of `group list`.
type groupSummary struct {
	Group        string `json:"group"`
	Type         string `json:"type"` // classic, consumer (KIP-848) or share (KIP-932)
	State        string `json:"state"`
	ProtocolType string `json:"protocol_type"`
	Coordinator  int32  `json:"coordinator"`
}

func newGroupListCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List consumer groups",
		Example: `  samsa group list
  samsa group list -o json | jq -r '.groups[].group'`,
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			adm, ctx, done, err := g.admin(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			listed, err := adm.ListGroups(ctx)
			if err != nil && len(listed) == 0 {
				return g.explain("list groups", err)
			}
			rows := []groupSummary{}
			for _, l := range listed.Sorted() {
				rows = append(rows, groupSummary{Group: l.Group, Type: l.GroupType, State: l.State, ProtocolType: l.ProtocolType, Coordinator: l.Coordinator})
			}
			return g.newOutput(cmd).render(struct {
				Groups []groupSummary `json:"groups"`
			}{rows}, func(w io.Writer) {
				t := newTable(w, "GROUP", "TYPE", "STATE", "PROTOCOL-TYPE")
				for _, r := range rows {
					t.row(r.Group, orDash(r.Type), orDash(r.State), orDash(r.ProtocolType))
				}
				t.flush()
			})
		},
	}
}

// groupDescription is the JSON result of `group describe`.
type groupDescription struct {
	Group        string         `json:"group"`
	Type         string         `json:"type"` // classic, consumer or share
	State        string         `json:"state"`
	ProtocolType string         `json:"protocol_type"`
	Protocol     string         `json:"protocol"`
	Coordinator  int32          `json:"coordinator"`
	Members      []groupMember  `json:"members"`
	Partitions   []partitionLag `json:"partitions"`
	TotalLag     int64          `json:"total_lag"`
	// Configs are a consumer or share group's configs (none for a classic group);
	// ConfigsError says why they could not be read.
	Configs      []configEntry `json:"configs,omitempty"`
	ConfigsError string        `json:"configs_error,omitempty"`
}

type groupMember struct {
	MemberID   string  `json:"member_id"`
	InstanceID *string `json:"instance_id"`
	ClientID   string  `json:"client_id"`
	Host       string  `json:"host"`
	// Protocol is, in a consumer group, the protocol the member speaks: "consumer", or
	// "classic" for a classic member of a group being migrated.
	Protocol    string            `json:"protocol,omitempty"`
	Assignments []topicPartitions `json:"assignments"`
}

type topicPartitions struct {
	Topic      string  `json:"topic"`
	Partitions []int32 `json:"partitions"`
}

// partitionLag is one partition the group consumes or has committed to. Committed
// offset and lag are null when the group has not committed for the partition. For a
// share group the committed offset is the share-partition start offset (every record
// below it is acknowledged or archived) and the lag counts the records below the log
// end not yet acknowledged.
type partitionLag struct {
	Topic           string  `json:"topic"`
	Partition       int32   `json:"partition"`
	CommittedOffset *int64  `json:"committed_offset"`
	LogEndOffset    *int64  `json:"log_end_offset"`
	Lag             *int64  `json:"lag"`
	MemberID        string  `json:"member_id"`
	ClientID        string  `json:"client_id"`
	Host            string  `json:"host"`
	Error           *string `json:"error,omitempty"`
}

func newGroupDescribeCmd(g *globals) *cobra.Command {
	var allConfigs bool
	cmd := &cobra.Command{
		Use:   "describe GROUP",
		Short: "Show a group's members, assignments, committed offsets and lag",
		Long: `Show a group's state and members (client id, host, assigned partitions),
then for every partition it is assigned or has committed to: the committed offset,
the log end offset and the lag between them, and the total lag. Classic groups,
KIP-848 consumer groups and share groups are all described; for a share group the
committed offset is the share-partition start offset. For consumer and share groups
it lists the configs set on the group (--all-configs: every group config).`,
		Example: `  samsa group describe billing
  samsa group describe billing -o json | jq .total_lag`,
		Args: args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			cl, adm, ctx, done, err := g.adminClient(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			desc, err := describeGroup(ctx, g, adm, a[0])
			if err != nil {
				return err
			}
			if desc.Type == "consumer" || desc.Type == "share" {
				if desc.Configs, err = groupConfigs(ctx, cl, a[0]); err != nil {
					desc.ConfigsError = g.explain("describe the group's configs", err).Error()
				}
			}
			return renderGroupDescription(g.newOutput(cmd), desc, allConfigs)
		},
	}
	cmd.Flags().BoolVar(&allConfigs, "all-configs", false, "list every group config with its source, not only those set on the group")
	return cmd
}

// groupState is what describe, reset-offsets and doctor read about a group:
// described for a classic group, consumer for a KIP-848 one, share (with the
// share-partition offsets) for a share group.
type groupState struct {
	described kadm.DescribedGroup
	consumer  *kadm.DescribedConsumerGroup
	share     *kadm.DescribedShareGroup
	shareOffs kadm.ShareOffsets
	commits   kadm.OffsetResponses
}

// assigned returns the partitions assigned to the group's members.
func (st groupState) assigned() kadm.TopicsSet {
	switch {
	case st.consumer != nil:
		return st.consumer.AssignedPartitions()
	case st.share != nil:
		s := kadm.TopicsSet{}
		for _, m := range st.share.Members {
			s.Merge(m.Assignment)
		}
		return s
	}
	return st.described.AssignedPartitions()
}

// loadModernGroup describes group as a KIP-848 consumer group, then as a share group;
// ok is false when it is neither.
func loadModernGroup(ctx context.Context, adm *kadm.Client, group string) (groupState, bool) {
	if cg, err := adm.DescribeConsumerGroups(ctx, group); err == nil {
		if d, ok := cg[group]; ok && d.Err == nil {
			return groupState{consumer: &d}, true
		}
	}
	if sg, err := adm.DescribeShareGroups(ctx, group); err == nil {
		if d, ok := sg[group]; ok && d.Err == nil {
			st := groupState{share: &d}
			if offs, err := adm.DescribeShareGroupOffsets(ctx, group); err == nil {
				st.shareOffs = offs[group].Offsets
			}
			return st, true
		}
	}
	return groupState{}, false
}

// loadGroup describes a group and fetches its committed offsets; a group that does
// not exist is an error that says so.
func loadGroup(ctx context.Context, g *globals, adm *kadm.Client, group string) (groupState, error) {
	described, err := adm.DescribeGroups(ctx, group)
	if err != nil && len(described) == 0 {
		return groupState{}, g.explain(fmt.Sprintf("describe group %q", group), err)
	}
	d, ok := described[group]
	if !ok {
		return groupState{}, fmt.Errorf("describe group %q: missing from the broker's answer", group)
	}
	if errors.Is(d.Err, kerr.GroupIDNotFound) || d.Err == nil && d.State == "Dead" && len(d.Members) == 0 {
		if st, ok := loadModernGroup(ctx, adm, group); ok {
			if st.consumer != nil {
				st.commits, _ = adm.FetchOffsets(ctx, group)
			}
			return st, nil
		}
	}
	if errors.Is(d.Err, kerr.GroupIDNotFound) {
		return groupState{}, groupNotFound(group)
	}
	if d.Err != nil {
		return groupState{}, g.explain(fmt.Sprintf("describe group %q", group), d.Err)
	}
	commits, err := adm.FetchOffsets(ctx, group)
	if err != nil && !errors.Is(err, kerr.GroupIDNotFound) {
		return groupState{}, g.explain(fmt.Sprintf("fetch committed offsets of group %q", group), err)
	}
	if (d.State == "Dead" || d.State == "") && len(d.Members) == 0 && len(commits) == 0 {
		return groupState{}, groupNotFound(group)
	}
	return groupState{described: d, commits: commits}, nil
}

func groupNotFound(group string) error {
	return fmt.Errorf("group %q does not exist; see `samsa group list`", group)
}

func describeGroup(ctx context.Context, g *globals, adm *kadm.Client, group string) (groupDescription, error) {
	st, err := loadGroup(ctx, g, adm, group)
	if err != nil {
		return groupDescription{}, err
	}
	topics := groupTopics(st)
	var ends kadm.ListedOffsets
	if len(topics) > 0 {
		ends, err = adm.ListEndOffsets(ctx, topics...)
		if err != nil && len(ends) == 0 {
			return groupDescription{}, g.explain("list end offsets", err)
		}
	}
	return buildGroupDescription(st, ends), nil
}

// groupTopics returns the topics a group is assigned or has committed to.
func groupTopics(st groupState) []string {
	set := map[string]bool{}
	for t := range st.commits {
		set[t] = true
	}
	for t := range st.assigned() {
		set[t] = true
	}
	for t := range st.shareOffs {
		set[t] = true
	}
	return sortedKeys(set)
}

// buildGroupDescription joins members, commits and end offsets; it does no I/O.
func buildGroupDescription(st groupState, ends kadm.ListedOffsets) groupDescription {
	desc, members := describeMembers(st)
	owner := map[string]map[int32]groupMember{}
	for _, gm := range members {
		for _, a := range gm.Assignments {
			for _, p := range a.Partitions {
				if owner[a.Topic] == nil {
					owner[a.Topic] = map[int32]groupMember{}
				}
				owner[a.Topic][p] = gm
			}
		}
		desc.Members = append(desc.Members, gm)
	}
	for _, tp := range lagPartitions(st) {
		row := partitionLag{Topic: tp.topic, Partition: tp.partition, LogEndOffset: listedOffset(ends, tp.topic, tp.partition)}
		if m, ok := owner[tp.topic][tp.partition]; ok {
			row.MemberID, row.ClientID, row.Host = m.MemberID, m.ClientID, m.Host
		}
		if c, ok := st.commits[tp.topic][tp.partition]; ok {
			if c.Err != nil {
				row.Error = ptr(c.Err.Error())
			} else if c.At >= 0 {
				row.CommittedOffset = ptr(c.At)
			}
		}
		if so, ok := st.shareOffs.Lookup(tp.topic, tp.partition); ok {
			switch {
			case so.Err != nil:
				row.Error = ptr(so.Err.Error())
			case so.StartOffset >= 0:
				row.CommittedOffset = ptr(so.StartOffset)
				if so.Lag >= 0 {
					row.Lag = ptr(so.Lag)
					desc.TotalLag += so.Lag
				}
			}
			desc.Partitions = append(desc.Partitions, row)
			continue
		}
		if row.CommittedOffset != nil && row.LogEndOffset != nil {
			row.Lag = ptr(max(0, *row.LogEndOffset-*row.CommittedOffset))
			desc.TotalLag += *row.Lag
		}
		desc.Partitions = append(desc.Partitions, row)
	}
	return desc
}

type topicPartition struct {
	topic     string
	partition int32
}

// lagPartitions lists, sorted, every partition a group is assigned or committed to.
func lagPartitions(st groupState) []topicPartition {
	seen := map[topicPartition]bool{}
	for t, ps := range st.commits {
		for p := range ps {
			seen[topicPartition{t, p}] = true
		}
	}
	for t, ps := range st.assigned() {
		for p := range ps {
			seen[topicPartition{t, p}] = true
		}
	}
	for t, ps := range st.shareOffs {
		for p := range ps {
			seen[topicPartition{t, p}] = true
		}
	}
	out := make([]topicPartition, 0, len(seen))
	for tp := range seen {
		out = append(out, tp)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].topic != out[j].topic {
			return out[i].topic < out[j].topic
		}
		return out[i].partition < out[j].partition
	})
	return out
}

func renderGroupDescription(o *output, d groupDescription, allConfigs bool) error {
	return o.render(d, func(w io.Writer) {
		fmt.Fprintf(w, "Group:        %s\n", d.Group)
		fmt.Fprintf(w, "Type:         %s\n", d.Type)
		fmt.Fprintf(w, "State:        %s\n", d.State)
		fmt.Fprintf(w, "Protocol:     %s/%s\n", orDash(d.ProtocolType), orDash(d.Protocol))
		fmt.Fprintf(w, "Coordinator:  %d\n", d.Coordinator)
		fmt.Fprintf(w, "Members:      %d\n", len(d.Members))
		fmt.Fprintf(w, "Total lag:    %d\n", d.TotalLag)
		if len(d.Members) > 0 {
			fmt.Fprintln(w)
			// A consumer group with classic members (being migrated) says which
			// protocol each member speaks.
			mixed := slices.ContainsFunc(d.Members, func(m groupMember) bool { return m.Protocol == "classic" })
			header := []string{"MEMBER-ID", "CLIENT-ID", "HOST", "ASSIGNMENTS"}
			if mixed {
				header = slices.Insert(header, 1, "PROTOCOL")
			}
			t := newTable(w, header...)
			for _, m := range d.Members {
				cells := []any{m.MemberID, m.ClientID, m.Host, orDash(assignmentText(m.Assignments))}
				if mixed {
					cells = slices.Insert(cells, 1, any(m.Protocol))
				}
				t.row(cells...)
			}
			t.flush()
		}
		if len(d.Partitions) > 0 {
			fmt.Fprintln(w)
			t := newTable(w, "TOPIC", "PARTITION", "COMMITTED", "LOG-END", "LAG", "MEMBER-ID", "CLIENT-ID", "HOST")
			for _, p := range d.Partitions {
				t.row(p.Topic, p.Partition, dashInt(p.CommittedOffset), dashInt(p.LogEndOffset), dashInt(p.Lag),
					orDash(p.MemberID), orDash(p.ClientID), orDash(p.Host))
			}
			t.flush()
		}
		if d.Configs != nil || d.ConfigsError != "" {
			renderConfigs(w, d.Configs, d.ConfigsError, "DYNAMIC_GROUP_CONFIG", allConfigs)
		}
	})
}

func assignmentText(as []topicPartitions) string {
	s := ""
	for i, a := range as {
		if i > 0 {
			s += " "
		}
		s += a.Topic + ":" + int32List(a.Partitions)
	}
	return s
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func dashInt(v *int64) string {
	if v == nil {
		return "-"
	}
	return fmt.Sprint(*v)
}

func newGroupDeleteCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:     "delete GROUP",
		Aliases: []string{"rm"},
		Short:   "Delete an empty consumer group and its committed offsets",
		Example: `  samsa group delete old-billing`,
		Args:    args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			adm, ctx, done, err := g.admin(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			resp, err := adm.DeleteGroup(ctx, a[0])
			if err == nil {
				err = resp.Err
			}
			switch {
			case errors.Is(err, kerr.GroupIDNotFound):
				return groupNotFound(a[0])
			case err != nil:
				return g.explain(fmt.Sprintf("delete group %q", a[0]), err)
			}
			return g.newOutput(cmd).render(struct {
				Group string `json:"group"`
			}{a[0]}, func(w io.Writer) { fmt.Fprintf(w, "deleted group %q\n", a[0]) })
		},
	}
}

// describeMembers is the header of a description and its members, whatever the
// group's type.
func describeMembers(st groupState) (groupDescription, []groupMember) {
	desc := groupDescription{Members: []groupMember{}, Partitions: []partitionLag{}}
	var members []groupMember
	sortedAssignments := func(set kadm.TopicsSet) []topicPartitions {
		out := []topicPartitions{}
		for _, t := range set.Sorted() {
			out = append(out, topicPartitions{Topic: t.Topic, Partitions: slices.Sorted(slices.Values(t.Partitions))})
		}
		return out
	}
	switch {
	case st.consumer != nil:
		d := st.consumer
		desc.Group, desc.Type, desc.State, desc.ProtocolType, desc.Protocol = d.Group, "consumer", d.State, "consumer", d.AssignorName
		desc.Coordinator = d.Coordinator.NodeID
		for _, m := range d.Members {
			protocol := "consumer"
			if m.MemberType == 0 {
				protocol = "classic"
			}
			members = append(members, groupMember{MemberID: m.MemberID, InstanceID: m.InstanceID, ClientID: m.ClientID, Host: m.ClientHost,
				Protocol: protocol, Assignments: sortedAssignments(m.Assignment)})
		}
	case st.share != nil:
		d := st.share
		desc.Group, desc.Type, desc.State, desc.ProtocolType, desc.Protocol = d.GroupID, "share", d.GroupState, "share", d.Assignor
		desc.Coordinator = d.Coordinator.NodeID
		for _, m := range d.Members {
			members = append(members, groupMember{MemberID: m.MemberID, ClientID: m.ClientID, Host: m.ClientHost,
				Assignments: sortedAssignments(m.Assignment)})
		}
	default:
		d := st.described
		desc.Group, desc.Type, desc.State, desc.ProtocolType, desc.Protocol = d.Group, "classic", d.State, d.ProtocolType, d.Protocol
		desc.Coordinator = d.Coordinator.NodeID
		for _, m := range d.Members {
			gm := groupMember{MemberID: m.MemberID, InstanceID: m.InstanceID, ClientID: m.ClientID, Host: m.ClientHost, Assignments: []topicPartitions{}}
			if c, ok := m.Assigned.AsConsumer(); ok {
				for _, t := range c.Topics {
					gm.Assignments = append(gm.Assignments, topicPartitions{Topic: t.Topic, Partitions: slices.Sorted(slices.Values(t.Partitions))})
				}
			}
			sort.Slice(gm.Assignments, func(i, j int) bool { return gm.Assignments[i].Topic < gm.Assignments[j].Topic })
			members = append(members, gm)
		}
	}
	return desc, members
}
