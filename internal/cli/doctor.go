package cli

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"time"
)

// Snapshot is everything doctor's analysis looks at, collected from the cluster.
// Diagnose reads nothing else, so it is tested with hand-made snapshots.
type Snapshot struct {
	Window  time.Duration    // how long the group samples span
	Brokers []BrokerSnapshot // the live brokers
	Topics  []TopicSnapshot  // topics to check (internal topics excluded)
	Groups  []GroupSnapshot  // consumer groups to check
	// Unstable are the partitions of Topics whose last stable offset trails the high
	// watermark (doctor_txn.go).
	Unstable []UnstablePartition
}

// BrokerSnapshot is one live broker; Rack is "" when it has none (broker.rack).
type BrokerSnapshot struct {
	ID      int32
	Rack    string
	Configs map[string]string // for the security checks; nil when not read or unreadable
	// OfflineLogDirs are its log directories that answer KAFKA_STORAGE_ERROR
	// (DescribeLogDirs): their disk failed.
	OfflineLogDirs []string
	// APIVersions are the highest versions it serves by API key (ApiVersions); nil
	// when not read.
	APIVersions map[int16]int16
}

// TopicSnapshot is one topic's partitions and effective configs.
type TopicSnapshot struct {
	Name       string
	Partitions []PartitionSnapshot
	Configs    map[string]string // effective values; nil when they could not be read
}

// PartitionSnapshot is one partition's replica state. Leader is -1 when offline.
type PartitionSnapshot struct {
	ID       int32
	Leader   int32
	Replicas []int32
	ISR      []int32
}

// GroupSnapshot is one consumer group sampled over the window.
type GroupSnapshot struct {
	Name            string
	TopicPartitions map[string]int // partition count of every topic the group consumes
	Samples         []GroupSample  // in time order; the first at the start of the window
}

// GroupSample is the group as seen at one instant.
type GroupSample struct {
	State   string
	Members []MemberSnapshot
	Lag     map[string]map[int32]int64 // lag of every partition with a committed offset
}

// MemberSnapshot is one group member.
type MemberSnapshot struct {
	ID       string
	ClientID string
	Host     string
	Assigned int // partitions assigned to it
}

// Finding is one problem doctor found. Code is stable and documented in docs/cli.md;
// Numbers holds the figures behind the finding under stable names.
type Finding struct {
	Code       string           `json:"code"`
	Severity   string           `json:"severity"`
	Topic      string           `json:"topic,omitempty"`
	Group      string           `json:"group,omitempty"`
	Partitions []int32          `json:"partitions,omitempty"`
	Message    string           `json:"message"`
	Numbers    map[string]int64 `json:"numbers"`
	Fix        string           `json:"fix"`
}

// Finding codes.
const (
	CodeOfflinePartitions     = "offline_partitions"
	CodeUnderReplicated       = "under_replicated"
	CodeUnderMinISR           = "under_min_isr"
	CodeReplicationFactorOne  = "replication_factor_one"
	CodeReplicasInOneRack     = "replicas_in_one_rack"
	CodeMinISRAboveRF         = "min_isr_above_replication_factor"
	CodeMinISREqualsRF        = "min_isr_equals_replication_factor"
	CodeMinISROne             = "min_isr_one"
	CodeUncleanLeaderElection = "unclean_leader_election"
	CodeIdleConsumers         = "idle_consumers"
	CodeLagSkew               = "lag_skew"
	CodeLagGrowing            = "lag_growing"
	CodeGroupRebalancing      = "group_rebalancing"
	CodeOfflineLogDir         = "offline_log_dir"
)

const (
	severityError   = "error"
	severityWarning = "warning"

	// minSkewLag is the total lag below which skew is not worth reporting.
	minSkewLag = 100
)

// Diagnose returns every problem in s, sorted by group, topic and code. It is pure.
func Diagnose(s Snapshot) []Finding {
	var out []Finding
	for _, t := range s.Topics {
		out = append(out, diagnoseTopic(t)...)
		out = append(out, diagnosePlacement(t, s.Brokers)...)
	}
	out = append(out, diagnoseUnstable(s)...)
	for _, g := range s.Groups {
		out = append(out, diagnoseGroup(g, s.Window)...)
		out = append(out, lagHeldByTransaction(g, s.Unstable)...)
	}
	for _, b := range s.Brokers {
		out = append(out, diagnoseLogDirs(b)...)
		out = append(out, diagnoseBroker(b)...)
	}
	out = append(out, diagnoseBuilds(s.Brokers)...)
	slices.SortStableFunc(out, func(a, b Finding) int {
		return cmp.Or(cmp.Compare(a.Group, b.Group), cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Code, b.Code))
	})
	return out
}

func diagnoseTopic(t TopicSnapshot) []Finding {
	var out []Finding
	var offline, under []int32
	for _, p := range t.Partitions {
		switch {
		case p.Leader < 0:
			offline = append(offline, p.ID)
		case len(p.ISR) < len(p.Replicas):
			under = append(under, p.ID)
		}
	}
	total := int64(len(t.Partitions))
	if len(offline) > 0 {
		out = append(out, Finding{
			Code: CodeOfflinePartitions, Severity: severityError, Topic: t.Name, Partitions: offline,
			Message: fmt.Sprintf("%d of %d partitions have no leader: they can be neither written nor read", len(offline), total),
			Numbers: map[string]int64{"offline_partitions": int64(len(offline)), "partitions": total},
			Fix:     "bring back the brokers that hold these replicas (see `samsa topic describe " + t.Name + "`); if none can come back, only an unclean leader election recovers them, losing data",
		})
	}
	if len(under) > 0 {
		out = append(out, Finding{
			Code: CodeUnderReplicated, Severity: severityWarning, Topic: t.Name, Partitions: under,
			Message: fmt.Sprintf("%d of %d partitions have fewer in-sync replicas than replicas", len(under), total),
			Numbers: map[string]int64{"under_replicated_partitions": int64(len(under)), "partitions": total},
			Fix:     "check that every replica's broker is up and keeping up (disk, network, replica.lag.time.max.ms); `samsa topic describe " + t.Name + "` shows which replicas are out of the ISR",
		})
	}
	return append(out, diagnoseTopicConfigs(t)...)
}

// replicationFactor is the smallest replica count among the topic's partitions.
func replicationFactor(t TopicSnapshot) int64 {
	rf := int64(-1)
	for _, p := range t.Partitions {
		if n := int64(len(p.Replicas)); rf < 0 || n < rf {
			rf = n
		}
	}
	return rf
}

func diagnoseTopicConfigs(t TopicSnapshot) []Finding {
	if t.Configs == nil {
		return nil
	}
	var out []Finding
	rf := replicationFactor(t)
	minISR, err := strconv.ParseInt(t.Configs["min.insync.replicas"], 10, 64)
	if err == nil && rf > 0 {
		numbers := map[string]int64{"min_insync_replicas": minISR, "replication_factor": rf}
		alter := fmt.Sprintf("samsa topic alter-config %s --set min.insync.replicas=", t.Name)
		if f, ok := underMinISR(t, minISR, rf); ok {
			out = append(out, f)
		}
		switch {
		case minISR > rf:
			out = append(out, Finding{
				Code: CodeMinISRAboveRF, Severity: severityError, Topic: t.Name, Numbers: numbers,
				Message: fmt.Sprintf("min.insync.replicas=%d exceeds the replication factor %d: every acks=all write is refused (NOT_ENOUGH_REPLICAS)", minISR, rf),
				Fix:     fmt.Sprintf("lower it below the replication factor: `%s%d`", alter, max(1, rf-1)),
			})
		case minISR == rf && rf > 1:
			out = append(out, Finding{
				Code: CodeMinISREqualsRF, Severity: severityWarning, Topic: t.Name, Numbers: numbers,
				Message: fmt.Sprintf("min.insync.replicas=%d equals the replication factor: losing any one replica refuses every acks=all write", minISR),
				Fix:     fmt.Sprintf("leave room for one failure: `%s%d`", alter, rf-1),
			})
		case minISR <= 1 && rf >= 3:
			out = append(out, Finding{
				Code: CodeMinISROne, Severity: severityWarning, Topic: t.Name, Numbers: numbers,
				Message: fmt.Sprintf("min.insync.replicas=%d with replication factor %d: acks=all may mean just the leader, whose loss then loses acknowledged writes", minISR, rf),
				Fix:     fmt.Sprintf("require a second copy before acknowledging: `%s2`", alter),
			})
		}
	}
	if t.Configs["unclean.leader.election.enable"] == "true" {
		out = append(out, Finding{
			Code: CodeUncleanLeaderElection, Severity: severityWarning, Topic: t.Name, Numbers: map[string]int64{},
			Message: "unclean.leader.election.enable=true: an out-of-sync replica may become leader, silently dropping acknowledged records",
			Fix:     fmt.Sprintf("prefer consistency over availability: `samsa topic alter-config %s --delete unclean.leader.election.enable` (or --set it to false)", t.Name),
		})
	}
	return out
}

// underMinISR reports the partitions whose ISR is below min.insync.replicas (when
// that is not above the replication factor, which min_isr_above_replication_factor
// reports for the whole topic).
func underMinISR(t TopicSnapshot, minISR, rf int64) (Finding, bool) {
	if minISR > rf {
		return Finding{}, false
	}
	var under []int32
	for _, p := range t.Partitions {
		if p.Leader >= 0 && int64(len(p.ISR)) < minISR {
			under = append(under, p.ID)
		}
	}
	if len(under) == 0 {
		return Finding{}, false
	}
	total := int64(len(t.Partitions))
	return Finding{
		Code: CodeUnderMinISR, Severity: severityError, Topic: t.Name, Partitions: under,
		Message: fmt.Sprintf("%d of %d partitions have fewer in-sync replicas than min.insync.replicas=%d: acks=all writes to them are refused (NOT_ENOUGH_REPLICAS)",
			len(under), total, minISR),
		Numbers: map[string]int64{"under_min_isr_partitions": int64(len(under)), "partitions": total, "min_insync_replicas": minISR},
		Fix: "bring the out-of-sync replicas back: `samsa topic describe " + t.Name + "` shows which brokers are out of the ISR; " +
			"lowering min.insync.replicas restores writes at the cost of durability",
	}, true
}

// diagnosePlacement reports where a topic's replicas are: a single copy of each
// partition in a cluster of several brokers, or all the copies of a partition in
// one rack of a cluster with several racks.
func diagnosePlacement(t TopicSnapshot, brokers []BrokerSnapshot) []Finding {
	var out []Finding
	total := int64(len(t.Partitions))
	if rf := replicationFactor(t); rf == 1 && len(brokers) > 1 {
		out = append(out, Finding{
			Code: CodeReplicationFactorOne, Severity: severityWarning, Topic: t.Name,
			Message: fmt.Sprintf("replication factor 1 in a cluster of %d brokers: each partition has a single copy, so losing its broker makes it unavailable, and losing its disk loses its records",
				len(brokers)),
			Numbers: map[string]int64{"replication_factor": 1, "brokers": int64(len(brokers)), "partitions": total},
			Fix:     "give every partition more replicas (3, with min.insync.replicas=2, survives a broker): `samsa cluster reassign --topic " + t.Name + " --partition N --replicas A,B,C`",
		})
	}
	rackOf := map[int32]string{}
	racks := map[string]bool{}
	for _, b := range brokers {
		rackOf[b.ID] = b.Rack
		if b.Rack != "" {
			racks[b.Rack] = true
		}
	}
	if len(racks) < 2 {
		return out
	}
	var oneRack []int32
	for _, p := range t.Partitions {
		if len(p.Replicas) < 2 {
			continue
		}
		first, same := rackOf[p.Replicas[0]], true
		for _, r := range p.Replicas {
			rack, known := rackOf[r]
			same = same && known && rack != "" && rack == first
		}
		if same {
			oneRack = append(oneRack, p.ID)
		}
	}
	if len(oneRack) > 0 {
		out = append(out, Finding{
			Code: CodeReplicasInOneRack, Severity: severityWarning, Topic: t.Name, Partitions: oneRack,
			Message: fmt.Sprintf("%d of %d partitions have every replica in one rack although the cluster spans %d racks: losing that rack loses them",
				len(oneRack), total, len(racks)),
			Numbers: map[string]int64{"partitions_in_one_rack": int64(len(oneRack)), "partitions": total, "racks": int64(len(racks))},
			Fix:     "spread their replicas over racks (`samsa cluster info` lists the brokers' racks): `samsa cluster reassign --topic " + t.Name + " --partition N --replicas A,B,C`",
		})
	}
	return out
}

func diagnoseGroup(g GroupSnapshot, window time.Duration) []Finding {
	if len(g.Samples) == 0 {
		return nil
	}
	last := g.Samples[len(g.Samples)-1]
	var out []Finding
	if f, ok := idleConsumers(g, last); ok {
		out = append(out, f)
	}
	out = append(out, lagSkew(g.Name, last)...)
	if f, ok := lagGrowing(g, window); ok {
		out = append(out, f)
	}
	if f, ok := rebalancing(g); ok {
		out = append(out, f)
	}
	return out
}

func idleConsumers(g GroupSnapshot, s GroupSample) (Finding, bool) {
	if s.State != "Stable" {
		return Finding{}, false
	}
	partitions, idle := 0, 0
	for _, n := range g.TopicPartitions {
		partitions += n
	}
	for _, m := range s.Members {
		if m.Assigned == 0 {
			idle++
		}
	}
	members := len(s.Members)
	if members <= partitions || idle == 0 {
		return Finding{}, false
	}
	return Finding{
		Code: CodeIdleConsumers, Severity: severityWarning, Group: g.Name,
		Message: fmt.Sprintf("%d members share %d partitions, so %d members sit idle: the group is at its partition ceiling",
			members, partitions, idle),
		Numbers: map[string]int64{"members": int64(members), "partitions": int64(partitions), "idle_members": int64(idle)},
		Fix:     "a partition is consumed by at most one member of a group: stop the idle members, or add partitions with `samsa topic add-partitions TOPIC --total N` (keyed ordering breaks across that change)",
	}, true
}

// lagSkew reports topics where one partition holds most of the group's lag.
func lagSkew(group string, s GroupSample) []Finding {
	var out []Finding
	for _, topic := range sortedKeys(s.Lag) {
		parts := s.Lag[topic]
		if len(parts) < 2 {
			continue
		}
		var total, hotLag int64
		hot := int32(-1)
		for p, lag := range parts {
			total += lag
			if lag > hotLag || (lag == hotLag && p < hot) {
				hot, hotLag = p, lag
			}
		}
		mean := total / int64(len(parts))
		if total < minSkewLag || hotLag*2 <= total || hotLag <= 2*mean {
			continue
		}
		share := hotLag * 100 / total
		out = append(out, Finding{
			Code: CodeLagSkew, Severity: severityWarning, Group: group, Topic: topic, Partitions: []int32{hot},
			Message: fmt.Sprintf("partition %d holds %d%% of the group's lag on this topic (%d of %d records; the mean per partition is %d): records land unevenly (a hot key, or keyless records a producer sent mostly there) or its member is slow",
				hot, share, hotLag, total, mean),
			Numbers: map[string]int64{"partition": int64(hot), "partition_lag": hotLag, "total_lag": total, "share_percent": share, "mean_lag": mean},
			Fix:     "see which keys land there (`samsa consume " + topic + " --partition " + strconv.Itoa(int(hot)) + " --format '{{.Key}}'`): spread a hot key with a finer key, keyless records with the producer's partitioner (round-robin); or speed up the member that owns the partition — adding consumers does not help a single hot partition",
		})
	}
	return out
}

func totalLag(s GroupSample) int64 {
	var total int64
	for _, parts := range s.Lag {
		for _, lag := range parts {
			total += lag
		}
	}
	return total
}

// lagGrowing reports a group whose lag grew across the window: every sample in the
// second half of the window is above every sample of the first half, which a consumer
// that keeps up but commits periodically (a sawtooth) does not produce.
func lagGrowing(g GroupSnapshot, window time.Duration) (Finding, bool) {
	n := len(g.Samples)
	if n < 2 {
		return Finding{}, false
	}
	lags := make([]int64, n)
	for i, s := range g.Samples {
		lags[i] = totalLag(s)
	}
	half := n / 2
	if slices.Min(lags[half:]) <= slices.Max(lags[:half]) {
		return Finding{}, false
	}
	first, last := lags[0], lags[n-1]
	growth := last - first
	ms := window.Milliseconds()
	perSecond := int64(0)
	if ms > 0 {
		perSecond = growth * 1000 / ms
	}
	return Finding{
		Code: CodeLagGrowing, Severity: severityWarning, Group: g.Name,
		Message: fmt.Sprintf("lag grew from %d to %d records over %s (%d records/s): the group consumes slower than producers write",
			first, last, window, perSecond),
		Numbers: map[string]int64{"lag_start": first, "lag_end": last, "growth": growth, "window_ms": ms, "growth_per_second": perSecond},
		Fix:     "check that the group's consumers are running and not stuck (`samsa group describe " + g.Name + "`); if they are, add consumers (up to the partition count) or make each record's processing faster",
	}, true
}

// rebalancing reports a group seen rebalancing, or whose membership changed, during
// the window. DescribeGroups does not return the generation, so a rebalance shows as a
// PreparingRebalance/CompletingRebalance state or as a changed set of member ids.
func rebalancing(g GroupSnapshot) (Finding, bool) {
	if len(g.Samples) < 2 {
		return Finding{}, false
	}
	inRebalance, changes := 0, 0
	for i, s := range g.Samples {
		if s.State == "PreparingRebalance" || s.State == "CompletingRebalance" {
			inRebalance++
		}
		if i > 0 && !sameMembers(g.Samples[i-1], s) {
			changes++
		}
	}
	if inRebalance == 0 && changes == 0 {
		return Finding{}, false
	}
	return Finding{
		Code: CodeGroupRebalancing, Severity: severityWarning, Group: g.Name,
		Message: fmt.Sprintf("the group rebalanced during the window: %d of %d samples caught it rebalancing and its membership changed %d times",
			inRebalance, len(g.Samples), changes),
		Numbers: map[string]int64{"samples": int64(len(g.Samples)), "rebalancing_samples": int64(inRebalance), "membership_changes": int64(changes)},
		Fix:     "if it keeps happening, look in the consumers' logs for session timeouts or max.poll.interval.ms being exceeded; give slow processing more time, use static membership (group.instance.id), or the cooperative-sticky assignor",
	}, true
}

func sameMembers(a, b GroupSample) bool {
	if len(a.Members) != len(b.Members) {
		return false
	}
	ids := make(map[string]bool, len(a.Members))
	for _, m := range a.Members {
		ids[m.ID] = true
	}
	for _, m := range b.Members {
		if !ids[m.ID] {
			return false
		}
	}
	return true
}

// diagnoseLogDirs reports a broker's offline log directories: the partitions it held
// there are not served by it until the disk is replaced and the broker restarted (in a
// cluster their leadership moved to in-sync replicas elsewhere).
func diagnoseLogDirs(b BrokerSnapshot) []Finding {
	var out []Finding
	for _, d := range b.OfflineLogDirs {
		out = append(out, Finding{
			Code: CodeOfflineLogDir, Severity: severityError,
			Message: fmt.Sprintf("broker %d: log directory %s is offline after an I/O error (KAFKA_STORAGE_ERROR): the broker serves none of its partitions there", b.ID, d),
			Numbers: map[string]int64{"broker": int64(b.ID)},
			Fix:     fmt.Sprintf("replace or repair the disk of %s and restart broker %d (or remove %s from its log.dirs and restart; see docs/operations.md, I/O errors)", d, b.ID, d),
		})
	}
	return out
}
