package broker

// Produce (key 0), versions 3–13 (v12, KIP-890, has v11's schema; v13 names topics by
// id).
//
// Each partition's records must be exactly one magic-v2 record batch (Kafka's rule for
// v3+). The batch is validated in one pass (size, CRC-32C, header fields, and a walk of
// its records, a compressed batch decompressed into a pooled buffer for it, as Kafka's
// LogValidator does, so that its header cannot claim records it does not hold; the
// topic's per-record checks — keys on compacted topics, timestamp bounds, a
// compression.type to re-encode into — decode it again), then
// appended byte for byte by the partition's log,
// which assigns offsets and checks idempotent-producer sequences. acks=0 sends no
// response (the connection is closed if a partition failed, so the client notices, as
// Kafka does); acks=1 answers after the local append; acks=all waits until the high
// watermark covers the batch, up to the request timeout, and refuses the write with
// NOT_ENOUGH_REPLICAS when the ISR is smaller than min.insync.replicas. Any other acks
// is INVALID_REQUIRED_ACKS for each partition that exists, nothing appended.
//
// The server streams requests (protocol.ProduceHandler): each partition's batch is
// validated and appended as it arrives, and the response and its slices are pooled, so
// that the steady state allocates nothing per request. A request found malformed part
// way (the connection is then closed without a response) keeps the batches appended
// before that point; Kafka reads a request whole first. The client retries them as
// after any lost response (idempotent producers are deduplicated).
//
// With an authorizer, each topic needs WRITE (TOPIC_AUTHORIZATION_FAILED for its
// partitions otherwise). A request carrying transactional batches needs a
// transactional id, and with an authorizer WRITE on it: otherwise every partition is
// TRANSACTIONAL_ID_AUTHORIZATION_FAILED, as in Kafka (which decides it before any
// partition; here it is decided at the first transactional batch, see
// checkTransactionalID). A topic named by id
// (v13) is resolved first, as in Kafka: an id the metadata image does not hold is
// UNKNOWN_TOPIC_ID whatever the ACLs, a known one needs WRITE on the topic it names.
//
// Transactional batches (txn_verify.go): the batch that starts a producer's transaction
// in a partition is verified with the transaction coordinator first (KIP-890; from v12,
// transactions v2, the leader's request adds the partition to the transaction);
// control batches are the coordinators' and are refused with INVALID_RECORD. Only
// those requests pay for it: the non-transactional path is unchanged.
//
// Differences from Kafka: internal topics refuse client writes with
// INVALID_TOPIC_EXCEPTION.

import (
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-streaming/samsa/internal/auth"
	"github.com/samsa-streaming/samsa/internal/metadata"
	"github.com/samsa-streaming/samsa/internal/protocol"
	"github.com/samsa-streaming/samsa/internal/record"
	"github.com/samsa-streaming/samsa/internal/replica"
	"github.com/samsa-streaming/samsa/internal/storage"
)

func init() {
	register(kmsg.Produce, 3, 13, (*Broker).handleProduce)
	produceRequests.New = newProduceRequest
}

// ReusableFrames reports whether the server may reuse a request's frame as soon as
// Handle returns. Produce may: its records are validated and appended (copied into
// the log) before Handle returns, and nothing of the request is kept — recompression
// and key checks work on copies, topic names are copied by the decoder. (The server
// streams Produce requests through StartProduce; frames are read whole only for
// versions it does not stream.)
func ReusableFrames(key int16) bool { return key == int16(kmsg.Produce) }

// handleProduce serves a Produce request decoded whole, through the same steps as a
// streamed one.
func (b *Broker) handleProduce(req *protocol.Request) <-chan protocol.Response {
	r := req.Body.(*kmsg.ProduceRequest)
	pr := b.StartProduce(req, protocol.ProduceHeader{
		TransactionalID: r.TransactionID, Acks: r.Acks, TimeoutMillis: r.TimeoutMillis, Topics: len(r.Topics),
	})
	for i := range r.Topics {
		rt := &r.Topics[i]
		pr.Topic(rt.Topic, rt.TopicID, len(rt.Partitions))
		for j := range rt.Partitions {
			pr.Partition(rt.Partitions[j].Partition, rt.Partitions[j].Records)
		}
	}
	resp, later := pr.Finish()
	if later != nil {
		return later
	}
	return protocol.Ready(resp)
}

// produceRequest is one Produce request being served: each partition's batch is
// validated and appended as it arrives (Partition), and Finish answers — at once, or
// once the high watermark covers every acks=all batch. Requests are pooled with their
// response, whose slices keep their capacity, so that the steady state of produce
// allocates nothing per request; one goes back to the pool when its response has been
// written.
type produceRequest struct {
	b       *Broker
	written func() // release, made once per pooled request (a method value allocates)
	version int16
	acks    int16
	timeout int32
	txnID   *string
	now     time.Time
	resp    kmsg.ProduceResponse
	pending []pendingAck
	failed  bool
	// topicErr answers every partition of the current topic (an unknown topic id,
	// a topic the principal may not write).
	topicErr error
	// topicID is the id of the current topic in the image (zero if it has none): a
	// local partition of another id is not written (Broker.topicReplica).
	topicID metadata.TopicID
	// The request's API, version, client and principal (for authorization,
	// authorize.go, and logs). txnErr answers every partition from the first
	// transactional batch on when the request has no transactional id or one the
	// principal may not write (nil otherwise); txnChecked is set once that is decided.
	who        protocol.Request
	txnErr     error
	txnChecked bool
	// throttle is how long the client must wait for its producer_byte_rate quota.
	throttle time.Duration
}

// pendingAck is a partition whose acks=all response waits for the high watermark: the
// partition's index in the response's topic.
type pendingAck struct {
	partition    *replica.Partition
	needHW       int64
	epoch        int32 // the leader epoch the batch was appended in
	topic, index int
}

// produceRequests holds idle produceRequests (New is set in init: release puts back).
var produceRequests sync.Pool

func newProduceRequest() any {
	pr := new(produceRequest)
	pr.written = pr.release
	return pr
}

// StartProduce implements protocol.ProduceHandler.
func (b *Broker) StartProduce(req *protocol.Request, h protocol.ProduceHeader) protocol.ProduceStream {
	pr := produceRequests.Get().(*produceRequest)
	topics := pr.resp.Topics[:0]
	pr.resp = kmsg.ProduceResponse{Topics: topics}
	pr.resp.Default()
	pr.resp.SetVersion(req.Version)
	pr.b, pr.version, pr.acks, pr.timeout, pr.now = b, req.Version, h.Acks, h.TimeoutMillis, b.clock.Now()
	pr.txnID = h.TransactionalID
	pr.pending, pr.failed = pr.pending[:0], false
	pr.txnErr, pr.txnChecked, pr.throttle = nil, false, 0
	if b.quotas.Enabled() {
		pr.throttle = b.quotas.Record(auth.ProducerByteRate, req.Principal.Name, req.ClientID, float64(req.Size), pr.now)
		pr.resp.ThrottleMillis = int32(pr.throttle / time.Millisecond)
	}
	pr.who = protocol.Request{Key: req.Key, Version: req.Version, Principal: req.Principal, ClientAddr: req.ClientAddr}
	return pr
}

// Topic implements protocol.ProduceStream. A topic named by id (v13) is looked up in
// the metadata image; an id it does not hold is UNKNOWN_TOPIC_ID for each partition.
// A topic named by name is written only if its local partitions are of the topic the
// image has under that name.
func (pr *produceRequest) Topic(name string, id [16]byte, partitions int) {
	pr.topicErr, pr.topicID = nil, metadata.TopicID{}
	if pr.version >= 13 {
		if t, ok := pr.b.image().TopicByID(metadata.TopicID(id)); ok {
			name, pr.topicID = t.Name, t.ID
		} else {
			pr.topicErr = kerr.UnknownTopicID
		}
	} else if t, ok := pr.b.image().Topic(name); ok {
		pr.topicID = t.ID
	}
	n := len(pr.resp.Topics)
	if n < cap(pr.resp.Topics) {
		pr.resp.Topics = pr.resp.Topics[:n+1]
	} else {
		pr.resp.Topics = append(pr.resp.Topics, kmsg.ProduceResponseTopic{})
	}
	t := &pr.resp.Topics[n]
	parts := t.Partitions[:0]
	if cap(parts) < partitions {
		parts = make([]kmsg.ProduceResponseTopicPartition, 0, partitions)
	}
	*t = kmsg.NewProduceResponseTopic()
	t.Topic, t.TopicID, t.Partitions = name, id, parts
	if pr.topicErr == nil && pr.b.authz != nil && !pr.b.authorize(&pr.who, auth.OpWrite, auth.ResourceTopic, name) {
		pr.topicErr = kerr.TopicAuthorizationFailed
	}
}

// Partition implements protocol.ProduceStream: it validates and appends one
// partition's batch and records the outcome in the response.
func (pr *produceRequest) Partition(partition int32, records []byte) {
	t := &pr.resp.Topics[len(pr.resp.Topics)-1]
	t.Partitions = append(t.Partitions, kmsg.NewProduceResponseTopicPartition())
	sp := &t.Partitions[len(t.Partitions)-1]
	sp.Partition, sp.BaseOffset, sp.LogAppendTime = partition, -1, -1
	b := pr.b
	var p *replica.Partition
	var info storage.AppendInfo
	if !pr.txnChecked && transactionalBatch(records) {
		pr.checkTransactionalID()
	}
	err := pr.txnErr
	if err == nil {
		err = pr.topicErr
	}
	if err == nil {
		p, info, err = b.produceOne(pr, t.Topic, partition, records, sp)
	}
	if err != nil {
		pr.failed = true
		sp.ErrorCode = errorCode(err)
		b.metrics.ProduceError(sp.ErrorCode)
		if pr.version >= 8 {
			sp.ErrorMessage = errorMessage(err)
		}
		return
	}
	if pr.acks == -1 {
		pa := pendingAck{partition: p, needHW: info.LastOffset + 1, epoch: info.LeaderEpoch,
			topic: len(pr.resp.Topics) - 1, index: len(t.Partitions) - 1}
		if !pr.acked(pa) {
			pr.pending = append(pr.pending, pa)
		}
	}
}

// transactionalBatch reports whether records starts with a transactional v2 batch
// (Produce v3+ carries one batch per partition; Validate checks the rest).
func transactionalBatch(records []byte) bool {
	h, err := record.ParseHeader(records)
	return err == nil && h.IsTransactional()
}

// checkTransactionalID decides, at the request's first transactional batch, whether
// it may write transactionally: as Kafka's handleProduceRequest, a request without a
// transactional id, or with one the principal may not write, is
// TRANSACTIONAL_ID_AUTHORIZATION_FAILED for every partition. Kafka decides it before
// any partition; a request read as it streams in decides it at the first
// transactional batch, so a plain batch before that one in the same request is
// written (no client sends such a request: one producer's batches are all
// transactional or none are).
func (pr *produceRequest) checkTransactionalID() {
	pr.txnChecked = true
	switch {
	case pr.txnID == nil:
		pr.txnErr = errNoTransactionalID
	case pr.b.authz != nil && !pr.b.authorize(&pr.who, auth.OpWrite, auth.ResourceTransactionalID, *pr.txnID):
		pr.txnErr = kerr.TransactionalIDAuthorizationFailed
	}
}

// errNoTransactionalID answers a transactional batch in a request without a
// transactional id.
var errNoTransactionalID = fmt.Errorf("a transactional batch in a Produce request without a transactional id: set the transactional id of the request: %w", kerr.TransactionalIDAuthorizationFailed)

// acked reports whether an acks=all batch is done: the high watermark covers it (the
// partition's answer is then an error if the ISR fell below min.insync.replicas
// meanwhile), or the partition is no longer led here in the batch's epoch.
func (pr *produceRequest) acked(pa pendingAck) bool {
	err := pa.partition.AckState(pa.epoch)
	if !errors.Is(err, replica.ErrNotLeader) && pa.partition.HighWatermark() < pa.needHW {
		return false
	}
	if err != nil {
		sp := &pr.resp.Topics[pa.topic].Partitions[pa.index]
		sp.ErrorCode = errorCode(err)
		pr.b.metrics.ProduceError(sp.ErrorCode)
		if pr.version >= 8 {
			sp.ErrorMessage = errorMessage(err)
		}
	}
	return true
}

// Finish implements protocol.ProduceStream.
func (pr *produceRequest) Finish() (protocol.Response, <-chan protocol.Response) {
	switch {
	case pr.acks == 0:
		return protocol.Response{None: true, Close: pr.failed, Written: pr.written, Throttle: pr.throttle}, nil
	case len(pr.pending) == 0:
		return protocol.Response{Body: &pr.resp, Written: pr.written, Throttle: pr.throttle}, nil
	}
	return protocol.Response{}, pr.b.waitForAcks(pr)
}

// Abort implements protocol.ProduceStream.
func (pr *produceRequest) Abort() { pr.release() }

// release returns the request to the pool.
func (pr *produceRequest) release() {
	clear(pr.pending)
	pr.b, pr.txnID = nil, nil
	produceRequests.Put(pr)
}

// produceOne validates and appends one partition's batch of request pr, filling sp on
// success. It returns the partition and where the batch went.
func (b *Broker) produceOne(pr *produceRequest, topic string, partition int32, records []byte, sp *kmsg.ProduceResponseTopicPartition) (*replica.Partition, storage.AppendInfo, error) {
	acks, now := pr.acks, pr.now
	if isInternalTopic(topic) {
		return nil, storage.AppendInfo{}, kerr.InvalidTopicException
	}
	p := b.topicReplica(topic, pr.topicID, partition)
	if p == nil {
		return nil, storage.AppendInfo{}, kerr.UnknownTopicOrPartition
	}
	settings := p.Settings()
	if len(records) == 0 {
		return nil, storage.AppendInfo{}, kerr.InvalidRecord
	}
	if n, err := record.NextBatchSize(records); err == nil && n < len(records) {
		// More than one batch: Produce v3+ carries exactly one per partition.
		return nil, storage.AppendInfo{}, kerr.InvalidRecord
	}
	if acks != -1 && acks != 0 && acks != 1 {
		// As Kafka's ReplicaManager: after the request's own checks, before the
		// batch is validated and appended.
		return nil, storage.AppendInfo{}, kerr.InvalidRequiredAcks
	}
	if err := p.CheckAppend(acks == -1); err != nil {
		// As Kafka's Partition.appendRecordsToLeader: a replica that does not lead, or
		// leads short of min.insync.replicas for acks=all, says so before the batch
		// meets its topic settings. A client whose metadata still names this broker
		// the leader refreshes it and retries at the leader; told MESSAGE_TOO_LARGE by
		// a follower's limit, it would fail the record for good.
		return nil, storage.AppendInfo{}, err
	}
	opts := record.ValidateOptions{MaxBatchBytes: settings.MaxMessageBytes, SetMaxTimestamp: true}
	if settings.RequireKeys || settings.Timestamps != nil {
		opts.Check = recordRules(now, settings.RequireKeys, settings.Timestamps)
	}
	hdr, err := record.Validate(records, opts)
	if err != nil {
		return nil, storage.AppendInfo{}, err
	}
	var txnOpts storage.AppendOptions
	switch {
	case hdr.IsControl():
		return nil, storage.AppendInfo{}, errClientControlBatch
	case hdr.IsTransactional():
		if txnOpts, err = b.verifyProduce(p, &hdr, pr.txnID, pr.version, pr.timeout); err != nil {
			return nil, storage.AppendInfo{}, err
		}
	}
	if settings.Recompress && hdr.Compression() != settings.Compression {
		if records, err = recompress(records, &hdr, settings.Compression, settings.CompressionLevel); err != nil {
			return nil, storage.AppendInfo{}, err
		}
		// Checked again, as Kafka does: a batch may grow when the topic's codec
		// compresses less than the producer's, or not at all.
		if limit := settings.MaxMessageBytes; limit > 0 && len(records) > limit {
			return nil, storage.AppendInfo{}, fmt.Errorf("%w: the batch is %d bytes once recompressed with the topic's compression.type %s, over its max.message.bytes %d: produce smaller batches or raise max.message.bytes",
				record.ErrTooLarge, len(records), settings.Compression, limit)
		}
	}
	info, err := p.AppendAsLeaderTxn(records, acks == -1, now, txnOpts)
	if err != nil {
		b.storageFailed(p, err)
		return nil, storage.AppendInfo{}, err
	}
	b.metrics.ProducedBatch(topic, int(hdr.NumRecords), len(records))
	sp.BaseOffset = info.BaseOffset
	sp.LogAppendTime = info.LogAppendTime
	sp.LogStartOffset = info.LogStartOffset
	return p, info, nil
}

// errClientControlBatch refuses a control batch from a client: markers are written by
// transaction coordinators (WriteTxnMarkers).
var errClientControlBatch = fmt.Errorf("control batches are written by transaction coordinators, not produced: %w", kerr.InvalidRecord)

// errKeylessRecord refuses a record without a key on a compacted topic.
var errKeylessRecord = fmt.Errorf("compacted topic: every record needs a key: %w", kerr.InvalidRecord)

// recordRules returns the topic's rules for every record, checked during the
// batch's validation walk (record.ValidateOptions.Check), as Kafka checks them: with
// requireKeys (compacted topics) a record without a key is INVALID_RECORD; with
// bounds, one whose timestamp is further from now than they allow is
// INVALID_TIMESTAMP (a record without a timestamp, -1, passes). Only topics with
// such a rule take this path.
func recordRules(now time.Time, requireKeys bool, bounds *replica.TimestampBounds) func(int32, int64, bool) error {
	lo, hi := int64(math.MinInt64), int64(math.MaxInt64)
	if bounds != nil {
		nowMs := max(now.UnixMilli(), 0) // so that neither bound overflows
		lo, hi = nowMs-bounds.Before, nowMs+min(bounds.After, math.MaxInt64-nowMs)
	}
	return func(offsetDelta int32, ts int64, keyNull bool) error {
		if requireKeys && keyNull {
			return errKeylessRecord
		}
		if ts != -1 && (ts < lo || ts > hi) {
			return fmt.Errorf("timestamp %d of the record with offset delta %d is out of range: it should be within [%d, %d]: %w",
				ts, offsetDelta, lo, hi, kerr.InvalidTimestamp)
		}
		return nil
	}
}

// recompress re-encodes a batch with the topic's codec (compression.type) at its level
// (compression.*.level), keeping its header fields (producer, transactional flag,
// timestamps) and its records byte for byte (record.Recompress).
// Only topics that ask for a codec take this path.
func recompress(batch []byte, hdr *record.Header, codec record.Compression, level int) ([]byte, error) {
	out, err := record.Recompress(nil, batch, codec, level)
	if err != nil {
		return nil, err
	}
	if *hdr, err = record.ParseHeader(out); err != nil {
		return nil, err
	}
	return out, nil
}

// waitForAcks completes an acks=all response once every pending partition's high
// watermark passes its batch, or fails those still short with REQUEST_TIMED_OUT.
func (b *Broker) waitForAcks(pr *produceRequest) <-chan protocol.Response {
	out := make(chan protocol.Response, 1)
	b.answerLater(&pr.who, out, func() {
		wake := make(chan struct{}, 1)
		expired, stop := b.after(time.Duration(max(pr.timeout, 1)) * time.Millisecond)
		defer stop()
		pending := pr.pending
		for {
			remaining := pending[:0]
			for _, pa := range pending {
				// Register before checking so that an advance in between is not missed.
				pa.partition.Wait(wake)
				if pr.acked(pa) {
					pa.partition.StopWaiting(wake)
				} else {
					remaining = append(remaining, pa)
				}
			}
			pending = remaining
			if len(pending) == 0 {
				out <- protocol.Response{Body: &pr.resp, Written: pr.written, Throttle: pr.throttle}
				return
			}
			select {
			case <-wake:
			case <-expired:
				for _, pa := range pending {
					pa.partition.StopWaiting(wake)
					pr.resp.Topics[pa.topic].Partitions[pa.index].ErrorCode = kerr.RequestTimedOut.Code
				}
				out <- protocol.Response{Body: &pr.resp, Written: pr.written, Throttle: pr.throttle}
				return
			}
		}
	})
	return out
}
