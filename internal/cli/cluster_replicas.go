package cli

// The commands that move leaderships and replicas: `cluster elect-leaders` (Kafka's
// kafka-leader-election), `cluster reassign` and `cluster reassignments` (Kafka's
// kafka-reassign-partitions --execute/--cancel and --verify, with an explicit
// assignment only: there is no --generate).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// electedPartition is one partition's outcome in `cluster elect-leaders`.
type electedPartition struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	// Result is elected, not_needed (the preferred replica already leads) or failed.
	Result string `json:"result"`
	Leader int32  `json:"leader"` // after the election, -1 when unknown
	Error  string `json:"error,omitempty"`
}

// electionResult is the JSON result of `cluster elect-leaders`.
type electionResult struct {
	Election   string             `json:"election"` // preferred or unclean
	Partitions []electedPartition `json:"partitions"`
}

func newClusterElectLeadersCmd(g *globals) *cobra.Command {
	var (
		all        bool
		topic      string
		partitions []int32
		unclean    bool
	)
	cmd := &cobra.Command{
		Use:   "elect-leaders (--all | --topic NAME [--partition N...])",
		Short: "Move leaderships back to the preferred replicas (or elect uncleanly)",
		Long: `Run a preferred leader election: each partition named is led by its preferred
replica (the first of its replica list) again, if that replica is alive and in sync.
After a broker restarts it leads nothing until then (or until
auto.leader.rebalance.enable does it, every leader.imbalance.check.interval.seconds).

--unclean elects any live replica of a partition that has no leader, even one out of
the ISR: the records only the lost leader had are gone. Use it only when the
in-sync replicas cannot come back.`,
		Example: `  samsa cluster elect-leaders --all
  samsa cluster elect-leaders --topic orders --partition 0 --partition 3
  samsa cluster elect-leaders --topic orders --unclean`,
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if all == (topic != "") {
				return usagef("give either --all or --topic")
			}
			if all && len(partitions) > 0 {
				return usagef("--partition needs --topic")
			}
			return runElectLeaders(cmd, g, topic, partitions, unclean)
		},
	}
	cmd.Flags().BoolVar(&all, "all", false, "every partition of every topic")
	cmd.Flags().StringVarP(&topic, "topic", "t", "", "the topic whose partitions to elect")
	cmd.Flags().Int32SliceVarP(&partitions, "partition", "p", nil, "only these partitions of --topic (repeatable)")
	cmd.Flags().BoolVar(&unclean, "unclean", false, "unclean election: any live replica, losing what only the old leader had")
	return cmd
}

func runElectLeaders(cmd *cobra.Command, g *globals, topic string, partitions []int32, unclean bool) error {
	adm, ctx, done, err := g.admin(cmd.Context())
	if err != nil {
		return err
	}
	defer done()
	how, name := kadm.ElectPreferredReplica, "preferred"
	if unclean {
		how, name = kadm.ElectLiveReplica, "unclean"
	}
	var set kadm.TopicsSet
	if topic != "" {
		d, err := topicExists(ctx, g, adm, topic)
		if err != nil {
			return err
		}
		if len(partitions) == 0 {
			partitions = d.Partitions.Numbers()
		}
		for _, p := range partitions {
			if err := hasPartition(d, p); err != nil {
				return err
			}
		}
		set.Add(topic, partitions...)
	}
	results, err := adm.ElectLeaders(ctx, how, set)
	if err != nil {
		return g.explain(name+" leader election", err)
	}
	md, _ := adm.Metadata(ctx, electResults(results).topics()...)
	res := electionResult{Election: name, Partitions: []electedPartition{}}
	var failed []string
	for _, r := range electResults(results).sorted() {
		ep := electedPartition{Topic: r.Topic, Partition: r.Partition, Result: "elected", Leader: -1}
		if p, ok := md.Topics[r.Topic].Partitions[r.Partition]; ok {
			ep.Leader = p.Leader
		}
		switch {
		case errors.Is(r.Err, kerr.ElectionNotNeeded):
			ep.Result = "not_needed"
		case r.Err != nil:
			ep.Result, ep.Error = "failed", electionError(r.Err, r.ErrMessage)
			failed = append(failed, fmt.Sprintf("%s-%d", r.Topic, r.Partition))
		}
		res.Partitions = append(res.Partitions, ep)
	}
	err = g.newOutput(cmd).render(res, func(w io.Writer) { renderElection(w, res) })
	if err != nil {
		return err
	}
	if len(failed) > 0 {
		return fmt.Errorf("%s leader election failed for %s (why: above)", name, strings.Join(failed, ", "))
	}
	return nil
}

// electionError says why a partition's election failed and what to do.
func electionError(err error, msg string) string {
	s := errorText(err, msg)
	switch {
	case errors.Is(err, kerr.PreferredLeaderNotAvailable):
		s += " (its preferred replica is down or out of the ISR; see `samsa topic describe`)"
	case errors.Is(err, kerr.EligibleLeadersNotAvailable):
		s += " (no replica is alive; bring back a broker that holds one)"
	}
	return s
}

// errorText is a Kafka error in the broker's words when it gave some (the code's
// name and the broker's message), else the code's name and description.
func errorText(err error, msg string) string {
	return withBrokerMessage(err, msg).Error()
}

func renderElection(w io.Writer, res electionResult) {
	if len(res.Partitions) == 0 {
		fmt.Fprintf(w, "no partition needed a %s leader election\n", res.Election)
		return
	}
	t := newTable(w, "TOPIC", "PARTITION", "LEADER", "RESULT")
	for _, p := range res.Partitions {
		leader := fmt.Sprint(p.Leader)
		if p.Leader < 0 {
			leader = "none"
		}
		result := map[string]string{"elected": "elected", "not_needed": "not needed: the preferred replica leads"}[p.Result]
		if p.Result == "failed" {
			result = "failed: " + p.Error
		}
		t.row(p.Topic, p.Partition, leader, result)
	}
	t.flush()
}

type electResults kadm.ElectLeadersResults

func (rs electResults) sorted() []kadm.ElectLeadersResult {
	var out []kadm.ElectLeadersResult
	for _, ps := range rs {
		for _, r := range ps {
			out = append(out, r)
		}
	}
	slices.SortFunc(out, func(a, b kadm.ElectLeadersResult) int {
		if c := strings.Compare(a.Topic, b.Topic); c != 0 {
			return c
		}
		return int(a.Partition - b.Partition)
	})
	return out
}

func (rs electResults) topics() []string {
	var out []string
	for t := range rs {
		out = append(out, t)
	}
	slices.Sort(out)
	return out
}

// reassignment is one partition's new replica list, as in Kafka's reassignment JSON.
type reassignment struct {
	Topic     string  `json:"topic"`
	Partition int32   `json:"partition"`
	Replicas  []int32 `json:"replicas"`
}

// reassignmentPlan is Kafka's kafka-reassign-partitions JSON file: {"version":1,
// "partitions":[{"topic":"t","partition":0,"replicas":[1,2,3]}]}. log_dirs, if
// present, must be "any" (moves between log directories are not supported).
type reassignmentPlan struct {
	Version    int `json:"version"`
	Partitions []struct {
		reassignment
		LogDirs []string `json:"log_dirs"`
	} `json:"partitions"`
}

// parseReassignmentPlan reads a reassignment plan and checks it: every partition
// named once, replica lists non-empty without duplicates (with cancel, replicas are
// not needed and ignored).
func parseReassignmentPlan(data []byte, cancel bool) ([]reassignment, error) {
	var plan reassignmentPlan
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&plan); err != nil {
		return nil, usagef("the reassignment plan is not Kafka's reassignment JSON "+
			`({"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,2,3]}]}): %v`, err)
	}
	if plan.Version != 1 {
		return nil, usagef("reassignment plan version %d: only version 1 exists", plan.Version)
	}
	if len(plan.Partitions) == 0 {
		return nil, usagef("the reassignment plan names no partition")
	}
	var out []reassignment
	seen := map[string]bool{}
	for _, p := range plan.Partitions {
		for _, d := range p.LogDirs {
			if d != "any" {
				return nil, usagef("%s-%d: log_dirs %q: moving replicas between log directories is not supported; use \"any\"", p.Topic, p.Partition, d)
			}
		}
		r := p.reassignment
		if cancel {
			r.Replicas = nil
		}
		if err := checkReassignment(r, cancel); err != nil {
			return nil, err
		}
		key := fmt.Sprintf("%s-%d", r.Topic, r.Partition)
		if seen[key] {
			return nil, usagef("the reassignment plan names %s twice", key)
		}
		seen[key] = true
		out = append(out, r)
	}
	return out, nil
}

func checkReassignment(r reassignment, cancel bool) error {
	switch {
	case r.Topic == "":
		return usagef("a reassignment without a topic")
	case r.Partition < 0:
		return usagef("%s: partition %d", r.Topic, r.Partition)
	case cancel:
		return nil
	case len(r.Replicas) == 0:
		return usagef("%s-%d: no replicas given", r.Topic, r.Partition)
	}
	seen := map[int32]bool{}
	for _, id := range r.Replicas {
		if id < 0 || seen[id] {
			return usagef("%s-%d: replicas %v must be distinct broker ids", r.Topic, r.Partition, r.Replicas)
		}
		seen[id] = true
	}
	return nil
}

func newClusterReassignCmd(g *globals) *cobra.Command {
	var (
		topic      string
		partitions []int32
		replicas   []int32
		planFile   string
		wait       bool
		cancel     bool
	)
	cmd := &cobra.Command{
		Use:   "reassign (--topic NAME --partition N... --replicas IDS | --plan FILE) [--wait]",
		Short: "Move partitions to other brokers (or change their replication factor)",
		Long: `Give partitions a new replica list. The new replicas copy the partition's log
from its leader while it keeps serving; once all of them are in the ISR the replicas
that are not in the new list are dropped (and their logs deleted), and a leader that
is not in it hands over. The first replica of the list is the preferred leader.

The assignment is explicit: --topic with --partition and --replicas (the same list
for every partition named), or --plan with Kafka's reassignment JSON (as
kafka-reassign-partitions takes it; "-" reads it from stdin). --wait shows the
copy's progress until every move completed; without it, follow it with
` + "`samsa cluster reassignments`" + `. --cancel stops the named moves: the partitions keep their
old replicas.`,
		Example: `  samsa cluster reassign --topic orders --partition 0 --replicas 2,3,4 --wait
  samsa cluster reassign --plan moves.json
  samsa cluster reassign --cancel --topic orders --partition 0`,
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			moves, err := reassignArgs(cmd, topic, partitions, replicas, planFile, cancel)
			if err != nil {
				return err
			}
			return runReassign(cmd, g, moves, cancel, wait)
		},
	}
	cmd.Flags().StringVarP(&topic, "topic", "t", "", "the topic of the partitions to move")
	cmd.Flags().Int32SliceVarP(&partitions, "partition", "p", nil, "partitions of --topic to move (repeatable)")
	cmd.Flags().Int32SliceVar(&replicas, "replicas", nil, "the new replica list, preferred leader first: broker ids like 2,3,4")
	cmd.Flags().StringVar(&planFile, "plan", "", `Kafka's reassignment JSON file ("-": stdin)`)
	cmd.Flags().BoolVar(&wait, "wait", false, "show progress until the moves complete")
	cmd.Flags().BoolVar(&cancel, "cancel", false, "cancel the moves of the named partitions")
	return cmd
}

// reassignArgs turns the flags into the list of moves.
func reassignArgs(cmd *cobra.Command, topic string, partitions, replicas []int32, planFile string, cancel bool) ([]reassignment, error) {
	if planFile != "" {
		if topic != "" || len(partitions) > 0 || len(replicas) > 0 {
			return nil, usagef("give either --plan or --topic/--partition/--replicas")
		}
		var data []byte
		var err error
		if planFile == "-" {
			data, err = io.ReadAll(cmd.InOrStdin())
		} else {
			data, err = os.ReadFile(planFile)
		}
		if err != nil {
			return nil, usagef("read the reassignment plan: %v", err)
		}
		return parseReassignmentPlan(data, cancel)
	}
	switch {
	case topic == "" || len(partitions) == 0:
		return nil, usagef("give --topic and --partition (or --plan)")
	case cancel && len(replicas) > 0:
		return nil, usagef("--cancel takes no --replicas")
	case !cancel && len(replicas) == 0:
		return nil, usagef("give --replicas, the new replica list")
	}
	var out []reassignment
	for _, p := range partitions {
		r := reassignment{Topic: topic, Partition: p, Replicas: replicas}
		if err := checkReassignment(r, cancel); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

// reassignStarted is one partition's outcome in `cluster reassign`.
type reassignStarted struct {
	Topic     string  `json:"topic"`
	Partition int32   `json:"partition"`
	From      []int32 `json:"from"`
	To        []int32 `json:"to"` // null for a cancel
	Error     string  `json:"error,omitempty"`
}

func runReassign(cmd *cobra.Command, g *globals, moves []reassignment, cancel, wait bool) error {
	cl, adm, ctx, done, err := g.adminClient(cmd.Context())
	if err != nil {
		return err
	}
	defer done()
	var topics []string
	for _, m := range moves {
		topics = append(topics, m.Topic)
	}
	md, err := adm.Metadata(ctx, topics...)
	if err != nil {
		return g.explain("read metadata", err)
	}
	var req kadm.AlterPartitionAssignmentsReq
	for _, m := range moves {
		if cancel {
			req.CancelAssign(m.Topic, m.Partition)
		} else {
			req.Assign(m.Topic, m.Partition, m.Replicas)
		}
	}
	resps, err := adm.AlterPartitionAssignments(ctx, req)
	if err != nil {
		return g.explain("reassign partitions", err)
	}
	var (
		started []reassignStarted
		failed  []string
	)
	for _, m := range moves {
		s := reassignStarted{Topic: m.Topic, Partition: m.Partition, From: []int32{}, To: m.Replicas}
		if p, ok := md.Topics[m.Topic].Partitions[m.Partition]; ok {
			s.From = nonNil(p.Replicas)
		}
		r, ok := resps[m.Topic][m.Partition]
		switch {
		case !ok:
			s.Error = "missing from the broker's answer"
		case r.Err != nil:
			s.Error = reassignError(r.Err, r.ErrMessage)
		}
		if s.Error != "" {
			failed = append(failed, fmt.Sprintf("%s-%d", m.Topic, m.Partition))
		}
		started = append(started, s)
	}
	o := g.newOutput(cmd)
	err = o.render(struct {
		Cancel     bool              `json:"cancel"`
		Partitions []reassignStarted `json:"partitions"`
	}{cancel, started}, func(w io.Writer) {
		for _, s := range started {
			switch {
			case s.Error != "":
				fmt.Fprintf(w, "%s-%d: not moved: %s\n", s.Topic, s.Partition, s.Error)
			case cancel:
				fmt.Fprintf(w, "%s-%d: move cancelled; it stays on %s\n", s.Topic, s.Partition, int32List(s.From))
			default:
				fmt.Fprintf(w, "%s-%d: moving from %s to %s\n", s.Topic, s.Partition, int32List(s.From), int32List(s.To))
			}
		}
	})
	if err != nil {
		return err
	}
	if len(failed) > 0 {
		return fmt.Errorf("reassignment refused for %s (why: above)", strings.Join(failed, ", "))
	}
	if wait && !cancel {
		return waitReassignments(cmd, g, cl, adm, o, moves)
	}
	return nil
}

// reassignError says why the controller refused a move and what to do.
func reassignError(err error, msg string) string {
	s := errorText(err, msg)
	switch {
	case errors.Is(err, kerr.InvalidReplicaAssignment), errors.Is(err, kerr.InvalidReplicationFactor):
		s += " (every replica must be a registered broker, each named once; see `samsa cluster info`)"
	case errors.Is(err, kerr.NoReassignmentInProgress):
		s += " (nothing to cancel)"
	}
	return s
}

// reassignmentStatus is one partition's move as the cluster reports it.
type reassignmentStatus struct {
	Topic     string  `json:"topic"`
	Partition int32   `json:"partition"`
	Replicas  []int32 `json:"replicas"` // old and new while it moves
	Adding    []int32 `json:"adding_replicas"`
	Removing  []int32 `json:"removing_replicas"`
	Leader    int32   `json:"leader"`
	ISR       []int32 `json:"isr"`
	// Copies are the adding replicas' progress: their log size against the leader's
	// (from DescribeLogDirs; null when the broker does not say).
	Copies []replicaCopy `json:"copies"`
}

type replicaCopy struct {
	Broker          int32  `json:"broker"`
	InSync          bool   `json:"in_sync"`
	SizeBytes       *int64 `json:"size_bytes"`
	LeaderSizeBytes *int64 `json:"leader_size_bytes"`
}

// progress renders a move's state in one line.
func (s reassignmentStatus) progress() string {
	var parts []string
	for _, c := range s.Copies {
		part := fmt.Sprintf("replica %d ", c.Broker)
		switch {
		case c.InSync:
			part += "in sync"
		case c.SizeBytes != nil && c.LeaderSizeBytes != nil:
			part += fmt.Sprintf("copied %s of %s", humanBytes(*c.SizeBytes), humanBytes(*c.LeaderSizeBytes))
		default:
			part += "copying"
		}
		parts = append(parts, part)
	}
	return fmt.Sprintf("%s-%d: adding %s, removing %s; %s", s.Topic, s.Partition, orNone(s.Adding), orNone(s.Removing), strings.Join(parts, ", "))
}

func orNone(ids []int32) string {
	if len(ids) == 0 {
		return "none"
	}
	return int32List(ids)
}

// listReassignments returns the moves in progress (of the given topics, all when
// none are given), sorted, with their ISR and copy progress.
func listReassignments(ctx context.Context, cl *kgo.Client, adm *kadm.Client, topics ...string) ([]reassignmentStatus, error) {
	req := kmsg.NewPtrListPartitionReassignmentsRequest()
	req.TimeoutMillis = int32(time.Until(deadlineOr(ctx, 10*time.Second)).Milliseconds())
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, err
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return nil, err
	}
	var out []reassignmentStatus
	var set kadm.TopicsSet
	for _, t := range resp.Topics {
		if len(topics) > 0 && !slices.Contains(topics, t.Topic) {
			continue
		}
		for _, p := range t.Partitions {
			out = append(out, reassignmentStatus{Topic: t.Topic, Partition: p.Partition, Replicas: nonNil(p.Replicas),
				Adding: nonNil(p.AddingReplicas), Removing: nonNil(p.RemovingReplicas), Leader: -1, ISR: []int32{}, Copies: []replicaCopy{}})
			set.Add(t.Topic, p.Partition)
		}
	}
	slices.SortFunc(out, func(a, b reassignmentStatus) int {
		if c := strings.Compare(a.Topic, b.Topic); c != 0 {
			return c
		}
		return int(a.Partition - b.Partition)
	})
	if len(out) == 0 {
		return out, nil
	}
	md, err := adm.Metadata(ctx, set.Topics()...)
	if err != nil {
		return nil, err
	}
	dirs, _ := adm.DescribeAllLogDirs(ctx, set)
	for i := range out {
		s := &out[i]
		if p, ok := md.Topics[s.Topic].Partitions[s.Partition]; ok {
			s.Leader, s.ISR = p.Leader, nonNil(p.ISR)
		}
		sizes := replicaSizes(dirs, s.Topic, s.Partition)
		for _, id := range s.Adding {
			c := replicaCopy{Broker: id, InSync: slices.Contains(s.ISR, id)}
			if size, ok := sizes[id]; ok {
				c.SizeBytes = ptr(size)
			}
			if size, ok := sizes[s.Leader]; ok {
				c.LeaderSizeBytes = ptr(size)
			}
			s.Copies = append(s.Copies, c)
		}
	}
	return out, nil
}

// replicaSizes returns a partition's log size on each broker that reported it.
func replicaSizes(dirs kadm.DescribedAllLogDirs, topic string, partition int32) map[int32]int64 {
	out := map[int32]int64{}
	dirs.Each(func(d kadm.DescribedLogDir) {
		if d.Err != nil {
			return
		}
		d.Topics.Each(func(p kadm.DescribedLogDirPartition) {
			if p.Topic == topic && p.Partition == partition && !p.IsFuture {
				out[p.Broker] = p.Size
			}
		})
	})
	return out
}

func deadlineOr(ctx context.Context, d time.Duration) time.Time {
	if dl, ok := ctx.Deadline(); ok {
		return dl
	}
	return time.Now().Add(d)
}

// reassignPollInterval is how often --wait looks at the moves.
const reassignPollInterval = time.Second

// waitReassignments prints each move's progress when it changes until none of them
// is in progress, then where each partition ended up.
func waitReassignments(cmd *cobra.Command, g *globals, cl *kgo.Client, adm *kadm.Client, o *output, moves []reassignment) error {
	var topics []string
	for _, m := range moves {
		if !slices.Contains(topics, m.Topic) {
			topics = append(topics, m.Topic)
		}
	}
	last := map[string]string{}
	for {
		ctx, cancel := g.withTimeout(cmd.Context())
		list, err := listReassignments(ctx, cl, adm, topics...)
		cancel()
		if err != nil {
			return g.explain("list reassignments", err)
		}
		pending := 0
		for _, s := range list {
			if !movesInclude(moves, s.Topic, s.Partition) {
				continue
			}
			pending++
			line := s.progress()
			if key := fmt.Sprintf("%s-%d", s.Topic, s.Partition); last[key] != line {
				last[key] = line
				if err := o.line(s, line+"\n"); err != nil {
					return err
				}
			}
		}
		if pending == 0 {
			break
		}
		if err := sleepCtx(cmd.Context(), reassignPollInterval); err != nil {
			return fmt.Errorf("stopped waiting; the moves go on (see `samsa cluster reassignments`): %w", err)
		}
	}
	// The controller has finished the moves; the broker answering Metadata may not
	// have applied that yet (a move that only drops replicas finishes at once), so
	// read it until it shows them, for at most --timeout.
	ctx, cancel := g.withTimeout(cmd.Context())
	defer cancel()
	var md kadm.Metadata
	for {
		var err error
		if md, err = adm.Metadata(ctx, topics...); err != nil {
			return g.explain("read metadata", err)
		}
		if movesShown(md, moves) || sleepCtx(ctx, metadataPollInterval) != nil {
			break
		}
	}
	var wrong []error
	for _, m := range moves {
		p := md.Topics[m.Topic].Partitions[m.Partition]
		done := struct {
			Topic     string  `json:"topic"`
			Partition int32   `json:"partition"`
			Done      bool    `json:"done"`
			Replicas  []int32 `json:"replicas"`
			ISR       []int32 `json:"isr"`
			Leader    int32   `json:"leader"`
		}{m.Topic, m.Partition, true, nonNil(p.Replicas), nonNil(p.ISR), p.Leader}
		line := fmt.Sprintf("%s-%d: done, on %s (ISR %s, leader %d)\n", m.Topic, m.Partition, int32List(p.Replicas), int32List(p.ISR), p.Leader)
		if !sameSet(p.Replicas, m.Replicas) {
			line = fmt.Sprintf("%s-%d: no longer moving, but on %s, not %s (cancelled?)\n", m.Topic, m.Partition, int32List(p.Replicas), int32List(m.Replicas))
			wrong = append(wrong, fmt.Errorf("%s-%d is on %s, not %s", m.Topic, m.Partition, int32List(p.Replicas), int32List(m.Replicas)))
			done.Done = false
		}
		if err := o.line(done, line); err != nil {
			return err
		}
	}
	return errors.Join(wrong...)
}

// metadataPollInterval is how often waitReassignments reads the metadata again
// while it does not show the finished moves yet.
const metadataPollInterval = 100 * time.Millisecond

// movesShown reports whether md has every partition of moves on its new replicas.
func movesShown(md kadm.Metadata, moves []reassignment) bool {
	for _, m := range moves {
		if !sameSet(md.Topics[m.Topic].Partitions[m.Partition].Replicas, m.Replicas) {
			return false
		}
	}
	return true
}

func movesInclude(moves []reassignment, topic string, partition int32) bool {
	for _, m := range moves {
		if m.Topic == topic && m.Partition == partition {
			return true
		}
	}
	return false
}

func sameSet(a, b []int32) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

func newClusterReassignmentsCmd(g *globals) *cobra.Command {
	var topic string
	cmd := &cobra.Command{
		Use:   "reassignments",
		Short: "List the partition moves in progress and how far their copies are",
		Long: `List the partitions being moved (` + "`samsa cluster reassign`" + `): their replicas, the ones
being added and removed, and for each new replica whether it is in the ISR yet or how
much of the leader's log it has copied.`,
		Example: `  samsa cluster reassignments
  samsa cluster reassignments --topic orders -o json`,
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			cl, adm, ctx, done, err := g.adminClient(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			var topics []string
			if topic != "" {
				topics = []string{topic}
			}
			list, err := listReassignments(ctx, cl, adm, topics...)
			if err != nil {
				return g.explain("list reassignments", err)
			}
			if list == nil {
				list = []reassignmentStatus{}
			}
			return g.newOutput(cmd).render(struct {
				Reassignments []reassignmentStatus `json:"reassignments"`
			}{list}, func(w io.Writer) {
				if len(list) == 0 {
					fmt.Fprintln(w, "no partition is being moved")
					return
				}
				for _, s := range list {
					fmt.Fprintln(w, s.progress())
				}
			})
		},
	}
	cmd.Flags().StringVarP(&topic, "topic", "t", "", "only this topic's moves")
	return cmd
}
