package integration

// Incremental fetch sessions (KIP-227) driven with raw Fetch requests.

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"maps"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/samsa-streaming/samsa/internal/testutil"
)

// sessionFetcher sends raw Fetch requests to one broker.
type sessionFetcher struct {
	t       *testing.T
	cl      *kgo.Client
	version int16
	topic   string
	id      [16]byte
}

func newSessionFetcher(t *testing.T, b *testutil.Broker, adm *kadm.Client, topic string, version int16) *sessionFetcher {
	t.Helper()
	details, err := adm.ListTopics(ctxT(t, 10*time.Second), topic)
	if err != nil {
		t.Fatal(err)
	}
	versions := kversion.Stable()
	versions.SetMaxKeyVersion(int16(kmsg.Fetch), version) // kgo sends the highest version it may
	return &sessionFetcher{t: t, cl: newClient(t, b, kgo.MaxVersions(versions)), version: version, topic: topic, id: details[topic].ID}
}

type fetchPart struct {
	partition int32
	offset    int64
}

// fetch sends one Fetch with the session id and epoch, the partitions to add or update
// and those to forget; it returns the response.
func (f *sessionFetcher) fetch(sessionID, epoch int32, parts []fetchPart, forget []int32) *kmsg.FetchResponse {
	f.t.Helper()
	req := kmsg.NewPtrFetchRequest()
	req.Version = f.version
	req.MaxWaitMillis = 20
	req.MinBytes = 1
	req.MaxBytes = 1 << 20
	req.SessionID, req.SessionEpoch = sessionID, epoch
	if len(parts) > 0 {
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic, rt.TopicID = f.topic, f.id
		for _, p := range parts {
			rp := kmsg.NewFetchRequestTopicPartition()
			rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = p.partition, p.offset, 1<<20
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
	}
	if len(forget) > 0 {
		ft := kmsg.NewFetchRequestForgottenTopic()
		ft.Topic, ft.TopicID, ft.Partitions = f.topic, f.id, forget
		req.ForgottenTopics = append(req.ForgottenTopics, ft)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, f.cl.Broker(1))
	if err != nil {
		f.t.Fatal(err)
	}
	return resp
}

// partitions lists the partitions a response answers, with their record counts.
func respPartitions(t *testing.T, resp *kmsg.FetchResponse) map[int32]int {
	t.Helper()
	out := map[int32]int{}
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			if rp.ErrorCode != 0 {
				t.Fatalf("partition %d: %v", rp.Partition, kerr.ErrorForCode(rp.ErrorCode))
			}
			out[rp.Partition] = countRecords(t, rp.RecordBatches)
		}
	}
	return out
}

func TestFetchSessions(t *testing.T) {
	t.Parallel()
	b := testutil.StartBroker(t)
	adm := newAdmin(t, b)
	producer := newClient(t, b, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for _, version := range []int16{12, 13, 18} {
		topic := fmt.Sprintf("sessions-v%d", version)
		createTopic(t, adm, topic, 3, nil)
		produceTo := func(p int32, n int) {
			for i := 0; i < n; i++ {
				produceSync(t, producer, &kgo.Record{Topic: topic, Partition: p, Value: value(i)})
			}
		}
		produceTo(0, 2)
		f := newSessionFetcher(t, b, adm, topic, version)
		// A full fetch with epoch 0 opens a session and answers every partition.
		resp := f.fetch(0, 0, []fetchPart{{0, 0}, {1, 0}, {2, 0}}, nil)
		if resp.ErrorCode != 0 || resp.SessionID == 0 {
			t.Fatalf("v%d: full fetch: error %d session %d", version, resp.ErrorCode, resp.SessionID)
		}
		sid := resp.SessionID
		if got := respPartitions(t, resp); len(got) != 3 || got[0] != 2 {
			t.Fatalf("v%d: full fetch answered %v, want 3 partitions with 2 records in 0", version, got)
		}
		// The client moves partition 0 past what it read; nothing new: an empty
		// incremental response.
		if got := respPartitions(t, f.fetch(sid, 1, []fetchPart{{0, 2}}, nil)); len(got) != 0 {
			t.Fatalf("v%d: incremental fetch with nothing new answered %v", version, got)
		}
		// New data in partition 1 is answered alone.
		produceTo(1, 3)
		resp = f.fetch(sid, 2, nil, nil)
		if got := respPartitions(t, resp); !maps.Equal(got, map[int32]int{1: 3}) {
			t.Fatalf("v%d: after producing to 1: answered %v, want only partition 1 with 3 records", version, got)
		}
		// Forgotten partitions are no longer fetched.
		resp = f.fetch(sid, 3, []fetchPart{{1, 3}}, []int32{0})
		if got := respPartitions(t, resp); len(got) != 0 {
			t.Fatalf("v%d: after moving 1 on: answered %v", version, got)
		}
		produceTo(0, 1)
		if got := respPartitions(t, f.fetch(sid, 4, nil, nil)); len(got) != 0 {
			t.Fatalf("v%d: a forgotten partition was answered: %v", version, got)
		}
		// Epoch errors, then closing.
		if resp := f.fetch(sid, 9, nil, nil); resp.ErrorCode != kerr.InvalidFetchSessionEpoch.Code {
			t.Fatalf("v%d: wrong epoch: error %d", version, resp.ErrorCode)
		}
		if resp := f.fetch(sid+1, 1, nil, nil); resp.ErrorCode != kerr.FetchSessionIDNotFound.Code {
			t.Fatalf("v%d: unknown session: error %d", version, resp.ErrorCode)
		}
		if resp := f.fetch(sid, -1, []fetchPart{{2, 0}}, nil); resp.ErrorCode != 0 || resp.SessionID != 0 {
			t.Fatalf("v%d: closing fetch: error %d session %d", version, resp.ErrorCode, resp.SessionID)
		}
		if resp := f.fetch(sid, 5, nil, nil); resp.ErrorCode != kerr.FetchSessionIDNotFound.Code {
			t.Fatalf("v%d: closed session: error %d", version, resp.ErrorCode)
		}
	}
	// A session made with topic ids cannot be used without them.
	f13 := newSessionFetcher(t, b, adm, "sessions-v13", 13)
	sid := f13.fetch(0, 0, []fetchPart{{0, 0}}, nil).SessionID
	f12 := newSessionFetcher(t, b, adm, "sessions-v13", 12)
	if resp := f12.fetch(sid, 1, nil, nil); resp.ErrorCode != kerr.FetchSessionTopicIDError.Code {
		t.Fatalf("v12 use of a v13 session: error %d", resp.ErrorCode)
	}
}

// TestFetchSessionEviction: with the cache full, a new session evicts no session made
// less than min.incremental.fetch.session.eviction.ms (120 s) ago, however bigger it is,
// as in Kafka: the new fetch is answered in full without a session, and the cached
// session goes on.
func TestFetchSessionEviction(t *testing.T) {
	t.Parallel()
	b := testutil.StartBroker(t, "max.incremental.fetch.session.cache.slots=1")
	adm := newAdmin(t, b)
	createTopic(t, adm, "evict", 3, nil)
	f := newSessionFetcher(t, b, adm, "evict", 13)
	small := f.fetch(0, 0, []fetchPart{{0, 0}}, nil).SessionID
	if small == 0 {
		t.Fatal("no session with the cache empty")
	}
	for _, parts := range [][]fetchPart{{{1, 0}, {2, 0}}, {{2, 0}}} {
		resp := f.fetch(0, 0, parts, nil)
		if resp.ErrorCode != 0 || resp.SessionID != 0 || len(respPartitions(t, resp)) != len(parts) {
			t.Fatalf("fetch of %d partitions with the cache full: error %d, session %d, %d partitions",
				len(parts), resp.ErrorCode, resp.SessionID, len(respPartitions(t, resp)))
		}
	}
	if resp := f.fetch(small, 1, nil, nil); resp.ErrorCode != 0 {
		t.Fatalf("the young session after the refused ones: error %d", resp.ErrorCode)
	}
}

// countRecords counts the records of the v2 batches in raw.
func countRecords(t *testing.T, raw []byte) int {
	t.Helper()
	n := 0
	for len(raw) >= 12 {
		size := 12 + int(binary.BigEndian.Uint32(raw[8:12]))
		if size > len(raw) {
			break // a partial batch at the end, as Kafka may send
		}
		var b kmsg.RecordBatch
		if err := b.ReadFrom(raw[:size]); err != nil {
			t.Fatal(err)
		}
		n += int(b.NumRecords)
		raw = raw[size:]
	}
	return n
}

// TestFetchSessionEveryPartitionGetsItsTurn: a franz-go consumer of two topics of two
// partitions, each partition holding several times what one fetch may answer
// (FetchMaxBytes), reads all four early on. Its fetch session keeps the partitions in
// the order it first named them, and each fetch reads them in order until the byte
// limit; the broker moves the partitions that returned records after the others, as
// Kafka's incremental fetch context does, so the head partition does not keep the
// rest waiting until it runs dry. A topic's partitions then lie apart in the session
// and the response names the topic twice, as Kafka's can.
func TestFetchSessionEveryPartitionGetsItsTurn(t *testing.T) {
	t.Parallel()
	b := testutil.StartBroker(t)
	adm := newAdmin(t, b)
	topics := []string{"session-turns-a", "session-turns-b"}
	const partitions, perPartition = 2, 100
	producer := newClient(t, b, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0),
		kgo.ProducerBatchCompression(kgo.NoCompression()))
	val := make([]byte, 1000)
	for _, topic := range topics {
		createTopic(t, adm, topic, partitions, nil)
		for p := range int32(partitions) {
			for i := 0; i < perPartition; i += 10 { // batches of about 10 KB
				var recs []*kgo.Record
				for range 10 {
					recs = append(recs, &kgo.Record{Topic: topic, Partition: p, Value: val})
				}
				produceSync(t, producer, recs...)
			}
		}
	}
	// About two batches a fetch: each partition takes some five fetches.
	consumer := newClient(t, b, kgo.ConsumeTopics(topics...), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxBytes(20_000), kgo.FetchMaxWait(100*time.Millisecond))
	var order []string
	next := map[string]int64{}
	want := len(topics) * partitions * perPartition
	ctx := ctxT(t, 60*time.Second)
	for len(order) < want && ctx.Err() == nil {
		consumer.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
			tp := fmt.Sprintf("%s-%d", r.Topic, r.Partition)
			if r.Offset != next[tp] {
				t.Errorf("%s: offset %d read after %d", tp, r.Offset, next[tp]-1)
			}
			next[tp] = r.Offset + 1
			order = append(order, tp)
		})
	}
	if len(order) != want {
		t.Fatalf("read %d records in 60 s, want %d", len(order), want)
	}
	// The first quarter of the records spans every partition.
	seen := map[string]int{}
	for _, tp := range order[:want/4] {
		seen[tp]++
	}
	if len(seen) != len(topics)*partitions {
		t.Fatalf("the first %d records came from partitions %v only", want/4, seen)
	}
	t.Logf("the first %d records by partition: %v", want/4, seen)
}

// TestFetchSessionPipelined: a client that sends its session's next fetch on the same
// connection before the previous one is answered — here one that forgets the
// session's only partition while the first long-polls it — gets
// INVALID_FETCH_SESSION_EPOCH for the second, the first is answered as if alone, and
// the session goes on with the partition it still has. (Before sessions served one
// fetch at a time, the first fetch's answer indexed the forgotten partition and the
// broker process died.)
func TestFetchSessionPipelined(t *testing.T) {
	t.Parallel()
	b := testutil.StartBroker(t)
	adm := newAdmin(t, b)
	createTopic(t, adm, "pipelined", 1, nil)
	f := newSessionFetcher(t, b, adm, "pipelined", 13)
	sid := f.fetch(0, 0, []fetchPart{{0, 0}}, nil).SessionID
	if sid == 0 {
		t.Fatal("the full fetch opened no session")
	}

	conn, err := net.Dial("tcp", b.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(30 * time.Second)); err != nil {
		t.Fatal(err)
	}
	incremental := func(epoch, maxWait int32, forget bool) *kmsg.FetchRequest {
		req := kmsg.NewPtrFetchRequest()
		req.Version, req.SessionID, req.SessionEpoch = 13, sid, epoch
		req.MaxWaitMillis, req.MinBytes, req.MaxBytes = maxWait, 1, 1<<20
		if forget {
			ft := kmsg.NewFetchRequestForgottenTopic()
			ft.TopicID, ft.Partitions = f.id, []int32{0}
			req.ForgottenTopics = append(req.ForgottenTopics, ft)
		}
		return req
	}
	// Both frames in one write: the broker reads the second while the first waits
	// (up to 3 s: nothing is produced).
	// (kmsg's AppendRequest writes the frame size at the start of dst: one frame each.)
	formatter := kmsg.NewRequestFormatter(kmsg.FormatterClientID("pipeliner"))
	frames := slices.Concat(formatter.AppendRequest(nil, incremental(1, 3000, false), 1),
		formatter.AppendRequest(nil, incremental(2, 0, true), 2))
	if _, err := conn.Write(frames); err != nil {
		t.Fatal(err)
	}
	for _, want := range []struct {
		corr int32
		code int16
	}{{1, 0}, {2, kerr.InvalidFetchSessionEpoch.Code}} {
		resp := readFetchResponse(t, conn, want.corr)
		if resp.ErrorCode != want.code {
			t.Fatalf("pipelined fetch %d: %v, want %v", want.corr, kerr.ErrorForCode(resp.ErrorCode), kerr.ErrorForCode(want.code))
		}
	}
	// The session still reads partition 0 at its next epoch.
	producer := newClient(t, b)
	produceSync(t, producer, &kgo.Record{Topic: "pipelined", Value: value(0)})
	if got := respPartitions(t, f.fetch(sid, 2, nil, nil)); !maps.Equal(got, map[int32]int{0: 1}) {
		t.Fatalf("the session after the refused fetch answered %v, want partition 0's record", got)
	}
}

// readFetchResponse reads one Fetch (v12+, flexible) response frame from conn and
// checks its correlation id.
func readFetchResponse(t *testing.T, conn net.Conn, corr int32) *kmsg.FetchResponse {
	t.Helper()
	var size [4]byte
	if _, err := io.ReadFull(conn, size[:]); err != nil {
		t.Fatalf("reading the answer to fetch %d: %v", corr, err)
	}
	body := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(conn, body); err != nil {
		t.Fatalf("reading the answer to fetch %d: %v", corr, err)
	}
	if got := int32(binary.BigEndian.Uint32(body)); got != corr {
		t.Fatalf("answer with correlation id %d, want %d", got, corr)
	}
	resp := kmsg.NewPtrFetchResponse()
	resp.Version = 13
	if err := resp.ReadFrom(body[5:]); err != nil { // after the id and the header's empty tag buffer
		t.Fatalf("decoding the answer to fetch %d: %v", corr, err)
	}
	return resp
}

// TestFetchSessionPartitionErrors: in a session, a partition in error
// (OFFSET_OUT_OF_RANGE, below the log start after DeleteRecords or past the log end)
// is answered with its error at every fetch while it stays in error, and answered
// again once the client moved it back in range, though nothing else about it changed
// since the session last reported it (Kafka forgets the high watermark it cached for a
// partition in error).
func TestFetchSessionPartitionErrors(t *testing.T) {
	t.Parallel()
	b := testutil.StartBroker(t)
	adm := newAdmin(t, b)
	createTopic(t, adm, "session-errors", 2, nil)
	producer := newClient(t, b, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for i := range 5 {
		produceSync(t, producer, &kgo.Record{Topic: "session-errors", Value: value(i)})
	}
	f := newSessionFetcher(t, b, adm, "session-errors", 13)
	// answered returns the partitions a response answers with their error codes.
	answered := func(resp *kmsg.FetchResponse) map[int32]int16 {
		t.Helper()
		if resp.ErrorCode != 0 {
			t.Fatalf("fetch: %v", kerr.ErrorForCode(resp.ErrorCode))
		}
		out := map[int32]int16{}
		for _, rt := range resp.Topics {
			for _, rp := range rt.Partitions {
				out[rp.Partition] = rp.ErrorCode
			}
		}
		return out
	}
	oor := kerr.OffsetOutOfRange.Code
	resp := f.fetch(0, 0, []fetchPart{{0, 5}, {1, 0}}, nil)
	sid := resp.SessionID
	if got := answered(resp); sid == 0 || len(got) != 2 {
		t.Fatalf("full fetch: session %d, answered %v", sid, got)
	}
	offs := kadm.Offsets{}
	offs.Add(kadm.Offset{Topic: "session-errors", Partition: 0, At: 3})
	if res, err := adm.DeleteRecords(ctxT(t, 10*time.Second), offs); err != nil || res.Error() != nil {
		t.Fatalf("delete records: %v %v", err, res.Error())
	}
	epoch := int32(1)
	step := func(name string, parts []fetchPart, want map[int32]int16) {
		t.Helper()
		if got := answered(f.fetch(sid, epoch, parts, nil)); !maps.Equal(got, want) {
			t.Fatalf("%s (epoch %d): answered %v, want %v", name, epoch, got, want)
		}
		epoch++
	}
	step("log start moved", nil, map[int32]int16{0: 0})
	step("nothing new", nil, map[int32]int16{})
	step("below the log start", []fetchPart{{0, 1}}, map[int32]int16{0: oor})
	step("still below the log start", nil, map[int32]int16{0: oor})
	step("back at the log end", []fetchPart{{0, 5}}, map[int32]int16{0: 0})
	step("nothing new again", nil, map[int32]int16{})
	step("past the log end", []fetchPart{{0, 9}}, map[int32]int16{0: oor})
	step("back in range", []fetchPart{{0, 5}}, map[int32]int16{0: 0})
	step("nothing new at last", nil, map[int32]int16{})
}

// TestFetchSessionRecreatedTopicByID: a session by topic ids (v13) whose topic is
// deleted and created again under the same name answers the old id UNKNOWN_TOPIC_ID
// at each fetch and stays usable: the client forgets the old id and adds the new one
// in the same incremental fetch and reads the new topic. A session whose last
// partition is forgotten is closed, as in Kafka: answered without a session id, and
// unknown after.
func TestFetchSessionRecreatedTopicByID(t *testing.T) {
	t.Parallel()
	b := testutil.StartBroker(t)
	adm := newAdmin(t, b)
	createTopic(t, adm, "session-recreated", 1, nil)
	old := newSessionFetcher(t, b, adm, "session-recreated", 13)
	resp := old.fetch(0, 0, []fetchPart{{0, 0}}, nil)
	sid := resp.SessionID
	if resp.ErrorCode != 0 || sid == 0 {
		t.Fatalf("full fetch: error %d, session %d", resp.ErrorCode, sid)
	}
	if _, err := adm.DeleteTopics(ctxT(t, 10*time.Second), "session-recreated"); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 10*time.Second, func() bool {
		details, err := adm.ListTopics(ctxT(t, 10*time.Second), "session-recreated")
		return err == nil && !details.Has("session-recreated")
	}, "the topic deleted")
	createTopic(t, adm, "session-recreated", 1, nil)
	testutil.WaitFor(t, 10*time.Second, func() bool {
		details, err := adm.ListTopics(ctxT(t, 10*time.Second), "session-recreated")
		return err == nil && details["session-recreated"].Err == nil && details["session-recreated"].ID != old.id
	}, "the topic recreated")
	producer := newClient(t, b, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	produceSync(t, producer, &kgo.Record{Topic: "session-recreated", Value: value(0)})
	fresh := newSessionFetcher(t, b, adm, "session-recreated", 13)
	if fresh.id == old.id || fresh.id == ([16]byte{}) {
		t.Fatalf("the recreated topic's id %x, the old one's %x", fresh.id, old.id)
	}
	for epoch := int32(1); epoch <= 2; epoch++ {
		resp := old.fetch(sid, epoch, nil, nil)
		if resp.ErrorCode != 0 || resp.SessionID != sid || len(resp.Topics) != 1 ||
			resp.Topics[0].Partitions[0].ErrorCode != kerr.UnknownTopicID.Code {
			t.Fatalf("epoch %d with the old topic id: error %d, session %d, topics %+v", epoch, resp.ErrorCode, resp.SessionID, resp.Topics)
		}
	}
	// Forget the old id, add the new one.
	req := kmsg.NewPtrFetchRequest()
	req.Version, req.MaxWaitMillis, req.MinBytes, req.MaxBytes = 13, 20, 1, 1<<20
	req.SessionID, req.SessionEpoch = sid, 3
	rt := kmsg.NewFetchRequestTopic()
	rt.TopicID = fresh.id
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.PartitionMaxBytes = 1 << 20
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	ft := kmsg.NewFetchRequestForgottenTopic()
	ft.TopicID, ft.Partitions = old.id, []int32{0}
	req.ForgottenTopics = append(req.ForgottenTopics, ft)
	resp, err := req.RequestWith(ctxT(t, 10*time.Second), old.cl.Broker(1))
	if err != nil {
		t.Fatal(err)
	}
	if resp.ErrorCode != 0 || resp.SessionID != sid || len(resp.Topics) != 1 || resp.Topics[0].TopicID != fresh.id ||
		resp.Topics[0].Partitions[0].ErrorCode != 0 || countRecords(t, resp.Topics[0].Partitions[0].RecordBatches) != 1 {
		t.Fatalf("epoch 3 with the new topic id: error %d, session %d, topics %+v", resp.ErrorCode, resp.SessionID, resp.Topics)
	}
	if got := respPartitions(t, fresh.fetch(sid, 4, []fetchPart{{0, 1}}, nil)); len(got) != 0 {
		t.Fatalf("epoch 4: answered %v, want nothing", got)
	}
	// Forgetting the last partition closes the session.
	if resp := fresh.fetch(sid, 5, nil, []int32{0}); resp.ErrorCode != 0 || resp.SessionID != 0 || len(resp.Topics) != 0 {
		t.Fatalf("forgetting the last partition: error %d, session %d, %d topics", resp.ErrorCode, resp.SessionID, len(resp.Topics))
	}
	if resp := fresh.fetch(sid, 6, nil, nil); resp.ErrorCode != kerr.FetchSessionIDNotFound.Code {
		t.Fatalf("the emptied session: error %d, want FETCH_SESSION_ID_NOT_FOUND", resp.ErrorCode)
	}
}
