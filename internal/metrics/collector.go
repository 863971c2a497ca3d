package metrics

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// Source is implemented by the broker. The collector calls each method once per
// scrape, from the scrape's goroutine; nothing is computed on the request path.
type Source interface {
	// Partitions returns one entry per partition replica hosted by this broker.
	Partitions() []PartitionStats
	// Groups returns one entry per consumer group this broker coordinates.
	Groups() []GroupStats
}

// QuorumSource is implemented by a Source that can also describe the node's place in
// the metadata quorum; the collector then exports the controller gauges.
type QuorumSource interface {
	Quorum() QuorumStats
}

// QuorumStats is a snapshot of the node's view of the metadata quorum.
type QuorumStats struct {
	// State is the node's role in the metadata quorum: leader, follower,
	// candidate, pre-candidate (voters) or observer (brokers that do not vote).
	State string
	// Active is true on the active controller.
	Active bool
	// MetadataOffset is the offset of the last metadata entry applied here.
	MetadataOffset int64
	// The cluster-wide counts below are exported by the active controller only
	// (zero elsewhere), as Kafka's controller metrics are.
	OfflinePartitions         int // partitions without a leader
	PreferredReplicaImbalance int // partitions not led by their first replica
	FencedBrokers             int
	ActiveBrokers             int // registered, unfenced, not shutting down
}

// quorumStates are always exported by samsa_metadata_quorum_state, 1 for the current.
var quorumStates = []string{"leader", "follower", "candidate", "pre-candidate", "observer"}

// PartitionStats is a snapshot of one partition replica on this broker.
type PartitionStats struct {
	Topic     string
	Partition int32
	// LogSizeBytes is the size of the replica's log segments on disk.
	LogSizeBytes   int64
	LogStartOffset int64
	LogEndOffset   int64
	HighWatermark  int64
	// LastStableOffset is where read_committed consumers stop (the high watermark when
	// no transaction is open).
	LastStableOffset int64
	// Replicas and ISR are the sizes of the assigned replica set and the in-sync set.
	Replicas, ISR int
	// MinISR is the topic's min.insync.replicas.
	MinISR int
	// Leader is true when this broker leads the partition.
	Leader bool
	// FollowerLag is, on the leader, the largest number of offsets a follower is
	// behind its log end (replica.Partition.FollowerLag); 0 elsewhere.
	FollowerLag int64
	// Offline is true when the partition has no live leader (Kafka's leader -1).
	Offline bool
}

// GroupStats is a snapshot of one consumer group.
type GroupStats struct {
	Group string
	// State is Kafka's group state name: Empty, PreparingRebalance,
	// CompletingRebalance, Stable or Dead.
	State      string
	Members    int
	Generation int32
	Offsets    []GroupOffset
}

// GroupOffset is a group's committed offset for one partition.
type GroupOffset struct {
	Topic     string
	Partition int32
	Committed int64
}

// groupStates are always exported by samsa_groups, with 0 when no group is in them.
var groupStates = []string{"Empty", "PreparingRebalance", "CompletingRebalance", "Stable", "Dead"}

// stateCollector turns a Source snapshot into gauges at scrape time.
type stateCollector struct {
	source Source

	partitions, leaderPartitions, underReplicated, underMinISR, atMinISR, offline, maxLag *prometheus.Desc

	logSize, logStart, logEnd, highWatermark, replicas, isr *prometheus.Desc

	groups, groupMembers, groupGeneration, committed, lag *prometheus.Desc

	activeController, quorumState, metadataOffset, globalOffline, imbalance, fencedBrokers, activeBrokers *prometheus.Desc

	txn   txnDescs
	share shareDescs
}

func newStateCollector(source Source) *stateCollector {
	desc := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(prometheus.BuildFQName(namespace, "", name), help, labels, nil)
	}
	tp := []string{"topic", "partition"}
	gtp := []string{"group", "topic", "partition"}
	return &stateCollector{
		source:           source,
		partitions:       desc("partitions", "Partition replicas hosted by this broker."),
		leaderPartitions: desc("leader_partitions", "Partitions this broker leads."),
		underReplicated: desc("under_replicated_partitions",
			"Partitions led by this broker whose in-sync replica set is smaller than their replica set."),
		underMinISR: desc("under_min_isr_partitions",
			"Partitions led by this broker whose in-sync replica set is smaller than min.insync.replicas: acks=all writes are refused."),
		atMinISR: desc("at_min_isr_partitions",
			"Partitions led by this broker whose in-sync replica set is exactly min.insync.replicas: one more lost replica refuses acks=all writes."),
		offline: desc("offline_partitions", "Partitions hosted by this broker that have no live leader."),
		maxLag: desc("replica_max_lag",
			"Largest number of offsets a follower of a partition led by this broker is behind the leader's log end."),
		logSize:       desc("log_size_bytes", "Size of the partition replica's log segments on disk.", tp...),
		logStart:      desc("log_start_offset", "First offset still in the partition replica's log.", tp...),
		logEnd:        desc("log_end_offset", "Offset the next record appended to the partition replica will get.", tp...),
		highWatermark: desc("high_watermark", "Partition high watermark: records below it are replicated to the ISR and readable.", tp...),
		replicas:      desc("partition_replicas", "Size of the partition's assigned replica set.", tp...),
		isr:           desc("partition_in_sync_replicas", "Size of the partition's in-sync replica set.", tp...),
		groups:        desc("groups", "Consumer groups coordinated by this broker, by group state.", "state"),
		groupMembers:  desc("group_members", "Members of the consumer group.", "group"),
		groupGeneration: desc("group_generation",
			"Generation of the consumer group; it grows by one per completed rebalance.", "group"),
		committed: desc("group_committed_offset", "Offset committed by the group for the partition.", gtp...),
		lag: desc("group_lag",
			"Committed-offset lag: partition high watermark minus the group's committed offset (never negative). "+
				"Only for partitions hosted by this broker.", gtp...),
		activeController: desc("active_controller_count", "1 on the active controller of the metadata quorum, 0 elsewhere."),
		quorumState:      desc("metadata_quorum_state", "1 for this node's role in the metadata quorum.", "state"),
		metadataOffset:   desc("metadata_offset", "Offset of the last metadata log entry applied on this node."),
		globalOffline:    desc("controller_offline_partitions", "Partitions of the cluster without a leader (active controller only)."),
		imbalance:        desc("controller_preferred_replica_imbalance", "Partitions not led by their preferred replica (active controller only)."),
		fencedBrokers:    desc("controller_fenced_brokers", "Registered brokers that are fenced (active controller only)."),
		activeBrokers:    desc("controller_active_brokers", "Registered brokers that are unfenced and not shutting down (active controller only)."),
		txn:              newTxnDescs(),
		share:            newShareDescs(),
	}
}

// Describe implements prometheus.Collector.
func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{
		c.partitions, c.leaderPartitions, c.underReplicated, c.underMinISR, c.atMinISR, c.offline, c.maxLag,
		c.logSize, c.logStart, c.logEnd, c.highWatermark, c.replicas, c.isr,
		c.groups, c.groupMembers, c.groupGeneration, c.committed, c.lag,
	} {
		ch <- d
	}
	_, coordinates := c.source.(TransactionSource)
	c.txn.describe(ch, coordinates)
	if _, ok := c.source.(ShareSource); ok {
		ch <- c.share.inFlight
	}
	if _, ok := c.source.(QuorumSource); ok {
		for _, d := range []*prometheus.Desc{
			c.activeController, c.quorumState, c.metadataOffset, c.globalOffline, c.imbalance, c.fencedBrokers, c.activeBrokers,
		} {
			ch <- d
		}
	}
}

// topicPartition keys the per-scrape partition index.
type topicPartition struct {
	topic     string
	partition int32
}

// Collect implements prometheus.Collector: one Source snapshot per scrape.
func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	highWatermarks := c.collectPartitions(ch)
	c.collectGroups(ch, highWatermarks)
	if qs, ok := c.source.(QuorumSource); ok {
		c.collectQuorum(ch, qs.Quorum())
	}
	if ts, ok := c.source.(TransactionSource); ok {
		c.txn.collect(ch, ts.Transactions())
	}
	if ss, ok := c.source.(ShareSource); ok {
		c.share.collect(ch, ss.SharePartitions())
	}
}

func (c *stateCollector) collectQuorum(ch chan<- prometheus.Metric, q QuorumStats) {
	active := 0.0
	if q.Active {
		active = 1
	}
	gauge(ch, c.activeController, active)
	for _, s := range quorumStates {
		v := 0.0
		if s == q.State {
			v = 1
		}
		gauge(ch, c.quorumState, v, s)
	}
	gauge(ch, c.metadataOffset, float64(q.MetadataOffset))
	gauge(ch, c.globalOffline, float64(q.OfflinePartitions))
	gauge(ch, c.imbalance, float64(q.PreferredReplicaImbalance))
	gauge(ch, c.fencedBrokers, float64(q.FencedBrokers))
	gauge(ch, c.activeBrokers, float64(q.ActiveBrokers))
}

// collectPartitions emits the partition gauges and returns each partition's high
// watermark (duplicates of a topic-partition are skipped).
func (c *stateCollector) collectPartitions(ch chan<- prometheus.Metric) map[topicPartition]int64 {
	parts := c.source.Partitions()
	highWatermarks := make(map[topicPartition]int64, len(parts))
	seen := make(map[topicPartition]bool, len(parts))
	var hosted, led, underReplicated, underMinISR, atMinISR, offline int
	var maxLag int64
	for _, p := range parts {
		tp := topicPartition{labelValue(p.Topic), p.Partition}
		if seen[tp] {
			continue // a duplicate would fail the whole scrape
		}
		seen[tp] = true
		hosted++
		if p.Leader {
			led++
			if p.ISR < p.Replicas {
				underReplicated++
			}
			switch {
			case p.ISR < p.MinISR:
				underMinISR++
			case p.ISR == p.MinISR:
				atMinISR++
			}
			maxLag = max(maxLag, p.FollowerLag)
		}
		if p.Offline {
			offline++
		}
		highWatermarks[tp] = p.HighWatermark
		labels := []string{tp.topic, strconv.Itoa(int(p.Partition))}
		gauge(ch, c.logSize, float64(p.LogSizeBytes), labels...)
		gauge(ch, c.logStart, float64(p.LogStartOffset), labels...)
		gauge(ch, c.logEnd, float64(p.LogEndOffset), labels...)
		gauge(ch, c.highWatermark, float64(p.HighWatermark), labels...)
		gauge(ch, c.replicas, float64(p.Replicas), labels...)
		gauge(ch, c.isr, float64(p.ISR), labels...)
		c.txn.collectPartition(ch, tp.topic, p)
	}
	gauge(ch, c.partitions, float64(hosted))
	gauge(ch, c.leaderPartitions, float64(led))
	gauge(ch, c.underReplicated, float64(underReplicated))
	gauge(ch, c.underMinISR, float64(underMinISR))
	gauge(ch, c.atMinISR, float64(atMinISR))
	gauge(ch, c.offline, float64(offline))
	gauge(ch, c.maxLag, float64(maxLag))
	return highWatermarks
}

func (c *stateCollector) collectGroups(ch chan<- prometheus.Metric, highWatermarks map[topicPartition]int64) {
	groups := c.source.Groups()
	byState := make(map[string]int, len(groupStates))
	for _, s := range groupStates {
		byState[s] = 0
	}
	seenGroups := make(map[string]bool, len(groups))
	for _, g := range groups {
		group := labelValue(g.Group)
		if seenGroups[group] {
			continue
		}
		seenGroups[group] = true
		byState[labelValue(g.State)]++
		gauge(ch, c.groupMembers, float64(g.Members), group)
		gauge(ch, c.groupGeneration, float64(g.Generation), group)
		seenOffsets := make(map[topicPartition]bool, len(g.Offsets))
		for _, o := range g.Offsets {
			tp := topicPartition{labelValue(o.Topic), o.Partition}
			if seenOffsets[tp] {
				continue
			}
			seenOffsets[tp] = true
			partition := strconv.Itoa(int(o.Partition))
			gauge(ch, c.committed, float64(o.Committed), group, tp.topic, partition)
			if hw, ok := highWatermarks[tp]; ok {
				gauge(ch, c.lag, float64(max(hw-o.Committed, 0)), group, tp.topic, partition)
			}
		}
	}
	for state, n := range byState {
		gauge(ch, c.groups, float64(n), state)
	}
}

// gauge emits one constant gauge. Descs and label counts are fixed above and label
// values are valid UTF-8, so construction cannot fail; if it ever did, the sample is
// dropped rather than panicking the scrape.
func gauge(ch chan<- prometheus.Metric, d *prometheus.Desc, v float64, labels ...string) {
	if m, err := prometheus.NewConstMetric(d, prometheus.GaugeValue, v, labels...); err == nil {
		ch <- m
	}
}
