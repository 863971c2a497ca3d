package cli

import (
	"context"
	"fmt"
	"io"
	"sort"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
)

// `samsa transactions` is Kafka's kafka-transactions.sh: list and describe the
// transactions of the cluster's coordinators, the producers a partition tracks, find
// hanging transactions (open in a partition, unknown to or long forgotten by their
// coordinator) and abort one by writing its abort marker to the partition.

func newTransactionsCmd(g *globals) *cobra.Command {
	cmd := newGroupingCmd("transactions", "List, describe and abort transactions",
		"Inspect the transactions of the cluster's coordinators and the producers of partitions, find hanging transactions and abort them.")
	cmd.Aliases = []string{"txn"}
	cmd.AddCommand(
		newTxnListCmd(g),
		newTxnDescribeCmd(g),
		newTxnDescribeProducersCmd(g),
		newTxnFindHangingCmd(g),
		newTxnAbortCmd(g),
	)
	return cmd
}

// txnSummary is one row of `transactions list`.
type txnSummary struct {
	TransactionalID string `json:"transactional_id"`
	Coordinator     int32  `json:"coordinator"`
	ProducerID      int64  `json:"producer_id"`
	State           string `json:"state"`
}

func newTxnListCmd(g *globals) *cobra.Command {
	var (
		states []string
		pids   []int64
	)
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List the transactional ids the coordinators know",
		Example: `  samsa transactions list
  samsa transactions list --state Ongoing -o json`,
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			adm, ctx, done, err := g.admin(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			listed, err := adm.ListTransactions(ctx, pids, states)
			if err != nil && len(listed) == 0 {
				return g.explain("list transactions", err)
			}
			rows := []txnSummary{}
			for _, l := range listed.Sorted() {
				rows = append(rows, txnSummary{TransactionalID: l.TxnID, Coordinator: l.Coordinator, ProducerID: l.ProducerID, State: l.State})
			}
			return g.newOutput(cmd).render(struct {
				Transactions []txnSummary `json:"transactions"`
			}{rows}, func(w io.Writer) {
				t := newTable(w, "TRANSACTIONAL-ID", "COORDINATOR", "PRODUCER-ID", "STATE")
				for _, r := range rows {
					t.row(r.TransactionalID, r.Coordinator, r.ProducerID, r.State)
				}
				t.flush()
			})
		},
	}
	cmd.Flags().StringSliceVar(&states, "state", nil, "only transactions in these states (Ongoing, PrepareCommit, CompleteCommit…)")
	cmd.Flags().Int64SliceVar(&pids, "producer-id", nil, "only these producer ids")
	return cmd
}

// txnDescription is the JSON result of `transactions describe`.
type txnDescription struct {
	TransactionalID string            `json:"transactional_id"`
	Coordinator     int32             `json:"coordinator"`
	State           string            `json:"state"`
	ProducerID      int64             `json:"producer_id"`
	ProducerEpoch   int16             `json:"producer_epoch"`
	TimeoutMs       int32             `json:"timeout_ms"`
	StartTimestamp  int64             `json:"start_timestamp"` // -1 when no transaction is open
	DurationMs      int64             `json:"duration_ms"`     // -1 when no transaction is open
	Partitions      []topicPartitions `json:"partitions"`
}

func newTxnDescribeCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "describe TRANSACTIONAL-ID",
		Short: "Show a transactional id's producer, state and open transaction",
		Example: `  samsa transactions describe orders-writer-1
  samsa transactions describe orders-writer-1 -o json | jq .partitions`,
		Args: args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			adm, ctx, done, err := g.admin(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			described, err := adm.DescribeTransactions(ctx, a[0])
			if err != nil && len(described) == 0 {
				return g.explain("describe transaction", err)
			}
			d, ok := described[a[0]]
			if !ok {
				return fmt.Errorf("transactional id %q: no answer from its coordinator", a[0])
			}
			if d.Err != nil {
				return g.explain(fmt.Sprintf("describe transactional id %q", a[0]), d.Err)
			}
			out := txnDescription{TransactionalID: d.TxnID, Coordinator: d.Coordinator, State: d.State, ProducerID: d.ProducerID,
				ProducerEpoch: d.ProducerEpoch, TimeoutMs: d.TimeoutMillis, StartTimestamp: d.StartTimestamp, DurationMs: -1,
				Partitions: []topicPartitions{}}
			if d.StartTimestamp >= 0 && (d.State == "Ongoing" || d.State == "PrepareCommit" || d.State == "PrepareAbort") {
				out.DurationMs = time.Since(time.UnixMilli(d.StartTimestamp)).Milliseconds()
			} else {
				out.StartTimestamp = -1
			}
			for _, t := range d.Topics.Sorted() {
				out.Partitions = append(out.Partitions, topicPartitions{Topic: t.Topic, Partitions: t.Partitions})
			}
			return g.newOutput(cmd).render(out, func(w io.Writer) {
				fmt.Fprintf(w, "transactional id: %s\ncoordinator: %d\nstate: %s\nproducer: %d, epoch %d\ntimeout: %s\n",
					out.TransactionalID, out.Coordinator, out.State, out.ProducerID, out.ProducerEpoch,
					time.Duration(out.TimeoutMs)*time.Millisecond)
				if out.DurationMs >= 0 {
					fmt.Fprintf(w, "open for: %s (since %s)\n", (time.Duration(out.DurationMs) * time.Millisecond).Round(time.Millisecond),
						time.UnixMilli(out.StartTimestamp).UTC().Format(time.RFC3339Nano))
				}
				if len(out.Partitions) > 0 {
					t := newTable(w, "TOPIC", "PARTITIONS")
					for _, p := range out.Partitions {
						t.row(p.Topic, int32List(p.Partitions))
					}
					t.flush()
				}
			})
		},
	}
}

// producerRow is one producer of one partition (`transactions describe-producers`).
type producerRow struct {
	Topic                 string `json:"topic"`
	Partition             int32  `json:"partition"`
	Leader                int32  `json:"leader"`
	ProducerID            int64  `json:"producer_id"`
	ProducerEpoch         int16  `json:"producer_epoch"`
	LastSequence          int32  `json:"last_sequence"`
	LastTimestamp         int64  `json:"last_timestamp"`
	CoordinatorEpoch      int32  `json:"coordinator_epoch"`
	CurrentTxnStartOffset int64  `json:"current_txn_start_offset"` // -1 when none is open
}

func newTxnDescribeProducersCmd(g *globals) *cobra.Command {
	var partition int32
	cmd := &cobra.Command{
		Use:   "describe-producers TOPIC",
		Short: "Show the idempotent and transactional producers of a topic's partitions",
		Long: `Show, for each partition of TOPIC (or only --partition), the producers its leader
tracks: id, epoch, last sequence and timestamp, the coordinator epoch of their last
marker, and the first offset of their open transaction (-1 when none).`,
		Example: `  samsa transactions describe-producers orders
  samsa transactions describe-producers orders --partition 2 -o json`,
		Args: args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			adm, ctx, done, err := g.admin(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			rows, err := describeProducers(ctx, g, adm, a[0], partition)
			if err != nil {
				return err
			}
			return g.newOutput(cmd).render(struct {
				Producers []producerRow `json:"producers"`
			}{rows}, func(w io.Writer) {
				t := newTable(w, "PARTITION", "LEADER", "PRODUCER-ID", "EPOCH", "LAST-SEQUENCE", "LAST-TIMESTAMP", "COORDINATOR-EPOCH", "TXN-START-OFFSET")
				for _, r := range rows {
					t.row(r.Partition, r.Leader, r.ProducerID, r.ProducerEpoch, r.LastSequence,
						time.UnixMilli(r.LastTimestamp).UTC().Format(time.RFC3339), r.CoordinatorEpoch, r.CurrentTxnStartOffset)
				}
				t.flush()
			})
		},
	}
	cmd.Flags().Int32VarP(&partition, "partition", "p", -1, "only this partition")
	return cmd
}

// describeProducers returns the producers of topic's partitions (one when partition ≥ 0).
func describeProducers(ctx context.Context, g *globals, adm *kadm.Client, topic string, partition int32) ([]producerRow, error) {
	detail, err := topicExists(ctx, g, adm, topic)
	if err != nil {
		return nil, err
	}
	set := kadm.TopicsSet{}
	if partition >= 0 {
		if err := hasPartition(detail, partition); err != nil {
			return nil, err
		}
		set.Add(topic, partition)
	} else {
		for _, p := range detail.Partitions.Sorted() {
			set.Add(topic, p.Partition)
		}
	}
	described, err := adm.DescribeProducers(ctx, set)
	if err != nil && len(described) == 0 {
		return nil, g.explain("describe producers", err)
	}
	rows := []producerRow{}
	for _, t := range described {
		for _, p := range t.Partitions {
			if p.Err != nil {
				return nil, g.explain(fmt.Sprintf("describe producers of %s-%d", p.Topic, p.Partition), p.Err)
			}
			for _, ap := range p.ActiveProducers.Sorted() {
				rows = append(rows, producerRow{Topic: p.Topic, Partition: p.Partition, Leader: p.Leader, ProducerID: ap.ProducerID,
					ProducerEpoch: ap.ProducerEpoch, LastSequence: ap.LastSequence, LastTimestamp: ap.LastTimestamp,
					CoordinatorEpoch: ap.CoordinatorEpoch, CurrentTxnStartOffset: ap.CurrentTxnStartOffset})
			}
		}
	}
	sort.SliceStable(rows, func(i, j int) bool {
		return rows[i].Topic < rows[j].Topic || rows[i].Topic == rows[j].Topic && rows[i].Partition < rows[j].Partition
	})
	return rows, nil
}

// hangingTxn is an open transaction `transactions find-hanging` reports.
type hangingTxn struct {
	producerRow
	TransactionalID string `json:"transactional_id"` // "" when no coordinator knows the producer
	Reason          string `json:"reason"`
}

func newTxnFindHangingCmd(g *globals) *cobra.Command {
	var maxTimeout time.Duration
	cmd := &cobra.Command{
		Use:   "find-hanging TOPIC",
		Short: "Find transactions left open in a topic's partitions",
		Long: `Find the transactions open in TOPIC's partitions that no coordinator will end:
their producer is unknown to every coordinator, its coordinator has no transaction
open over the partition, or it was open longer than --max-transaction-timeout (the
cluster's transaction.max.timeout.ms) — a transaction the coordinator would have
aborted by then. Each holds the partition's last stable offset, stalling read_committed
consumers; end it with ` + "`samsa transactions abort`" + `.`,
		Example: `  samsa transactions find-hanging orders
  samsa transactions find-hanging orders -o json | jq -r '.hanging[] | "\(.partition) \(.current_txn_start_offset)"'`,
		Args: args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			adm, ctx, done, err := g.admin(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			hanging, err := findHanging(ctx, g, adm, a[0], maxTimeout)
			if err != nil {
				return err
			}
			return g.newOutput(cmd).render(struct {
				Hanging []hangingTxn `json:"hanging"`
			}{hanging}, func(w io.Writer) {
				if len(hanging) == 0 {
					fmt.Fprintln(w, "no hanging transaction")
					return
				}
				t := newTable(w, "PARTITION", "PRODUCER-ID", "EPOCH", "COORDINATOR-EPOCH", "TXN-START-OFFSET", "TRANSACTIONAL-ID", "REASON")
				for _, h := range hanging {
					t.row(h.Partition, h.ProducerID, h.ProducerEpoch, h.CoordinatorEpoch, h.CurrentTxnStartOffset, orDash(h.TransactionalID), h.Reason)
				}
				t.flush()
			})
		},
	}
	cmd.Flags().DurationVar(&maxTimeout, "max-transaction-timeout", 15*time.Minute, "the cluster's transaction.max.timeout.ms")
	return cmd
}

// findHanging looks for the hanging transactions of topic's partitions.
func findHanging(ctx context.Context, g *globals, adm *kadm.Client, topic string, maxTimeout time.Duration) ([]hangingTxn, error) {
	rows, err := describeProducers(ctx, g, adm, topic, -1)
	if err != nil {
		return nil, err
	}
	var open []producerRow
	var pids []int64
	for _, r := range rows {
		if r.CurrentTxnStartOffset >= 0 {
			open = append(open, r)
			pids = append(pids, r.ProducerID)
		}
	}
	hanging := []hangingTxn{}
	if len(open) == 0 {
		return hanging, nil
	}
	listed, err := adm.ListTransactions(ctx, pids, nil)
	if err != nil && len(listed) == 0 {
		return nil, g.explain("list transactions", err)
	}
	byPID := map[int64]kadm.ListedTransaction{}
	for _, l := range listed {
		byPID[l.ProducerID] = l
	}
	var ids []string
	for _, l := range listed {
		ids = append(ids, l.TxnID)
	}
	described := kadm.DescribedTransactions{}
	if len(ids) > 0 {
		described, _ = adm.DescribeTransactions(ctx, ids...)
	}
	for _, r := range open {
		h := hangingTxn{producerRow: r}
		l, known := byPID[r.ProducerID]
		d, ok := described[l.TxnID]
		switch {
		case !known:
			h.Reason = "no coordinator knows the producer"
		case !ok || d.Err != nil:
			continue // cannot tell
		case d.State != "Ongoing" && d.State != "PrepareCommit" && d.State != "PrepareAbort":
			h.TransactionalID, h.Reason = l.TxnID, "its coordinator has no transaction open ("+d.State+")"
		case !inTopicsSet(d.Topics, r.Topic, r.Partition):
			h.TransactionalID, h.Reason = l.TxnID, "its coordinator's open transaction does not include the partition"
		case d.StartTimestamp >= 0 && time.Since(time.UnixMilli(d.StartTimestamp)) > maxTimeout:
			h.TransactionalID, h.Reason = l.TxnID, "open for longer than transaction.max.timeout.ms"
		default:
			continue
		}
		hanging = append(hanging, h)
	}
	return hanging, nil
}

func inTopicsSet(s kadm.TopicsSet, topic string, partition int32) bool {
	_, ok := s[topic][partition]
	return ok
}

func newTxnAbortCmd(g *globals) *cobra.Command {
	var (
		topic                   string
		partition               int32
		startOffset, producerID int64
		producerEpoch           int16
		coordinatorEpoch        int32
	)
	cmd := &cobra.Command{
		Use:   "abort",
		Short: "Abort a hanging transaction in a partition",
		Long: `Write an abort marker for a transaction open in one partition, as Kafka's
kafka-transactions.sh abort does: name it by --start-offset (the first offset of the
transaction, as describe-producers and find-hanging show it), or by --producer-id,
--producer-epoch and --coordinator-epoch. The partition's last stable offset then
moves past it; its records are dropped for read_committed consumers. Only abort a
transaction whose producer and coordinator will not end it (find-hanging).`,
		Example: `  samsa transactions abort --topic orders --partition 2 --start-offset 1184
  samsa transactions abort --topic orders --partition 2 --producer-id 4001 --producer-epoch 3 --coordinator-epoch 0`,
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if topic == "" || partition < 0 {
				return usagef("--topic and --partition are required")
			}
			if (startOffset < 0) == (producerID < 0) {
				return usagef("give either --start-offset or --producer-id (with --producer-epoch and --coordinator-epoch)")
			}
			adm, ctx, done, err := g.admin(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			marker := kadm.TxnMarkers{ProducerID: producerID, ProducerEpoch: producerEpoch, CoordinatorEpoch: coordinatorEpoch,
				Topics: kadm.TopicsSet{topic: {partition: {}}}}
			if startOffset < 0 {
				detail, err := topicExists(ctx, g, adm, topic)
				if err != nil {
					return err
				}
				if err := hasPartition(detail, partition); err != nil {
					return err
				}
			} else {
				rows, err := describeProducers(ctx, g, adm, topic, partition)
				if err != nil {
					return err
				}
				found := false
				for _, r := range rows {
					if r.CurrentTxnStartOffset == startOffset {
						marker.ProducerID, marker.ProducerEpoch, marker.CoordinatorEpoch = r.ProducerID, r.ProducerEpoch, r.CoordinatorEpoch
						found = true
					}
				}
				if !found {
					return fmt.Errorf("no transaction starts at offset %d of %s-%d; see `samsa transactions describe-producers %s --partition %d`",
						startOffset, topic, partition, topic, partition)
				}
			}
			resps, err := adm.WriteTxnMarkers(ctx, marker)
			if err != nil {
				return g.explain("write the abort marker", err)
			}
			for _, r := range resps {
				for _, t := range r.Topics {
					for _, p := range t.Partitions {
						if p.Err != nil {
							return g.explain(fmt.Sprintf("abort the transaction of producer %d in %s-%d", marker.ProducerID, topic, partition), p.Err)
						}
					}
				}
			}
			result := struct {
				Topic         string `json:"topic"`
				Partition     int32  `json:"partition"`
				ProducerID    int64  `json:"producer_id"`
				ProducerEpoch int16  `json:"producer_epoch"`
				Aborted       bool   `json:"aborted"`
			}{topic, partition, marker.ProducerID, marker.ProducerEpoch, true}
			return g.newOutput(cmd).render(result, func(w io.Writer) {
				fmt.Fprintf(w, "aborted the transaction of producer %d (epoch %d) in %s-%d\n", marker.ProducerID, marker.ProducerEpoch, topic, partition)
			})
		},
	}
	f := cmd.Flags()
	f.StringVarP(&topic, "topic", "t", "", "the topic")
	f.Int32VarP(&partition, "partition", "p", -1, "the partition")
	f.Int64Var(&startOffset, "start-offset", -1, "the first offset of the transaction")
	f.Int64Var(&producerID, "producer-id", -1, "the transaction's producer id")
	f.Int16Var(&producerEpoch, "producer-epoch", 0, "its producer epoch")
	f.Int32Var(&coordinatorEpoch, "coordinator-epoch", 0, "the coordinator epoch of its last marker")
	return cmd
}
