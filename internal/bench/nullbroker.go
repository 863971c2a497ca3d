package bench

import (
	"bufio"
	"crypto/sha256"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-streaming/samsa/internal/record"
)

// NullBrokerConfig configures a NullBroker.
type NullBrokerConfig struct {
	// Listen is the TCP address to listen on; "127.0.0.1:0" when empty.
	Listen string
	// Partitions is how many partitions a topic gets when a Metadata request names
	// it first or CreateTopics asks for the default (-1); 1 when zero.
	Partitions int32
	// RecordSize is the value size of each record in the canned fetch batch; 1024
	// when zero.
	RecordSize int
	// BatchBytes is the approximate size of the canned fetch batch: it holds as many
	// records of RecordSize as fit (at least one); 64 KiB when zero. With
	// Compression, it is the size before compression, as a producer's batch.size.
	BatchBytes int
	// Compression is the canned batch's codec; none when zero.
	Compression record.Compression
	// Logger receives connection errors at debug level; discarded when nil.
	Logger *slog.Logger
	// TLS, if set, makes the null broker listen with TLS (the client's own TLS
	// ceiling).
	TLS *tls.Config
}

// Errors of the null broker.
var (
	ErrFrameTooLarge  = errors.New("bench: request frame too large")
	ErrUnsupportedAPI = errors.New("bench: unsupported api key or version")
	ErrMalformed      = errors.New("bench: malformed request")
)

const maxRequestFrame = 128 << 20

// Kafka error codes the null broker answers with.
const (
	errCodeNone                    int16 = 0
	errCodeCorruptMessage          int16 = 2
	errCodeUnknownTopicOrPartition int16 = 3
	errCodeUnsupportedVersion      int16 = 35
	errCodeTopicAlreadyExists      int16 = 36
	errCodeUnknownTopicID          int16 = 100
)

// NullBroker is a Kafka broker that stores nothing: it acknowledges produce with
// increasing offsets and answers every fetch from one canned record batch with the
// offsets rewritten, so that a client runs against it at its own ceiling. It is one
// node (id 0) that leads every partition of every topic anyone asks about. Safe for
// concurrent use; each connection is served by one goroutine, in request order.
type NullBroker struct {
	cfg    NullBrokerConfig
	log    *slog.Logger
	ln     net.Listener
	host   string
	port   int32
	canned cannedBatch

	nextProducerID atomic.Int64

	mu struct {
		sync.RWMutex
		topics map[string]*nullTopic
		byID   map[[16]byte]*nullTopic
		conns  map[net.Conn]struct{}
		closed bool
	}
	wg sync.WaitGroup
}

// nullTopic is one topic of the null broker; next holds each partition's next offset.
type nullTopic struct {
	name string
	id   [16]byte
	next []atomic.Int64
}

// cannedBatch is the v2 batch every fetch is answered from.
type cannedBatch struct {
	bytes   []byte // the whole batch; bytes[0:8] (baseOffset) is rewritten per copy
	records int64  // records in the batch (lastOffsetDelta + 1)
}

// StartNullBroker listens on cfg.Listen and serves until Close.
func StartNullBroker(cfg NullBrokerConfig) (*NullBroker, error) {
	if cfg.Listen == "" {
		cfg.Listen = "127.0.0.1:0"
	}
	if cfg.Partitions <= 0 {
		cfg.Partitions = 1
	}
	if cfg.RecordSize <= 0 {
		cfg.RecordSize = 1024
	}
	if cfg.BatchBytes <= 0 {
		cfg.BatchBytes = 64 << 10
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	canned, err := buildCannedBatch(cfg.RecordSize, cfg.BatchBytes, cfg.Compression)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("null broker: %w", err)
	}
	addr := ln.Addr().(*net.TCPAddr)
	if cfg.TLS != nil {
		ln = tls.NewListener(ln, cfg.TLS)
	}
	b := &NullBroker{cfg: cfg, log: cfg.Logger, ln: ln, host: addr.IP.String(), port: int32(addr.Port), canned: canned}
	b.nextProducerID.Store(1000)
	b.mu.topics = make(map[string]*nullTopic)
	b.mu.byID = make(map[[16]byte]*nullTopic)
	b.mu.conns = make(map[net.Conn]struct{})
	b.wg.Add(1)
	go b.acceptLoop()
	return b, nil
}

// Addr is the host:port the broker listens on.
func (b *NullBroker) Addr() string {
	return net.JoinHostPort(b.host, strconv.Itoa(int(b.port)))
}

// Close stops listening, closes every connection and waits for their goroutines.
func (b *NullBroker) Close() error {
	b.mu.Lock()
	if b.mu.closed {
		b.mu.Unlock()
		return nil
	}
	b.mu.closed = true
	err := b.ln.Close()
	for c := range b.mu.conns {
		c.Close()
	}
	b.mu.Unlock()
	b.wg.Wait()
	return err
}

// buildCannedBatch returns a batch of as many recordSize-byte values as fit in about
// batchBytes, compressed with codec.
func buildCannedBatch(recordSize, batchBytes int, codec record.Compression) (cannedBatch, error) {
	perRecord := recordSize + 8 // attributes, deltas, lengths: a few varint bytes
	n := max(1, (batchBytes-record.HeaderSize)/perRecord)
	value := make([]byte, recordSize)
	for i := range value {
		value[i] = byte('a' + i%26)
	}
	recs := make([]record.Record, n)
	for i := range recs {
		recs[i] = record.Record{OffsetDelta: int32(i), Value: value}
	}
	opts := record.DefaultBuildOptions()
	opts.PartitionLeaderEpoch = 0
	opts.Compression = codec
	opts.BaseTimestamp = time.Now().UnixMilli()
	batch, err := record.Build(opts, recs)
	if err != nil {
		return cannedBatch{}, fmt.Errorf("null broker: canned batch: %w", err)
	}
	return cannedBatch{bytes: batch, records: int64(n)}, nil
}

func (b *NullBroker) acceptLoop() {
	defer b.wg.Done()
	for {
		c, err := b.ln.Accept()
		if err != nil {
			return
		}
		b.mu.Lock()
		if b.mu.closed {
			b.mu.Unlock()
			c.Close()
			return
		}
		b.mu.conns[c] = struct{}{}
		b.wg.Add(1)
		b.mu.Unlock()
		go b.serveConn(c)
	}
}

// topicID derives a stable, non-zero topic id from the name.
func topicID(name string) [16]byte {
	sum := sha256.Sum256([]byte("samsa-null/" + name))
	var id [16]byte
	copy(id[:], sum[:16])
	return id
}

// topic returns the named topic, creating it with partitions (the default when ≤ 0)
// if create is set and it does not exist.
func (b *NullBroker) topic(name string, create bool, partitions int32) (*nullTopic, bool) {
	b.mu.RLock()
	t, ok := b.mu.topics[name]
	b.mu.RUnlock()
	if ok || !create {
		return t, false
	}
	if partitions <= 0 {
		partitions = b.cfg.Partitions
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if t, ok := b.mu.topics[name]; ok {
		return t, false
	}
	// Requests are decoded without copying strings (they alias the connection's
	// reused frame buffer), so a name that outlives the request is cloned.
	name = strings.Clone(name)
	t = &nullTopic{name: name, id: topicID(name), next: make([]atomic.Int64, partitions)}
	b.mu.topics[name] = t
	b.mu.byID[t.id] = t
	return t, true
}

func (b *NullBroker) topicByID(id [16]byte) *nullTopic {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return b.mu.byID[id]
}

func (b *NullBroker) deleteTopic(t *nullTopic) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.mu.topics, t.name)
	delete(b.mu.byID, t.id)
}

func (b *NullBroker) allTopics() []*nullTopic {
	b.mu.RLock()
	defer b.mu.RUnlock()
	out := make([]*nullTopic, 0, len(b.mu.topics))
	for _, t := range b.mu.topics {
		out = append(out, t)
	}
	return out
}

// connState holds one connection's reusable buffers.
type connState struct {
	conn    net.Conn
	in      []byte      // request frame
	out     []byte      // encoded response (all bytes but fetched records)
	offsets []byte      // 8-byte base offsets of fetched batch copies
	cuts    []recordCut // where batch copies go inside out
	iov     net.Buffers

	share        map[[16]byte][]int32 // the connection's share session: partitions by topic id
	shareRecords []byte               // the batch copies of a ShareFetch response
}

// recordCut says that batches copies of the canned batch go at out[at:], their base
// offsets being offsets[firstOffsetAt:firstOffsetAt+8*batches].
type recordCut struct {
	at, firstOffsetAt, batches int
}

func (b *NullBroker) serveConn(c net.Conn) {
	defer b.wg.Done()
	defer func() {
		b.mu.Lock()
		delete(b.mu.conns, c)
		b.mu.Unlock()
		c.Close()
	}()
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetNoDelay(true)
	}
	br := bufio.NewReaderSize(c, 256<<10)
	cs := &connState{conn: c}
	var sizeBuf [4]byte
	for {
		if _, err := io.ReadFull(br, sizeBuf[:]); err != nil {
			return
		}
		size := int32(binary.BigEndian.Uint32(sizeBuf[:]))
		if size < 8 || size > maxRequestFrame {
			b.log.Debug("null broker: closing connection", "remote", c.RemoteAddr().String(), "err", ErrFrameTooLarge)
			return
		}
		if cap(cs.in) < int(size) {
			cs.in = make([]byte, size)
		}
		frame := cs.in[:size]
		if _, err := io.ReadFull(br, frame); err != nil {
			return
		}
		if err := b.handle(cs, frame); err != nil {
			b.log.Debug("null broker: closing connection", "remote", c.RemoteAddr().String(), "err", err)
			return
		}
	}
}

// apiRange is one API the null broker serves and its version range.
type apiRange struct {
	key, min int16
}

// servedAPIs lists the APIs served, with their minimum version; the maximum is what
// kmsg knows. ApiVersions answers from this list.
var servedAPIs = []apiRange{
	{key: 0, min: 3},  // Produce: v2 batches only
	{key: 1, min: 4},  // Fetch
	{key: 2, min: 1},  // ListOffsets
	{key: 3, min: 1},  // Metadata
	{key: 18, min: 0}, // ApiVersions
	{key: 19, min: 0}, // CreateTopics
	{key: 20, min: 0}, // DeleteTopics
	{key: 22, min: 0}, // InitProducerId
	{key: 10, min: 0}, // FindCoordinator: itself, for share groups
	{key: 76, min: 1}, // ShareGroupHeartbeat
	{key: 78, min: 1}, // ShareFetch
	{key: 79, min: 1}, // ShareAcknowledge
}

func versionServed(key, version int16) bool {
	for _, a := range servedAPIs {
		if a.key == key {
			return version >= a.min && version <= kmsg.RequestForKey(key).MaxVersion()
		}
	}
	return false
}

// handle parses one request frame and writes its response (none for acks=0 produce).
func (b *NullBroker) handle(cs *connState, frame []byte) error {
	key := int16(binary.BigEndian.Uint16(frame[0:]))
	version := int16(binary.BigEndian.Uint16(frame[2:]))
	correlationID := int32(binary.BigEndian.Uint32(frame[4:]))
	req := kmsg.RequestForKey(key)
	if req == nil {
		return fmt.Errorf("%w: key %d", ErrUnsupportedAPI, key)
	}
	if !versionServed(key, version) {
		if key == 18 { // answer with v0 and our versions so the client can retry lower
			resp := b.apiVersions(0)
			resp.ErrorCode = errCodeUnsupportedVersion
			return b.writeResponse(cs, correlationID, resp, false)
		}
		return fmt.Errorf("%w: key %d version %d", ErrUnsupportedAPI, key, version)
	}
	req.SetVersion(version)
	body, err := skipRequestHeader(frame[8:], req.IsFlexible())
	if err != nil {
		return err
	}
	if key == 1 { // Fetch: hand-encoded around the canned batch
		fetch := req.(*kmsg.FetchRequest)
		if err := fetch.UnsafeReadFrom(body); err != nil {
			return fmt.Errorf("%w: fetch: %v", ErrMalformed, err)
		}
		return b.fetch(cs, correlationID, fetch)
	}
	if err := req.(interface{ UnsafeReadFrom([]byte) error }).UnsafeReadFrom(body); err != nil {
		return fmt.Errorf("%w: key %d: %v", ErrMalformed, key, err)
	}
	var resp kmsg.Response
	switch r := req.(type) {
	case *kmsg.ProduceRequest:
		resp = b.produce(r)
		if r.Acks == 0 {
			return nil
		}
	case *kmsg.ListOffsetsRequest:
		resp = b.listOffsets(r)
	case *kmsg.MetadataRequest:
		resp = b.metadata(r)
	case *kmsg.ApiVersionsRequest:
		resp = b.apiVersions(version)
	case *kmsg.CreateTopicsRequest:
		resp = b.createTopics(r)
	case *kmsg.DeleteTopicsRequest:
		resp = b.deleteTopics(r)
	case *kmsg.InitProducerIDRequest:
		resp = b.initProducerID(r)
	case *kmsg.FindCoordinatorRequest:
		resp = b.findCoordinator(r)
	case *kmsg.ShareGroupHeartbeatRequest:
		resp = b.shareGroupHeartbeat(r)
	case *kmsg.ShareFetchRequest:
		resp = b.shareFetch(cs, r)
	case *kmsg.ShareAcknowledgeRequest:
		resp = b.shareAcknowledge(r)
	default:
		return fmt.Errorf("%w: key %d", ErrUnsupportedAPI, key)
	}
	resp.SetVersion(version)
	return b.writeResponse(cs, correlationID, resp, key != 18 && resp.IsFlexible())
}

// skipRequestHeader skips the client id and, for flexible versions, the header's
// tagged fields, returning the request body.
func skipRequestHeader(b []byte, flexible bool) ([]byte, error) {
	if len(b) < 2 {
		return nil, fmt.Errorf("%w: short header", ErrMalformed)
	}
	n := int(int16(binary.BigEndian.Uint16(b)))
	b = b[2:]
	if n > 0 {
		if len(b) < n {
			return nil, fmt.Errorf("%w: short client id", ErrMalformed)
		}
		b = b[n:]
	}
	if !flexible {
		return b, nil
	}
	count, w := binary.Uvarint(b)
	if w <= 0 {
		return nil, fmt.Errorf("%w: header tags", ErrMalformed)
	}
	b = b[w:]
	for range count {
		if _, w = binary.Uvarint(b); w <= 0 {
			return nil, fmt.Errorf("%w: header tag", ErrMalformed)
		}
		b = b[w:]
		size, w := binary.Uvarint(b)
		if w <= 0 || uint64(len(b)-w) < size {
			return nil, fmt.Errorf("%w: header tag size", ErrMalformed)
		}
		b = b[w+int(size):]
	}
	return b, nil
}

// writeResponse frames resp with its correlation id (and an empty tag section for a
// flexible response header) and writes it.
func (b *NullBroker) writeResponse(cs *connState, correlationID int32, resp kmsg.Response, flexibleHeader bool) error {
	out := append(cs.out[:0], 0, 0, 0, 0)
	out = binary.BigEndian.AppendUint32(out, uint32(correlationID))
	if flexibleHeader {
		out = append(out, 0)
	}
	out = resp.AppendTo(out)
	binary.BigEndian.PutUint32(out, uint32(len(out)-4))
	cs.out = out
	_, err := cs.conn.Write(out)
	return err
}

func (b *NullBroker) apiVersions(version int16) *kmsg.ApiVersionsResponse {
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.SetVersion(version)
	for _, a := range servedAPIs {
		k := kmsg.NewApiVersionsResponseApiKey()
		k.ApiKey = a.key
		k.MinVersion = a.min
		k.MaxVersion = kmsg.RequestForKey(a.key).MaxVersion()
		resp.ApiKeys = append(resp.ApiKeys, k)
	}
	return resp
}

func (b *NullBroker) metadata(req *kmsg.MetadataRequest) *kmsg.MetadataResponse {
	resp := kmsg.NewPtrMetadataResponse()
	broker := kmsg.NewMetadataResponseBroker()
	broker.NodeID = 0
	broker.Host = b.host
	broker.Port = b.port
	resp.Brokers = append(resp.Brokers, broker)
	clusterID := "samsa-null-broker"
	resp.ClusterID = &clusterID
	resp.ControllerID = 0
	var topics []*nullTopic
	if req.Topics == nil {
		topics = b.allTopics()
	}
	for _, rt := range req.Topics {
		var t *nullTopic
		switch {
		case rt.Topic != nil:
			t, _ = b.topic(*rt.Topic, true, 0)
		default:
			t = b.topicByID(rt.TopicID)
		}
		if t == nil {
			mt := kmsg.NewMetadataResponseTopic()
			mt.ErrorCode = errCodeUnknownTopicID
			mt.TopicID = rt.TopicID
			resp.Topics = append(resp.Topics, mt)
			continue
		}
		topics = append(topics, t)
	}
	for _, t := range topics {
		mt := kmsg.NewMetadataResponseTopic()
		mt.Topic = kmsg.StringPtr(t.name)
		mt.TopicID = t.id
		for p := range t.next {
			mp := kmsg.NewMetadataResponseTopicPartition()
			mp.Partition = int32(p)
			mp.Leader = 0
			mp.LeaderEpoch = 0
			mp.Replicas = []int32{0}
			mp.ISR = []int32{0}
			mt.Partitions = append(mt.Partitions, mp)
		}
		resp.Topics = append(resp.Topics, mt)
	}
	return resp
}

func (b *NullBroker) initProducerID(*kmsg.InitProducerIDRequest) *kmsg.InitProducerIDResponse {
	resp := kmsg.NewPtrInitProducerIDResponse()
	resp.ProducerID = b.nextProducerID.Add(1)
	resp.ProducerEpoch = 0
	return resp
}

func (b *NullBroker) createTopics(req *kmsg.CreateTopicsRequest) *kmsg.CreateTopicsResponse {
	resp := kmsg.NewPtrCreateTopicsResponse()
	for _, rt := range req.Topics {
		ct := kmsg.NewCreateTopicsResponseTopic()
		ct.Topic = rt.Topic
		t, created := b.topic(rt.Topic, !req.ValidateOnly, rt.NumPartitions)
		if !created && !req.ValidateOnly {
			ct.ErrorCode = errCodeTopicAlreadyExists
		}
		if t != nil {
			ct.TopicID = t.id
			ct.NumPartitions = int32(len(t.next))
			ct.ReplicationFactor = 1
		}
		resp.Topics = append(resp.Topics, ct)
	}
	return resp
}

func (b *NullBroker) deleteTopics(req *kmsg.DeleteTopicsRequest) *kmsg.DeleteTopicsResponse {
	resp := kmsg.NewPtrDeleteTopicsResponse()
	del := func(t *nullTopic, name *string, id [16]byte) {
		dt := kmsg.NewDeleteTopicsResponseTopic()
		dt.Topic = name
		dt.TopicID = id
		if t == nil {
			dt.ErrorCode = errCodeUnknownTopicOrPartition
		} else {
			b.deleteTopic(t)
		}
		resp.Topics = append(resp.Topics, dt)
	}
	for _, name := range req.TopicNames {
		t, _ := b.topic(name, false, 0)
		del(t, kmsg.StringPtr(name), [16]byte{})
	}
	for _, rt := range req.Topics {
		var t *nullTopic
		if rt.Topic != nil {
			t, _ = b.topic(*rt.Topic, false, 0)
		} else {
			t = b.topicByID(rt.TopicID)
		}
		del(t, rt.Topic, rt.TopicID)
	}
	return resp
}

func (b *NullBroker) listOffsets(req *kmsg.ListOffsetsRequest) *kmsg.ListOffsetsResponse {
	resp := kmsg.NewPtrListOffsetsResponse()
	for _, rt := range req.Topics {
		lt := kmsg.NewListOffsetsResponseTopic()
		lt.Topic = rt.Topic
		t, _ := b.topic(rt.Topic, false, 0)
		for _, rp := range rt.Partitions {
			lp := kmsg.NewListOffsetsResponseTopicPartition()
			lp.Partition = rp.Partition
			lp.Timestamp = -1
			lp.LeaderEpoch = 0
			switch {
			case t == nil || rp.Partition < 0 || int(rp.Partition) >= len(t.next):
				lp.ErrorCode = errCodeUnknownTopicOrPartition
			case rp.Timestamp == -1: // latest
				lp.Offset = t.next[rp.Partition].Load()
			case rp.Timestamp == -3: // max timestamp
				lp.Offset = max(t.next[rp.Partition].Load()-1, 0)
			default: // earliest, or any timestamp: everything ever produced is "at 0"
				lp.Offset = 0
			}
			lt.Partitions = append(lt.Partitions, lp)
		}
		resp.Topics = append(resp.Topics, lt)
	}
	return resp
}

// produce acknowledges every batch with the partition's next offsets; it reads only
// batch headers.
func (b *NullBroker) produce(req *kmsg.ProduceRequest) *kmsg.ProduceResponse {
	resp := kmsg.NewPtrProduceResponse()
	for _, rt := range req.Topics {
		pt := kmsg.NewProduceResponseTopic()
		pt.Topic = rt.Topic
		pt.TopicID = rt.TopicID
		var t *nullTopic
		if rt.Topic != "" {
			t, _ = b.topic(rt.Topic, false, 0)
		} else {
			t = b.topicByID(rt.TopicID)
		}
		for _, rp := range rt.Partitions {
			pp := kmsg.NewProduceResponseTopicPartition()
			pp.Partition = rp.Partition
			pp.LogAppendTime = -1
			pp.LogStartOffset = 0
			count, ok := countRecords(rp.Records)
			switch {
			case t == nil || rp.Partition < 0 || int(rp.Partition) >= len(t.next):
				pp.ErrorCode = errCodeUnknownTopicOrPartition
			case !ok:
				pp.ErrorCode = errCodeCorruptMessage
			default:
				pp.BaseOffset = t.next[rp.Partition].Add(count) - count
			}
			pt.Partitions = append(pt.Partitions, pp)
		}
		resp.Topics = append(resp.Topics, pt)
	}
	return resp
}

// countRecords walks the v2 batch headers in records and sums lastOffsetDelta+1; it
// reports false if the bytes are not whole v2 batches.
func countRecords(records []byte) (int64, bool) {
	var n int64
	for len(records) > 0 {
		if len(records) < record.HeaderSize || records[record.MagicOffset] != record.MagicV2 {
			return 0, false
		}
		size := int(int32(binary.BigEndian.Uint32(records[record.LengthOffset:]))) + record.LogOverhead
		if size < record.HeaderSize || size > len(records) {
			return 0, false
		}
		n += int64(int32(binary.BigEndian.Uint32(records[lastOffsetDeltaOffset:]))) + 1
		records = records[size:]
	}
	return n, n > 0
}

// Batch header positions the bench reads (see internal/record's layout).
const (
	lastOffsetDeltaOffset = 23
	numRecordsOffset      = 57
)
