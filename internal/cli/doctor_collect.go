package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// doctorScope says what doctor looks at; empty fields mean everything.
type doctorScope struct {
	group string
	topic string
}

// doctorSamples is how many times each group is sampled across a non-zero window.
const doctorSamples = 5

func newDoctorCmd(g *globals) *cobra.Command {
	var (
		scope  doctorScope
		window time.Duration
	)
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Diagnose common operational problems",
		Long: `Look at topics and consumer groups the way a Kafka operator would and report
each problem with the numbers behind it and how to fix it:

  offline_partitions, under_replicated       partitions without a leader or a full ISR
  mixed_builds                               brokers serving different API versions
  under_min_isr                              ISR below min.insync.replicas: acks=all refused
  replication_factor_one                     a single copy in a cluster of several brokers
  replicas_in_one_rack                       every copy of a partition in one rack
  min_isr_above_replication_factor           acks=all writes are always refused
  min_isr_equals_replication_factor          one lost replica refuses acks=all writes
  min_isr_one                                RF >= 3 but acks=all may mean just the leader
  unclean_leader_election                    out-of-sync replicas may become leader
  idle_consumers                             more members than partitions
  lag_skew                                   one partition holds most of the lag
  lag_growing                                lag grew throughout the sampling window
  group_rebalancing                          the group rebalanced during the window
  lso_stuck                                  an open transaction holds read_committed consumers
  lag_held_by_transaction                    the group's lag is records behind such a transaction

Groups are sampled ` + fmt.Sprint(doctorSamples) + ` times across --window (0 samples once and skips the
lag_growing and group_rebalancing checks). With --group only that group and the
topics it consumes are checked; with --topic only that topic and the groups that
consume it; with neither, everything. Exit code 0 means no problems were found,
3 that some were.`,
		Example: `  samsa doctor
  samsa doctor --group billing --window 30s
  samsa doctor --topic orders --window 0 -o json | jq -r '.findings[].code'`,
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if window < 0 {
				return usagef("--window must not be negative, not %s", window)
			}
			return runDoctor(cmd, g, scope, window)
		},
	}
	cmd.Flags().StringVarP(&scope.group, "group", "g", "", "check only this consumer group (and its topics)")
	cmd.Flags().StringVarP(&scope.topic, "topic", "t", "", "check only this topic (and the groups consuming it)")
	cmd.Flags().DurationVar(&window, "window", 10*time.Second, "how long to sample group lag and membership")
	return cmd
}

// doctorReport is the JSON result of `doctor`.
type doctorReport struct {
	WindowMs int64     `json:"window_ms"`
	Topics   int       `json:"topics_checked"`
	Groups   int       `json:"groups_checked"`
	Skipped  []string  `json:"skipped"`
	Findings []Finding `json:"findings"`
}

func runDoctor(cmd *cobra.Command, g *globals, scope doctorScope, window time.Duration) error {
	adm, done, err := g.newAdmin()
	if err != nil {
		return err
	}
	defer done()
	ctx, cancel := context.WithTimeout(cmd.Context(), window+g.timeout)
	defer cancel()
	c := &collector{g: g, adm: adm, scope: scope}
	snap, err := c.collect(ctx, window)
	if err != nil {
		return err
	}
	report := doctorReport{
		WindowMs: window.Milliseconds(), Topics: len(snap.Topics), Groups: len(snap.Groups),
		Skipped: append([]string{}, c.skipped...), Findings: Diagnose(snap),
	}
	if report.Findings == nil {
		report.Findings = []Finding{}
	}
	if err := g.newOutput(cmd).render(report, func(w io.Writer) { renderDoctorText(w, report) }); err != nil {
		return err
	}
	if len(report.Findings) > 0 {
		return ErrFindings
	}
	return nil
}

func renderDoctorText(w io.Writer, r doctorReport) {
	fmt.Fprintf(w, "checked %s and %s over a %s window\n",
		plural(r.Topics, "topic"), plural(r.Groups, "group"), time.Duration(r.WindowMs)*time.Millisecond)
	for _, s := range r.Skipped {
		fmt.Fprintf(w, "skipped: %s\n", s)
	}
	for _, f := range r.Findings {
		fmt.Fprintf(w, "\n[%s] %s: %s\n  %s\n", f.Severity, f.Code, f.About(), f.Message)
		if nums := f.NumbersText(); nums != "" {
			fmt.Fprintf(w, "  numbers: %s\n", nums)
		}
		fmt.Fprintf(w, "  fix: %s\n", f.Fix)
	}
	if len(r.Findings) == 0 {
		fmt.Fprintln(w, "no problems found")
	} else {
		fmt.Fprintf(w, "\n%s found\n", plural(len(r.Findings), "problem"))
	}
}

// collector gathers a Snapshot from the cluster.
type collector struct {
	g       *globals
	adm     *kadm.Client
	scope   doctorScope
	skipped []string
}

// skip records a check that could not run, once however often it is met.
func (c *collector) skip(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if !slices.Contains(c.skipped, msg) {
		c.skipped = append(c.skipped, msg)
	}
}

func (c *collector) collect(ctx context.Context, window time.Duration) (Snapshot, error) {
	// The window is for sampling: a cluster that does not answer at all is
	// reported after --timeout, as the other commands do.
	mdCtx, cancel := c.g.withTimeout(ctx)
	md, err := c.adm.Metadata(mdCtx)
	cancel()
	if err != nil {
		return Snapshot{}, c.g.explain("read metadata", err)
	}
	if c.scope.topic != "" && !md.Topics.Has(c.scope.topic) {
		return Snapshot{}, fmt.Errorf("topic %q does not exist; see `samsa topic list`", c.scope.topic)
	}
	groups, err := c.groupNames(ctx)
	if err != nil {
		return Snapshot{}, err
	}
	snap := Snapshot{Window: window}
	samples := 1
	if window > 0 {
		samples = doctorSamples
	}
	if len(groups) == 0 {
		snap.Window = 0
		samples = 1
	}
	var before map[partitionKey]int64
	if snap.Window > 0 { // the group samples span the window: compare across it
		before = c.lastStableOffsets(ctx, c.scopeTopics(md))
	}
	gs, err := c.sampleGroups(ctx, md, groups, samples, window)
	if err != nil {
		return Snapshot{}, err
	}
	snap.Groups = gs
	snap.Topics = c.topics(ctx, md, gs)
	snap.Brokers = c.brokers(ctx, md, c.scope.topic == "" && c.scope.group == "")
	names := make([]string, 0, len(snap.Topics))
	for _, t := range snap.Topics {
		names = append(names, t.Name)
	}
	snap.Unstable = c.unstable(ctx, names, before)
	return snap, nil
}

// groupNames returns the groups in scope.
func (c *collector) groupNames(ctx context.Context) ([]string, error) {
	if c.scope.group != "" {
		return []string{c.scope.group}, nil
	}
	listed, err := c.adm.ListGroups(ctx)
	if err != nil && len(listed) == 0 {
		c.skip("consumer group checks: cannot list groups: %v", err)
		return nil, nil
	}
	var names []string
	for _, l := range listed.Sorted() {
		if l.ProtocolType == "consumer" || l.ProtocolType == "" {
			names = append(names, l.Group)
		}
	}
	return names, nil
}

// sampleGroups samples every group `samples` times spread over window.
func (c *collector) sampleGroups(ctx context.Context, md kadm.Metadata, names []string, samples int, window time.Duration) ([]GroupSnapshot, error) {
	if len(names) == 0 {
		return nil, nil
	}
	byName := make(map[string]*GroupSnapshot, len(names))
	for i := range samples {
		if i > 0 {
			if err := sleepCtx(ctx, window/time.Duration(samples-1)); err != nil {
				return nil, c.g.explain("sample groups", err)
			}
		}
		if err := c.sampleOnce(ctx, md, names, byName); err != nil {
			return nil, err
		}
	}
	var out []GroupSnapshot
	for _, name := range names {
		gs, ok := byName[name]
		if !ok || !c.inTopicScope(gs) {
			continue
		}
		out = append(out, *gs)
	}
	return out, nil
}

func (c *collector) inTopicScope(gs *GroupSnapshot) bool {
	if c.scope.topic == "" {
		return true
	}
	_, ok := gs.TopicPartitions[c.scope.topic]
	return ok
}

// sampleOnce describes the groups, fetches their commits and the end offsets, and
// appends one sample to each group's snapshot.
func (c *collector) sampleOnce(ctx context.Context, md kadm.Metadata, names []string, byName map[string]*GroupSnapshot) error {
	described, err := c.adm.DescribeGroups(ctx, names...)
	if err != nil && len(described) == 0 {
		return c.g.explain("describe groups", err)
	}
	commits := c.adm.FetchManyOffsets(ctx, names...)
	states := map[string]groupState{}
	topicSet := map[string]bool{}
	for _, name := range names {
		d, ok := described[name]
		notFound := errors.Is(d.Err, kerr.GroupIDNotFound) ||
			(d.Err == nil && d.State == "Dead" && len(d.Members) == 0 && len(commits[name].Fetched) == 0)
		switch {
		case c.scope.group != "" && notFound:
			return groupNotFound(name)
		case c.scope.group != "" && d.Err != nil:
			return c.g.explain(fmt.Sprintf("describe group %q", name), d.Err)
		case !ok:
			c.skip("group %q: missing from the DescribeGroups answer", name)
			continue
		case d.Err != nil:
			c.skip("group %q: cannot describe it: %v", name, d.Err)
			continue
		}
		st := groupState{described: d, commits: commits[name].Fetched}
		states[name] = st
		for _, t := range consumedTopics(st) {
			topicSet[t] = true
		}
	}
	var ends kadm.ListedOffsets
	if len(topicSet) > 0 {
		ends, _ = c.adm.ListEndOffsets(ctx, sortedKeys(topicSet)...)
	}
	for _, name := range names {
		st, ok := states[name]
		if !ok {
			continue
		}
		gs := byName[name]
		if gs == nil {
			gs = &GroupSnapshot{Name: name, TopicPartitions: map[string]int{}}
			byName[name] = gs
		}
		for _, t := range consumedTopics(st) {
			if td, ok := md.Topics[t]; ok && (c.scope.topic == "" || t == c.scope.topic) {
				gs.TopicPartitions[t] = len(td.Partitions)
			}
		}
		gs.Samples = append(gs.Samples, c.groupSample(st, ends))
	}
	return nil
}

// consumedTopics is every topic a group subscribes to, is assigned or has committed to.
func consumedTopics(st groupState) []string {
	set := map[string]bool{}
	for _, t := range groupTopics(st) {
		set[t] = true
	}
	for _, m := range st.described.Members {
		if meta, ok := m.Join.AsConsumer(); ok {
			for _, t := range meta.Topics {
				set[t] = true
			}
		}
	}
	return sortedKeys(set)
}

func (c *collector) groupSample(st groupState, ends kadm.ListedOffsets) GroupSample {
	s := GroupSample{State: st.described.State, Lag: map[string]map[int32]int64{}}
	for _, m := range st.described.Members {
		ms := MemberSnapshot{ID: m.MemberID, ClientID: m.ClientID, Host: m.ClientHost}
		if a, ok := m.Assigned.AsConsumer(); ok {
			for _, t := range a.Topics {
				ms.Assigned += len(t.Partitions)
			}
		}
		s.Members = append(s.Members, ms)
	}
	for t, parts := range st.commits {
		if c.scope.topic != "" && t != c.scope.topic {
			continue
		}
		for p, off := range parts {
			end := listedOffset(ends, t, p)
			if off.Err != nil || off.At < 0 || end == nil {
				continue
			}
			if s.Lag[t] == nil {
				s.Lag[t] = map[int32]int64{}
			}
			s.Lag[t][p] = max(0, *end-off.At)
		}
	}
	return s
}

// topics snapshots the topics in scope: --topic, else the topics of the groups when
// --group was given, else every non-internal topic.
func (c *collector) topics(ctx context.Context, md kadm.Metadata, groups []GroupSnapshot) []TopicSnapshot {
	var names []string
	switch {
	case c.scope.topic != "":
		names = []string{c.scope.topic}
	case c.scope.group != "":
		for _, gs := range groups {
			names = append(names, sortedKeys(gs.TopicPartitions)...)
		}
	default:
		for _, d := range md.Topics.Sorted() {
			if !d.IsInternal && d.Err == nil {
				names = append(names, d.Topic)
			}
		}
	}
	sort.Strings(names)
	names = slices.Compact(names)
	configs := c.topicConfigs(ctx, names)
	var out []TopicSnapshot
	for _, name := range names {
		d, ok := md.Topics[name]
		if !ok || d.IsInternal {
			continue
		}
		ts := TopicSnapshot{Name: name, Configs: configs[name]}
		for _, p := range d.Partitions.Sorted() {
			ts.Partitions = append(ts.Partitions, PartitionSnapshot{ID: p.Partition, Leader: p.Leader, Replicas: p.Replicas, ISR: p.ISR})
		}
		out = append(out, ts)
	}
	return out
}

// topicConfigs reads the effective configs of the topics; failures skip config checks.
func (c *collector) topicConfigs(ctx context.Context, names []string) map[string]map[string]string {
	out := map[string]map[string]string{}
	if len(names) == 0 {
		return out
	}
	rcs, err := c.adm.DescribeTopicConfigs(ctx, names...)
	if err != nil && len(rcs) == 0 {
		c.skip("topic config checks: cannot describe configs: %v", err)
		return out
	}
	for _, rc := range rcs {
		if rc.Err != nil {
			c.skip("topic config checks for %q: %v", rc.Name, rc.Err)
			continue
		}
		m := map[string]string{}
		for _, cfg := range rc.Configs {
			m[cfg.Key] = cfg.MaybeValue()
		}
		out[rc.Name] = m
	}
	return out
}

// sleepCtx waits for d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// plural renders "1 topic" or "3 topics".
func plural(n int, noun string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, noun)
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
