package group

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/samsa-streaming/samsa/internal/clock"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// memLog is an in-memory __consumer_offsets.
type memLog struct {
	mu        sync.Mutex
	parts     map[int32][]Record
	appendErr error
	appends   int
	// appendGate, when set, holds every Append until closed; blocked counts the holds.
	appendGate chan struct{}
	blocked    int
	// loadGate, when set, blocks Load until closed.
	loadGate chan struct{}
	// loadHold, when set, blocks Load after it has read the log and before it replays
	// it, until closed; Load closes loadRead (when set) once it has read.
	loadHold, loadRead chan struct{}
	// mixedBatches counts appended records whose producer differs from their batch's
	// first record's (a batch has one producer).
	mixedBatches int
}

// holdAppend makes the memory log hold every append, runs start (which must append),
// waits until its append is held (what), and returns what lets the held appends through.
func (h *harness) holdAppend(what string, start func()) (release func()) {
	h.t.Helper()
	gate := make(chan struct{})
	h.log.mu.Lock()
	h.log.appendGate = gate
	held := h.log.blocked + 1
	h.log.mu.Unlock()
	start()
	waitFor(h.t, what, func() bool {
		h.log.mu.Lock()
		defer h.log.mu.Unlock()
		return h.log.blocked == held
	})
	return func() {
		h.log.mu.Lock()
		h.log.appendGate = nil
		h.log.mu.Unlock()
		close(gate)
	}
}

func newMemLog() *memLog { return &memLog{parts: map[int32][]Record{}} }

func (l *memLog) Append(ctx context.Context, p int32, records []Record) error {
	l.mu.Lock()
	if gate := l.appendGate; gate != nil {
		l.blocked++
		l.mu.Unlock()
		select {
		case <-gate:
		case <-ctx.Done():
			return ctx.Err()
		}
		l.mu.Lock()
	}
	defer l.mu.Unlock()
	l.appends++
	if l.appendErr != nil {
		return l.appendErr
	}
	for _, r := range records {
		l.parts[p] = append(l.parts[p], Record{Key: append([]byte(nil), r.Key...), Value: cloneNil(r.Value), Txn: r.Txn})
		if !sameProducer(records[0].Txn, r.Txn) {
			l.mixedBatches++
		}
	}
	return nil
}

func cloneNil(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append([]byte{}, b...)
}

func (l *memLog) Load(ctx context.Context, p int32, fn func(Record) error) error {
	l.mu.Lock()
	gate := l.loadGate
	l.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	l.mu.Lock()
	records := append([]Record(nil), l.parts[p]...)
	hold, read := l.loadHold, l.loadRead
	l.mu.Unlock()
	if read != nil {
		close(read)
	}
	if hold != nil {
		select {
		case <-hold:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	for _, r := range records {
		if err := fn(r); err != nil {
			return err
		}
	}
	return nil
}

func (l *memLog) setAppendErr(err error) {
	l.mu.Lock()
	l.appendErr = err
	l.mu.Unlock()
}

// decodedAll returns every record of partition p, decoded.
func (l *memLog) decodedAll(t *testing.T, p int32) []decoded {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []decoded
	for _, r := range l.parts[p] {
		d, err := decodeRecord(r)
		if err != nil {
			t.Fatalf("decode: %v", err)
		}
		out = append(out, d)
	}
	return out
}

type harness struct {
	t     *testing.T
	clock *clock.Fake
	log   *memLog
	cfg   Config
	c     *Coordinator
	ids   int
	// topics, when set, is the coordinator's Topics option (consumer groups).
	topics func() *Topics
	// timeouts, when set, is the coordinator's Timeouts option (GROUP configs).
	timeouts func(group string) Timeouts
	// initShare, when set, is the coordinator's InitShareState option.
	initShare func(ctx context.Context, group string, topic TopicID, from, to int32) error
}

func newFakeClock() *clock.Fake { return clock.NewFake(time.Unix(1_700_000_000, 0)) }

func testConfig() Config {
	cfg := DefaultConfig()
	cfg.NumPartitions = 1
	cfg.InitialRebalanceDelay = 3 * time.Second
	cfg.MinSessionTimeout = time.Second
	cfg.MaxSessionTimeout = time.Minute
	cfg.OffsetsRetention = time.Hour
	cfg.OffsetsRetentionCheckInterval = time.Minute
	return cfg
}

func newHarness(t *testing.T, mutate func(*Config)) *harness {
	t.Helper()
	cfg := testConfig()
	if mutate != nil {
		mutate(&cfg)
	}
	h := &harness{t: t, clock: clock.NewFake(time.Unix(1_700_000_000, 0)), log: newMemLog(), cfg: cfg}
	h.start()
	return h
}

// start (re)creates the coordinator over the harness's log and loads every partition.
func (h *harness) start() {
	h.t.Helper()
	if h.c != nil {
		h.c.Close()
	}
	h.c = New(Options{Log: h.log, Clock: h.clock, Config: h.cfg, Logger: discardLogger(), Topics: h.topics, Timeouts: h.timeouts, InitShareState: h.initShare})
	h.c.newID = func() string { h.ids++; return fmt.Sprint(h.ids) }
	h.t.Cleanup(h.c.Close)
	for p := range h.cfg.NumPartitions {
		if err := h.c.LoadPartition(context.Background(), p); err != nil {
			h.t.Fatalf("load %d: %v", p, err)
		}
	}
}

func recv[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(5 * time.Second):
		t.Fatalf("no response within the deadline")
	}
	var zero T
	return zero
}

// none asserts that a response that is decided synchronously has not been sent.
func none[T any](t *testing.T, ch <-chan T) {
	t.Helper()
	select {
	case v := <-ch:
		t.Fatalf("unexpected response %+v", v)
	default:
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func consumerMeta(topics ...string) []byte {
	m := kmsg.NewConsumerMemberMetadata()
	m.Topics = topics
	return m.AppendTo(nil)
}

type joinOpts struct {
	member       string
	instance     string
	version      int16
	session      time.Duration
	rebalance    time.Duration
	protocolType string
	protocols    []kmsg.JoinGroupRequestProtocol
}

func proto(name string, meta []byte) kmsg.JoinGroupRequestProtocol {
	p := kmsg.NewJoinGroupRequestProtocol()
	p.Name = name
	p.Metadata = meta
	return p
}

func (h *harness) join(group string, o joinOpts) <-chan *kmsg.JoinGroupResponse {
	req := kmsg.NewPtrJoinGroupRequest()
	req.Version = 9
	if o.version != 0 {
		req.Version = o.version
	}
	req.Group = group
	req.MemberID = o.member
	if o.instance != "" {
		req.InstanceID = &o.instance
	}
	req.SessionTimeoutMillis = 10_000
	if o.session != 0 {
		req.SessionTimeoutMillis = int32(o.session.Milliseconds())
	}
	req.RebalanceTimeoutMillis = 30_000
	if o.rebalance != 0 {
		req.RebalanceTimeoutMillis = int32(o.rebalance.Milliseconds())
	}
	req.ProtocolType = "consumer"
	if o.protocolType != "" {
		req.ProtocolType = o.protocolType
	}
	req.Protocols = o.protocols
	if req.Protocols == nil {
		req.Protocols = []kmsg.JoinGroupRequestProtocol{proto("range", consumerMeta("t"))}
	}
	return h.c.JoinGroup(req, "client", "/127.0.0.1")
}

// newMemberID runs the KIP-394 handshake and returns the member id handed out.
func (h *harness) newMemberID(group string, o joinOpts) string {
	h.t.Helper()
	o.member = ""
	r := recv(h.t, h.join(group, o))
	if r.ErrorCode != kerrMemberIDRequired || r.MemberID == "" {
		h.t.Fatalf("handshake: error %d member %q", r.ErrorCode, r.MemberID)
	}
	return r.MemberID
}

func (h *harness) sync(group, member string, generation int32, assignment map[string][]byte) <-chan *kmsg.SyncGroupResponse {
	req := kmsg.NewPtrSyncGroupRequest()
	req.Version = 5
	req.Group = group
	req.MemberID = member
	req.Generation = generation
	for id, a := range assignment {
		ga := kmsg.NewSyncGroupRequestGroupAssignment()
		ga.MemberID = id
		ga.MemberAssignment = a
		req.GroupAssignment = append(req.GroupAssignment, ga)
	}
	return h.c.SyncGroup(req)
}

func (h *harness) heartbeat(group, member string, generation int32, instance string) int16 {
	req := kmsg.NewPtrHeartbeatRequest()
	req.Version = 4
	req.Group = group
	req.MemberID = member
	req.Generation = generation
	if instance != "" {
		req.InstanceID = &instance
	}
	return h.c.Heartbeat(req).ErrorCode
}

func (h *harness) describe(group string) kmsg.DescribeGroupsResponseGroup {
	req := kmsg.NewPtrDescribeGroupsRequest()
	req.Version = 5
	req.Groups = []string{group}
	return h.c.DescribeGroups(req).Groups[0]
}

func (h *harness) commit(group, member string, generation int32, offsets map[TopicPartition]int64) *kmsg.OffsetCommitResponse {
	h.t.Helper()
	return recv(h.t, h.c.OffsetCommit(commitRequest(8, group, member, generation, offsets)))
}

// commitRequest is an OffsetCommit of version of offsets into group by member at
// generation (the member epoch from v9).
func commitRequest(version int16, group, member string, generation int32, offsets map[TopicPartition]int64) *kmsg.OffsetCommitRequest {
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version = version
	req.Group = group
	req.MemberID = member
	req.Generation = generation
	byTopic := map[string]int{}
	for tp, off := range offsets {
		i, ok := byTopic[tp.Topic]
		if !ok {
			rt := kmsg.NewOffsetCommitRequestTopic()
			rt.Topic = tp.Topic
			req.Topics = append(req.Topics, rt)
			i = len(req.Topics) - 1
			byTopic[tp.Topic] = i
		}
		p := kmsg.NewOffsetCommitRequestTopicPartition()
		p.Partition = tp.Partition
		p.Offset = off
		p.LeaderEpoch = 7
		meta := fmt.Sprintf("m%d", off)
		p.Metadata = &meta
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, p)
	}
	return req
}

// commitErrors flattens a commit response into partition -> code.
func commitErrors(r *kmsg.OffsetCommitResponse) map[TopicPartition]int16 {
	out := map[TopicPartition]int16{}
	for _, t := range r.Topics {
		for _, p := range t.Partitions {
			out[TopicPartition{t.Topic, p.Partition}] = p.ErrorCode
		}
	}
	return out
}

func (h *harness) fetch(group string) map[TopicPartition]int64 {
	h.t.Helper()
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Version = 7
	req.Group = group
	resp := h.c.OffsetFetch(req)
	if resp.ErrorCode != 0 {
		h.t.Fatalf("offset fetch: error %d", resp.ErrorCode)
	}
	out := map[TopicPartition]int64{}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			out[TopicPartition{t.Topic, p.Partition}] = p.Offset
		}
	}
	return out
}

// stable brings a new group to Stable with members joining with opts[i] (KIP-394
// handshake for dynamic members), the leader assigning "a:<member>" to each. It
// returns the member ids (in opts order), the leader and the generation.
func (h *harness) stable(group string, opts ...joinOpts) ([]string, string, int32) {
	h.t.Helper()
	ids := make([]string, len(opts))
	chans := make([]<-chan *kmsg.JoinGroupResponse, len(opts))
	for i, o := range opts {
		if o.instance == "" {
			o.member = h.newMemberID(group, o)
		}
		chans[i] = h.join(group, o)
	}
	resps := make([]*kmsg.JoinGroupResponse, len(opts))
	for range 20 {
		h.clock.Advance(h.cfg.InitialRebalanceDelay + time.Millisecond)
		done := true
		for i, ch := range chans {
			if resps[i] != nil {
				continue
			}
			select {
			case resps[i] = <-ch:
			default:
				done = false
			}
		}
		if done {
			break
		}
	}
	var leader string
	var gen int32
	for i, r := range resps {
		if r == nil || r.ErrorCode != 0 {
			h.t.Fatalf("member %d join: %+v", i, r)
		}
		ids[i] = r.MemberID
		leader, gen = r.LeaderID, r.Generation
	}
	assignment := map[string][]byte{}
	for _, id := range ids {
		assignment[id] = []byte("a:" + id)
	}
	syncs := make([]<-chan *kmsg.SyncGroupResponse, len(ids))
	for i, id := range ids {
		if id != leader {
			syncs[i] = h.sync(group, id, gen, nil)
		}
	}
	for i, id := range ids {
		if id == leader {
			syncs[i] = h.sync(group, id, gen, assignment)
		}
	}
	for i, ch := range syncs {
		r := recv(h.t, ch)
		if r.ErrorCode != 0 || string(r.MemberAssignment) != "a:"+ids[i] {
			h.t.Fatalf("member %s sync: error %d assignment %q", ids[i], r.ErrorCode, r.MemberAssignment)
		}
	}
	if s := h.describe(group).State; s != "Stable" {
		h.t.Fatalf("group state %s after sync, want Stable", s)
	}
	return ids, leader, gen
}

var errBoom = errors.New("disk on fire")

func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }
