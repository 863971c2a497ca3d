package cli

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// Doctor's transaction checks: a partition whose last stable offset stays behind its
// high watermark because a transaction stays open (read_committed consumers get
// nothing past it), and the groups whose lag is that held-back part rather than slow
// consumption.

// UnstablePartition is a partition whose last stable offset trails its high watermark.
type UnstablePartition struct {
	Topic         string
	Partition     int32
	LastStable    int64
	HighWatermark int64
	// Sampled: the last stable offset was also read at the start of the window; Moved
	// says whether it changed since.
	Sampled, Moved bool
	// The transaction open at the last stable offset: its producer (-1 when the
	// partition's leader did not say), its transactional id ("" when no coordinator
	// knows the producer: a hanging transaction) and how long its coordinator has had
	// it open (0 when not known).
	ProducerID      int64
	ProducerEpoch   int16
	TransactionalID string
	OpenFor         time.Duration
}

// Finding codes of the transaction checks.
const (
	CodeLSOStuck             = "lso_stuck"
	CodeLagHeldByTransaction = "lag_held_by_transaction"
)

// stuckAfter is how long a transaction may hold a partition's last stable offset
// before doctor reports it when the window did not show the offset standing still
// (Kafka's default transaction.timeout.ms).
const stuckAfter = time.Minute

// stuck reports whether u's last stable offset is stuck rather than about to move.
func (u UnstablePartition) stuck() bool {
	return (u.Sampled && !u.Moved) || u.OpenFor >= stuckAfter || (u.ProducerID >= 0 && u.TransactionalID == "")
}

// diagnoseUnstable reports the stuck last stable offsets.
func diagnoseUnstable(s Snapshot) []Finding {
	var out []Finding
	for _, u := range s.Unstable {
		if !u.stuck() {
			continue
		}
		held := u.HighWatermark - u.LastStable
		numbers := map[string]int64{"last_stable_offset": u.LastStable, "high_watermark": u.HighWatermark, "held_records": held,
			"producer_id": u.ProducerID, "open_for_ms": u.OpenFor.Milliseconds()}
		sev := severityWarning
		what := fmt.Sprintf("the transaction of producer %d", u.ProducerID)
		fix := fmt.Sprintf("the producer of transactional id %q should commit or abort it (`samsa transactions describe %s`); if it is gone, a new producer with that id aborts it, or `samsa transactions abort --topic %s --partition %d --start-offset %d`",
			u.TransactionalID, u.TransactionalID, u.Topic, u.Partition, u.LastStable)
		switch {
		case u.ProducerID < 0:
			what = "an open transaction"
			fix = fmt.Sprintf("find it with `samsa transactions find-hanging %s`", u.Topic)
		case u.TransactionalID == "":
			sev = severityError
			what += " (hanging: no coordinator knows it, nothing will end it)"
			fix = fmt.Sprintf("abort it: `samsa transactions abort --topic %s --partition %d --start-offset %d`", u.Topic, u.Partition, u.LastStable)
		default:
			what += fmt.Sprintf(" (transactional id %q, open for %s)", u.TransactionalID, u.OpenFor.Round(time.Second))
		}
		out = append(out, Finding{
			Code: CodeLSOStuck, Severity: sev, Topic: u.Topic, Partitions: []int32{u.Partition}, Numbers: numbers, Fix: fix,
			Message: fmt.Sprintf("the last stable offset is held at %d by %s: read_committed consumers get none of the %d records after it",
				u.LastStable, what, held),
		})
	}
	return out
}

// lagHeldByTransaction reports, per topic, the partitions where the group caught up
// with a stuck last stable offset: its lag there is records held back by an open
// transaction, which no consumer can read.
func lagHeldByTransaction(g GroupSnapshot, unstable []UnstablePartition) []Finding {
	if len(g.Samples) == 0 {
		return nil
	}
	last := g.Samples[len(g.Samples)-1]
	byTopic := map[string][]int32{}
	held := map[string]int64{}
	for _, u := range unstable {
		lag, ok := last.Lag[u.Topic][u.Partition]
		if !ok || lag == 0 || !u.stuck() || lag > u.HighWatermark-u.LastStable {
			continue
		}
		byTopic[u.Topic] = append(byTopic[u.Topic], u.Partition)
		held[u.Topic] += lag
	}
	var out []Finding
	for _, topic := range sortedKeys(byTopic) {
		parts := byTopic[topic]
		sort.Slice(parts, func(i, j int) bool { return parts[i] < parts[j] })
		out = append(out, Finding{
			Code: CodeLagHeldByTransaction, Severity: severityWarning, Group: g.Name, Topic: topic, Partitions: parts,
			Numbers: map[string]int64{"held_lag": held[topic], "partitions": int64(len(parts))},
			Message: fmt.Sprintf("%d records of the group's lag are behind open transactions: read_committed consumers cannot read them, and the lag grows with every write until the transactions end",
				held[topic]),
			Fix: "end the transactions holding these partitions (see the lso_stuck findings); more or faster consumers do not help",
		})
	}
	return out
}

type partitionKey struct {
	topic     string
	partition int32
}

// lastStableOffsets reads the last stable offset of every partition of topics.
func (c *collector) lastStableOffsets(ctx context.Context, topics []string) map[partitionKey]int64 {
	out := map[partitionKey]int64{}
	if len(topics) == 0 {
		return out
	}
	lso, err := c.adm.ListCommittedOffsets(ctx, topics...)
	if err != nil && len(lso) == 0 {
		c.skip("transaction checks: cannot list last stable offsets: %v", err)
		return out
	}
	lso.Each(func(o kadm.ListedOffset) {
		if o.Err == nil {
			out[partitionKey{o.Topic, o.Partition}] = o.Offset
		}
	})
	return out
}

// unstable finds the partitions of topics whose last stable offset trails the high
// watermark, and the transaction holding each. before, when not nil, holds the last
// stable offsets read at the start of the window.
func (c *collector) unstable(ctx context.Context, topics []string, before map[partitionKey]int64) []UnstablePartition {
	if len(topics) == 0 {
		return nil
	}
	lso := c.lastStableOffsets(ctx, topics)
	ends, err := c.adm.ListEndOffsets(ctx, topics...)
	if err != nil && len(ends) == 0 {
		c.skip("transaction checks: cannot list end offsets: %v", err)
		return nil
	}
	var out []UnstablePartition
	set := kadm.TopicsSet{}
	ends.Each(func(o kadm.ListedOffset) {
		stable, ok := lso[partitionKey{o.Topic, o.Partition}]
		if o.Err != nil || !ok || stable >= o.Offset {
			return
		}
		u := UnstablePartition{Topic: o.Topic, Partition: o.Partition, LastStable: stable, HighWatermark: o.Offset, ProducerID: -1}
		if b, ok := before[partitionKey{o.Topic, o.Partition}]; ok {
			u.Sampled, u.Moved = true, b != stable
		}
		out = append(out, u)
		set.Add(o.Topic, o.Partition)
	})
	if len(out) == 0 {
		return nil
	}
	c.identifyTransactions(ctx, set, out)
	sort.Slice(out, func(i, j int) bool {
		return out[i].Topic < out[j].Topic || out[i].Topic == out[j].Topic && out[i].Partition < out[j].Partition
	})
	return out
}

// identifyTransactions fills in the transaction open at each partition's last stable
// offset: DescribeProducers names its producer, ListTransactions and
// DescribeTransactions its transactional id and age.
func (c *collector) identifyTransactions(ctx context.Context, set kadm.TopicsSet, us []UnstablePartition) {
	described, err := c.adm.DescribeProducers(ctx, set)
	if err != nil && len(described) == 0 {
		c.skip("transaction checks: cannot describe producers: %v", err)
		return
	}
	var pids []int64
	for i := range us {
		u := &us[i]
		p := described[u.Topic].Partitions[u.Partition]
		for _, ap := range p.ActiveProducers {
			if ap.CurrentTxnStartOffset == u.LastStable {
				u.ProducerID, u.ProducerEpoch = ap.ProducerID, ap.ProducerEpoch
				pids = append(pids, ap.ProducerID)
			}
		}
	}
	if len(pids) == 0 {
		return
	}
	listed, err := c.adm.ListTransactions(ctx, pids, nil)
	if err != nil && len(listed) == 0 {
		c.skip("transaction checks: cannot list transactions: %v", err)
		return
	}
	ids := map[int64]string{}
	var names []string
	for _, l := range listed {
		ids[l.ProducerID] = l.TxnID
		names = append(names, l.TxnID)
	}
	txns, _ := c.adm.DescribeTransactions(ctx, names...)
	for i := range us {
		u := &us[i]
		if u.ProducerID < 0 {
			continue
		}
		u.TransactionalID = ids[u.ProducerID]
		if d, ok := txns[u.TransactionalID]; ok && d.Err == nil && d.StartTimestamp > 0 {
			u.OpenFor = time.Since(time.UnixMilli(d.StartTimestamp))
		}
	}
}

// scopeTopics are the topics whose last stable offsets are read at the start of the
// window: --topic, or every non-internal topic.
func (c *collector) scopeTopics(md kadm.Metadata) []string {
	if c.scope.topic != "" {
		return []string{c.scope.topic}
	}
	var names []string
	for _, d := range md.Topics.Sorted() {
		if !d.IsInternal && d.Err == nil {
			names = append(names, d.Topic)
		}
	}
	return names
}
