package broker

// The transaction APIs: each handler checks the request, hands it to the transaction
// coordinator (internal/txn) or, for TxnOffsetCommit, to the group coordinator after
// the transaction coordinator verified it, and relays the answer.
//
//	AddPartitionsToTxn    (24) v0–5   v4+ batched, with VerifyOnly (KIP-890), from brokers
//	AddOffsetsToTxn       (25) v0–4
//	EndTxn                (26) v0–5   v5: transactions v2, the epoch bumps (KIP-890)
//	TxnOffsetCommit       (28) v0–6   member and generation checked from v3 (KIP-447;
//	                                  a consumer group's older member epoch for the
//	                                  partitions held since then, KIP-1251);
//	                                  v5 adds the group's partition itself (KIP-890);
//	                                  v6 names topics by id, and answers
//	                                  GROUP_ID_NOT_FOUND and STALE_MEMBER_EPOCH where
//	                                  v5 answers ILLEGAL_GENERATION (KIP-1319)
//	DescribeTransactions  (65) v0     an id named more than once is described once
//	ListTransactions      (66) v0–2   duration filter from v1, id pattern from v2
//
// AddOffsetsToTxn with an empty group id is INVALID_GROUP_ID. Kafka's KafkaApis does not
// check it: it adds the empty group's __consumer_offsets partition to the transaction,
// and the TxnOffsetCommit that follows is refused with INVALID_GROUP_ID.
//
// PRODUCER_FENCED is answered INVALID_PRODUCER_EPOCH to the versions before it existed
// (KIP-588), as Kafka does. InitProducerId is in init_producer_id.go, WriteTxnMarkers
// in write_txn_markers.go.
//
// Authorization (authorize.go), what Kafka's KafkaApis checks:
//
//	AddPartitionsToTxn v0–3  WRITE on the transactional id (every partition
//	                         TRANSACTIONAL_ID_AUTHORIZATION_FAILED), WRITE on each topic
//	                         (TOPIC_AUTHORIZATION_FAILED; an internal topic always is);
//	                         any refusal fails the whole transaction, the other
//	                         partitions OPERATION_NOT_ATTEMPTED
//	AddPartitionsToTxn v4+   CLUSTER_ACTION on the cluster (only brokers send it), a
//	                         single transaction included (CLUSTER_AUTHORIZATION_FAILED)
//	AddOffsetsToTxn          WRITE on the transactional id, then READ on the group
//	EndTxn                   WRITE on the transactional id
//	TxnOffsetCommit          WRITE on the transactional id, then READ on the group
//	                         (every partition refused), then READ on each topic (v6:
//	                         once its id is resolved, an unknown one UNKNOWN_TOPIC_ID)
//	DescribeTransactions     DESCRIBE on each transactional id; the partitions of topics
//	                         the principal may not DESCRIBE are left out
//	ListTransactions         only the transactional ids the principal may DESCRIBE

import (
	"regexp"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-streaming/samsa/internal/auth"
	"github.com/samsa-streaming/samsa/internal/metadata"
	"github.com/samsa-streaming/samsa/internal/protocol"
	"github.com/samsa-streaming/samsa/internal/txn"
)

func init() {
	register(kmsg.AddPartitionsToTxn, 0, 5, (*Broker).handleAddPartitionsToTxn)
	register(kmsg.AddOffsetsToTxn, 0, 4, (*Broker).handleAddOffsetsToTxn)
	register(kmsg.EndTxn, 0, 5, (*Broker).handleEndTxn)
	register(kmsg.TxnOffsetCommit, 0, 6, (*Broker).handleTxnOffsetCommit)
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
// when the transaction was refused before the coordinator saw it, refused.code for
// every partition when it is set, else TOPIC_AUTHORIZATION_FAILED for the partitions
// of refused.topics, UNKNOWN_TOPIC_OR_PARTITION for the unknown ones and
// OPERATION_NOT_ATTEMPTED for the others.
func (b *Broker) addResults(parts []txn.TopicPartition, codes []int16, refused txnRefusal) map[string][]kmsg.AddPartitionsToTxnResponseTopicPartition {
	img := b.image()
	out := map[string][]kmsg.AddPartitionsToTxnResponseTopicPartition{}
	for i, tp := range parts {
		rp := kmsg.NewAddPartitionsToTxnResponseTopicPartition()
		rp.Partition = tp.Partition
		if codes != nil {
			rp.ErrorCode = codes[i]
		} else if refused.code != 0 {
			rp.ErrorCode = refused.code
		} else if refused.topics[tp.Topic] {
			rp.ErrorCode = kerr.TopicAuthorizationFailed.Code
		} else if t, ok := img.Topic(tp.Topic); !ok || tp.Partition < 0 || int(tp.Partition) >= len(t.Partitions) {
			rp.ErrorCode = kerr.UnknownTopicOrPartition.Code
		} else {
			rp.ErrorCode = kerr.OperationNotAttempted.Code
		}
		out[tp.Topic] = append(out[tp.Topic], rp)
	}
	return out
}

// txnRefusal is why a client's AddPartitionsToTxn was refused before the coordinator
// saw it: code for every partition (the transactional id), or the topics it may not
// write.
type txnRefusal struct {
	code   int16
	topics map[string]bool
}

func (r txnRefusal) refused() bool { return r.code != 0 || len(r.topics) > 0 }

// authorizeAddPartitions checks a client's AddPartitionsToTxn (v0–3): WRITE on the
// transactional id, then WRITE on each topic. An internal topic is refused whatever
// the ACLs say, as Kafka does: no client adds it to a transaction this way.
func (b *Broker) authorizeAddPartitions(req *protocol.Request, id string, order []string) txnRefusal {
	if !b.authorize(req, auth.OpWrite, auth.ResourceTransactionalID, id) {
		return txnRefusal{code: kerr.TransactionalIDAuthorizationFailed.Code}
	}
	var r txnRefusal
	for _, topic := range order {
		if isInternalTopic(topic) || !b.authorize(req, auth.OpWrite, auth.ResourceTopic, topic) {
			if r.topics == nil {
				r.topics = map[string]bool{}
			}
			r.topics[topic] = true
		}
	}
	return r
}

func (b *Broker) handleAddPartitionsToTxn(req *protocol.Request) <-chan protocol.Response {
	r := req.Body.(*kmsg.AddPartitionsToTxnRequest)
	resp := r.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
	type one struct {
		id      string
		order   []string
		parts   []txn.TopicPartition
		codes   <-chan []int16
		refused txnRefusal
	}
	var txns []one
	if req.Version < 4 {
		topics, order := map[string][]int32{}, []string(nil)
		for _, t := range r.Topics {
			topics[t.Topic], order = append(topics[t.Topic], t.Partitions...), append(order, t.Topic)
		}
		parts, known := b.txnPartitions(topics, order)
		o := one{id: r.TransactionalID, order: order, parts: parts, refused: b.authorizeAddPartitions(req, r.TransactionalID, order)}
		if known && !o.refused.refused() {
			o.codes = b.txns.AddPartitions(r.TransactionalID, r.ProducerID, r.ProducerEpoch, parts, false, false)
		}
		txns = append(txns, o)
	} else if !b.authorizeCluster(req, auth.OpClusterAction) {
		// The batched versions are the brokers' own (a partition leader asking the
		// coordinator), whatever they carry: Kafka refuses the whole request.
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return reply(resp)
	} else {
		for _, rt := range r.Transactions {
			topics, order := map[string][]int32{}, []string(nil)
			for _, t := range rt.Topics {
				topics[t.Topic], order = append(topics[t.Topic], t.Partitions...), append(order, t.Topic)
			}
			parts, known := b.txnPartitions(topics, order)
			o := one{id: rt.TransactionalID, order: order, parts: parts}
			if known || rt.VerifyOnly {
				o.codes = b.txns.AddPartitions(rt.TransactionalID, rt.ProducerID, rt.ProducerEpoch, parts, rt.VerifyOnly, true)
			}
			txns = append(txns, o)
		}
	}
	out := make(chan protocol.Response, 1)
	b.answerLater(req, out, func() {
		for _, o := range txns {
			var codes []int16
			if o.codes != nil {
				codes = <-o.codes
				for i := range codes {
					codes[i] = fencedCode(codes[i], req.Version >= 2)
				}
			}
			results := b.addResults(o.parts, codes, o.refused)
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
	})
	return out
}

func (b *Broker) handleAddOffsetsToTxn(req *protocol.Request) <-chan protocol.Response {
	r := req.Body.(*kmsg.AddOffsetsToTxnRequest)
	resp := r.ResponseKind().(*kmsg.AddOffsetsToTxnResponse)
	switch {
	case !b.authorize(req, auth.OpWrite, auth.ResourceTransactionalID, r.TransactionalID):
		resp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
		return reply(resp)
	case !b.authorize(req, auth.OpRead, auth.ResourceGroup, r.Group):
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		return reply(resp)
	case r.Group == "":
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
	if !b.authorize(req, auth.OpWrite, auth.ResourceTransactionalID, r.TransactionalID) {
		resp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
		return reply(resp)
	}
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
		return reply(txnOffsetCommitErrors(r, r.Topics, code))
	}
	switch {
	case !b.authorize(req, auth.OpWrite, auth.ResourceTransactionalID, r.TransactionalID):
		return fail(kerr.TransactionalIDAuthorizationFailed.Code)
	case !b.authorize(req, auth.OpRead, auth.ResourceGroup, r.Group):
		return fail(kerr.GroupAuthorizationFailed.Code)
	}
	var refused []kmsg.TxnOffsetCommitResponseTopic
	if req.Version >= 6 {
		// Offsets are kept by topic name, as in Kafka: the ids are resolved first, and
		// a topic whose id names none is UNKNOWN_TOPIC_ID (KIP-1319).
		img := b.image()
		resolved := *r
		resolved.Topics = make([]kmsg.TxnOffsetCommitRequestTopic, 0, len(r.Topics))
		var unknown []kmsg.TxnOffsetCommitRequestTopic
		for _, t := range r.Topics {
			if topic, ok := img.TopicByID(metadata.TopicID(t.TopicID)); ok {
				t.Topic = topic.Name
				resolved.Topics = append(resolved.Topics, t)
			} else {
				unknown = append(unknown, t)
			}
		}
		refused = txnOffsetCommitErrors(r, unknown, kerr.UnknownTopicID.Code).Topics
		r = &resolved
	}
	var denied []kmsg.TxnOffsetCommitRequestTopic
	if b.authz != nil {
		keep := *r
		keep.Topics = nil
		for _, t := range r.Topics {
			if b.authorize(req, auth.OpRead, auth.ResourceTopic, t.Topic) {
				keep.Topics = append(keep.Topics, t)
			} else {
				denied = append(denied, t)
			}
		}
		if len(denied) > 0 && len(keep.Topics) == 0 {
			return withTopics(fail(kerr.TopicAuthorizationFailed.Code), refused)
		}
		r = &keep
	}
	refused = append(refused, txnOffsetCommitErrors(r, denied, kerr.TopicAuthorizationFailed.Code).Topics...)
	if len(r.Topics) == 0 && len(refused) > 0 {
		// Nothing left to commit: answered without the coordinators, as Kafka does.
		resp := r.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
		resp.Topics = refused
		return reply(resp)
	}
	if code := b.groups.IsCoordinator(r.Group); code != 0 {
		return withTopics(fail(code), refused)
	}
	add := req.Version >= 5
	var guard uint64
	if add || b.cfg.TransactionPartitionVerificationEnable {
		tp := txn.TopicPartition{Topic: offsetsTopic, Partition: b.groups.PartitionFor(r.Group)}
		if part := b.replicas.Get(tp.Topic, tp.Partition); part != nil && !add {
			// As verifyProduce does: taken before the verification, so that an end
			// marker appended meanwhile makes the offsets' append fail rather than
			// open a transaction no marker closes. (v5 ends each transaction with a
			// newer epoch, which refuses a late append by itself.)
			guard, _ = part.Log.TxnVerification(r.ProducerID, r.ProducerEpoch)
		}
		ctx, cancel := b.requestContext(0)
		code := b.verifyTxnPartition(ctx, r.TransactionalID, r.ProducerID, r.ProducerEpoch, tp, add)
		cancel()
		switch code {
		case 0:
		case kerr.InvalidTxnState.Code, kerr.ProducerFenced.Code, kerr.InvalidProducerIDMapping.Code, kerr.ConcurrentTransactions.Code:
			return withTopics(fail(fencedCode(code, req.Version >= 3)), refused)
		default:
			return withTopics(fail(kerr.CoordinatorNotAvailable.Code), refused)
		}
	}
	return withTopics(relayGroupResponse(b.groups.TxnOffsetCommit(r, guard)), refused)
}

// txnOffsetCommitErrors answers code for every partition of topics.
func txnOffsetCommitErrors(r *kmsg.TxnOffsetCommitRequest, topics []kmsg.TxnOffsetCommitRequestTopic, code int16) *kmsg.TxnOffsetCommitResponse {
	resp := r.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
	for _, t := range topics {
		rt := kmsg.NewTxnOffsetCommitResponseTopic()
		rt.Topic, rt.TopicID = t.Topic, t.TopicID
		for _, p := range t.Partitions {
			rp := kmsg.NewTxnOffsetCommitResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, code
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

// withTopics adds the topics refused before the handler ran to its TxnOffsetCommit
// answer.
func withTopics(ch <-chan protocol.Response, refused []kmsg.TxnOffsetCommitResponseTopic) <-chan protocol.Response {
	if len(refused) == 0 {
		return ch
	}
	out := make(chan protocol.Response, 1)
	go func() {
		resp, ok := <-ch
		if ok {
			if body, isCommit := resp.Body.(*kmsg.TxnOffsetCommitResponse); isCommit {
				body.Topics = append(body.Topics, refused...)
			}
		}
		out <- resp
	}()
	return out
}

func (b *Broker) handleDescribeTransactions(req *protocol.Request) <-chan protocol.Response {
	r := req.Body.(*kmsg.DescribeTransactionsRequest)
	resp := r.ResponseKind().(*kmsg.DescribeTransactionsResponse)
	// An id named again is described once, as a group is (distinctNames): each
	// mention would otherwise cost every partition of the transaction again.
	for _, id := range distinctNames(r.TransactionalIDs) {
		st := kmsg.NewDescribeTransactionsResponseTransactionState()
		st.TransactionalID = id
		if !b.authorize(req, auth.OpDescribe, auth.ResourceTransactionalID, id) {
			st.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
			resp.TransactionStates = append(resp.TransactionStates, st)
			continue
		}
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
				if !b.allowed(req, auth.OpDescribe, auth.ResourceTopic, p.Topic) {
					continue // Kafka leaves out what the principal may not describe
				}
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
		if !b.allowed(req, auth.OpDescribe, auth.ResourceTransactionalID, m.TransactionalID) {
			continue
		}
		ts := kmsg.NewListTransactionsResponseTransactionState()
		ts.TransactionalID, ts.ProducerID, ts.TransactionState = m.TransactionalID, m.ProducerID, m.State.String()
		resp.TransactionStates = append(resp.TransactionStates, ts)
	}
	return reply(resp)
}
