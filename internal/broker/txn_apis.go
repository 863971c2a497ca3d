package broker

// The transaction APIs: each handler checks the request, hands it to the transaction
// coordinator (internal/txn) or, for TxnOffsetCommit, to the group coordinator after
// the transaction coordinator verified it, and relays the answer.
//
//	AddPartitionsToTxn    (24) v0–5   v4+ batched, with VerifyOnly (KIP-890), from brokers
//	AddOffsetsToTxn       (25) v0–4
//	EndTxn                (26) v0–5   v5: transactions v2, the epoch bumps (KIP-890)
//	TxnOffsetCommit       (28) v0–5   member and generation checked from v3 (KIP-447);
//	                                  v5 adds the group's partition itself (KIP-890)
//	DescribeTransactions  (65) v0
//	ListTransactions      (66) v0–2   duration filter from v1, id pattern from v2
//
// PRODUCER_FENCED is answered INVALID_PRODUCER_EPOCH to the versions before it existed
// (KIP-588), as Kafka does. InitProducerId is in init_producer_id.go, WriteTxnMarkers
// in write_txn_markers.go.

import (
	"regexp"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-streaming/samsa/internal/protocol"
	"github.com/samsa-streaming/samsa/internal/txn"
)

func init() {
	register(kmsg.AddPartitionsToTxn, 0, 5, (*Broker).handleAddPartitionsToTxn)
	register(kmsg.AddOffsetsToTxn, 0, 4, (*Broker).handleAddOffsetsToTxn)
	register(kmsg.EndTxn, 0, 5, (*Broker).handleEndTxn)
	register(kmsg.TxnOffsetCommit, 0, 5, (*Broker).handleTxnOffsetCommit)
	register(kmsg.DescribeTransactions, 0, 0, (*Broker).handleDescribeTransactions)
	register(kmsg.ListTransactions, 0, 2, (*Broker).handleListTransactions)
}

// fencedCode answers PRODUCER_FENCED as INVALID_PRODUCER_EPOCH to a version that does
// not know it.
func fencedCode(code int16, knowsFenced bool) int16 {
	if code == kerr.ProducerFenced.Code && !knowsFenced {
		return kerr.InvalidProducerEpoch.Code
	}
	return code
}

// relayTxn turns a coordinator answer into the server's response.
func relayTxn[T any](in <-chan T, fill func(T) kmsg.Response) <-chan protocol.Response {
	out := make(chan protocol.Response, 1)
	go func() { out <- protocol.Response{Body: fill(<-in)} }()
	return out
}

// txnPartitions turns a request's topics into the transaction's partitions, in order.
// Partitions of topics unknown here answer UNKNOWN_TOPIC_OR_PARTITION and, as in
// Kafka, the others OPERATION_NOT_ATTEMPTED: known reports whether all exist.
func (b *Broker) txnPartitions(topics map[string][]int32, order []string) (parts []txn.TopicPartition, known bool) {
	img := b.image()
	known = true
	for _, name := range order {
		t, ok := img.Topic(name)
		for _, p := range topics[name] {
			if !ok || p < 0 || int(p) >= len(t.Partitions) {
				known = false
			}
			parts = append(parts, txn.TopicPartition{Topic: name, Partition: p})
		}
	}
	return parts, known
}

// addResults answers one transaction's partitions: codes in the order of parts, or,
// when some partition is unknown, UNKNOWN_TOPIC_OR_PARTITION for those and
// OPERATION_NOT_ATTEMPTED for the others.
func (b *Broker) addResults(parts []txn.TopicPartition, codes []int16) map[string][]kmsg.AddPartitionsToTxnResponseTopicPartition {
	img := b.image()
	out := map[string][]kmsg.AddPartitionsToTxnResponseTopicPartition{}
	for i, tp := range parts {
		rp := kmsg.NewAddPartitionsToTxnResponseTopicPartition()
		rp.Partition = tp.Partition
		if codes != nil {
			rp.ErrorCode = codes[i]
		} else if t, ok := img.Topic(tp.Topic); !ok || tp.Partition < 0 || int(tp.Partition) >= len(t.Partitions) {
			rp.ErrorCode = kerr.UnknownTopicOrPartition.Code
		} else {
			rp.ErrorCode = kerr.OperationNotAttempted.Code
		}
		out[tp.Topic] = append(out[tp.Topic], rp)
	}
	return out
}

func (b *Broker) handleAddPartitionsToTxn(req *protocol.Request) <-chan protocol.Response {
	r := req.Body.(*kmsg.AddPartitionsToTxnRequest)
	resp := r.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
	type one struct {
		id    string
		order []string
		parts []txn.TopicPartition
		codes <-chan []int16
	}
	var txns []one
	if req.Version < 4 {
		topics, order := map[string][]int32{}, []string(nil)
		for _, t := range r.Topics {
			topics[t.Topic], order = append(topics[t.Topic], t.Partitions...), append(order, t.Topic)
		}
		parts, known := b.txnPartitions(topics, order)
		o := one{id: r.TransactionalID, order: order, parts: parts}
		if known {
			o.codes = b.txns.AddPartitions(r.TransactionalID, r.ProducerID, r.ProducerEpoch, parts, false)
		}
		txns = append(txns, o)
	} else {
		for _, rt := range r.Transactions {
			topics, order := map[string][]int32{}, []string(nil)
			for _, t := range rt.Topics {
				topics[t.Topic], order = append(topics[t.Topic], t.Partitions...), append(order, t.Topic)
			}
			parts, known := b.txnPartitions(topics, order)
			o := one{id: rt.TransactionalID, order: order, parts: parts}
			if known || rt.VerifyOnly {
				o.codes = b.txns.AddPartitions(rt.TransactionalID, rt.ProducerID, rt.ProducerEpoch, parts, rt.VerifyOnly)
			}
			txns = append(txns, o)
		}
	}
	out := make(chan protocol.Response, 1)
	go func() {
		for _, o := range txns {
			var codes []int16
			if o.codes != nil {
				codes = <-o.codes
				for i := range codes {
					codes[i] = fencedCode(codes[i], req.Version >= 2)
				}
			}
			results := b.addResults(o.parts, codes)
			var topics []kmsg.AddPartitionsToTxnResponseTransactionTopic
			seen := map[string]bool{}
			for _, name := range o.order {
				if seen[name] {
					continue
				}
				seen[name] = true
				t := kmsg.NewAddPartitionsToTxnResponseTransactionTopic()
				t.Topic = name
				for _, p := range results[name] {
					t.Partitions = append(t.Partitions, kmsg.AddPartitionsToTxnResponseTransactionTopicPartition{Partition: p.Partition, ErrorCode: p.ErrorCode})
				}
				topics = append(topics, t)
			}
			if req.Version >= 4 {
				rt := kmsg.NewAddPartitionsToTxnResponseTransaction()
				rt.TransactionalID, rt.Topics = o.id, topics
				resp.Transactions = append(resp.Transactions, rt)
				continue
			}
			for _, t := range topics {
				rt := kmsg.NewAddPartitionsToTxnResponseTopic()
				rt.Topic = t.Topic
				for _, p := range t.Partitions {
					rt.Partitions = append(rt.Partitions, kmsg.AddPartitionsToTxnResponseTopicPartition{Partition: p.Partition, ErrorCode: p.ErrorCode})
				}
				resp.Topics = append(resp.Topics, rt)
			}
		}
		out <- protocol.Response{Body: resp}
	}()
	return out
}

func (b *Broker) handleAddOffsetsToTxn(req *protocol.Request) <-chan protocol.Response {
	r := req.Body.(*kmsg.AddOffsetsToTxnRequest)
	resp := r.ResponseKind().(*kmsg.AddOffsetsToTxnResponse)
	if r.Group == "" {
		resp.ErrorCode = kerr.InvalidGroupID.Code
		return reply(resp)
	}
	return relayTxn(b.txns.AddOffsets(r.TransactionalID, r.ProducerID, r.ProducerEpoch, r.Group), func(code int16) kmsg.Response {
		resp.ErrorCode = fencedCode(code, req.Version >= 2)
		return resp
	})
}

func (b *Broker) handleEndTxn(req *protocol.Request) <-chan protocol.Response {
	r := req.Body.(*kmsg.EndTxnRequest)
	resp := r.ResponseKind().(*kmsg.EndTxnResponse)
	ch := b.txns.EndTxn(r.TransactionalID, r.ProducerID, r.ProducerEpoch, r.Commit, req.Version >= 5)
	return relayTxn(ch, func(res txn.ProducerResult) kmsg.Response {
		resp.ErrorCode = fencedCode(res.Code, req.Version >= 2)
		resp.ProducerID, resp.ProducerEpoch = res.ProducerID, res.Epoch
		return resp
	})
}

// handleTxnOffsetCommit verifies with the transaction coordinator that the group's
// __consumer_offsets partition is in the transaction (v5+, transactions v2: adds it),
// then hands the commit to the group coordinator.
func (b *Broker) handleTxnOffsetCommit(req *protocol.Request) <-chan protocol.Response {
	r := req.Body.(*kmsg.TxnOffsetCommitRequest)
	fail := func(code int16) <-chan protocol.Response {
		resp := r.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
		for _, t := range r.Topics {
			rt := kmsg.NewTxnOffsetCommitResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewTxnOffsetCommitResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p.Partition, code
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return reply(resp)
	}
	if code := b.groups.IsCoordinator(r.Group); code != 0 {
		return fail(code)
	}
	add := req.Version >= 5
	if add || b.cfg.TransactionPartitionVerificationEnable {
		ctx, cancel := b.requestContext(0)
		tp := txn.TopicPartition{Topic: offsetsTopic, Partition: b.groups.PartitionFor(r.Group)}
		code := b.verifyTxnPartition(ctx, r.TransactionalID, r.ProducerID, r.ProducerEpoch, tp, add)
		cancel()
		switch code {
		case 0:
		case kerr.InvalidTxnState.Code, kerr.ProducerFenced.Code, kerr.InvalidProducerIDMapping.Code, kerr.ConcurrentTransactions.Code:
			return fail(fencedCode(code, req.Version >= 3))
		default:
			return fail(kerr.CoordinatorNotAvailable.Code)
		}
	}
	return relayGroupResponse(b.groups.TxnOffsetCommit(r))
}

func (b *Broker) handleDescribeTransactions(req *protocol.Request) <-chan protocol.Response {
	r := req.Body.(*kmsg.DescribeTransactionsRequest)
	resp := r.ResponseKind().(*kmsg.DescribeTransactionsResponse)
	for _, id := range r.TransactionalIDs {
		st := kmsg.NewDescribeTransactionsResponseTransactionState()
		st.TransactionalID = id
		m, code := b.txns.Describe(id)
		st.ErrorCode = code
		if code == 0 {
			st.State = m.State.String()
			st.TimeoutMillis = int32(m.Timeout.Milliseconds())
			st.StartTimestamp = -1
			if !m.Started.IsZero() {
				st.StartTimestamp = m.Started.UnixMilli()
			}
			st.ProducerID, st.ProducerEpoch = m.ProducerID, m.Epoch
			for _, p := range m.Partitions {
				if n := len(st.Topics); n == 0 || st.Topics[n-1].Topic != p.Topic {
					t := kmsg.NewDescribeTransactionsResponseTransactionStateTopic()
					t.Topic = p.Topic
					st.Topics = append(st.Topics, t)
				}
				t := &st.Topics[len(st.Topics)-1]
				t.Partitions = append(t.Partitions, p.Partition)
			}
		}
		resp.TransactionStates = append(resp.TransactionStates, st)
	}
	return reply(resp)
}

func (b *Broker) handleListTransactions(req *protocol.Request) <-chan protocol.Response {
	r := req.Body.(*kmsg.ListTransactionsRequest)
	resp := r.ResponseKind().(*kmsg.ListTransactionsResponse)
	f := txn.ListFilter{ProducerIDs: r.ProducerIDFilters, MinDuration: -1}
	for _, name := range r.StateFilters {
		if s, ok := txn.ParseState(name); ok {
			f.States = append(f.States, s)
		} else {
			resp.UnknownStateFilters = append(resp.UnknownStateFilters, name)
		}
	}
	if len(r.StateFilters) > 0 && len(f.States) == 0 {
		return reply(resp) // only unknown states: nothing matches
	}
	if req.Version >= 1 && r.DurationFilterMillis >= 0 {
		f.MinDuration = time.Duration(r.DurationFilterMillis) * time.Millisecond
	}
	if req.Version >= 2 && r.TransactionalIDPattern != nil && *r.TransactionalIDPattern != "" {
		re, err := regexp.Compile(*r.TransactionalIDPattern)
		if err != nil {
			resp.ErrorCode = kerr.InvalidRegularExpression.Code
			return reply(resp)
		}
		f.Pattern = re
	}
	list, code := b.txns.List(f)
	resp.ErrorCode = code
	for _, m := range list {
		ts := kmsg.NewListTransactionsResponseTransactionState()
		ts.TransactionalID, ts.ProducerID, ts.TransactionState = m.TransactionalID, m.ProducerID, m.State.String()
		resp.TransactionStates = append(resp.TransactionStates, ts)
	}
	return reply(resp)
}
