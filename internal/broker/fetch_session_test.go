package broker

import (
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-streaming/samsa/internal/testutil"
)

// TestFetchSessionKeepsNews: an incremental response leaves out a partition with
// nothing new, but keeps one whose answer is a preferred read replica (KIP-392) or a
// diverging epoch, though neither brings records or moves an offset.
func TestFetchSessionKeepsNews(t *testing.T) {
	var fs fetchSessions
	fs.init(10)
	now := time.Now()
	request := func(sessionID, epoch int32) *kmsg.FetchRequest {
		r := kmsg.NewPtrFetchRequest()
		r.Version, r.SessionID, r.SessionEpoch = 12, sessionID, epoch
		if epoch == 0 {
			rt := kmsg.NewFetchRequestTopic()
			rt.Topic = "t"
			for _, p := range []int32{0, 1} {
				rp := kmsg.NewFetchRequestTopicPartition()
				rp.Partition = p
				rt.Partitions = append(rt.Partitions, rp)
			}
			r.Topics = append(r.Topics, rt)
		}
		return r
	}
	answer := func(mod func(*fetchPartitionResult)) []fetchTopicResult {
		t := fetchTopicResult{name: "t"}
		for _, p := range []int32{0, 1} {
			pr := fetchPartitionResult{partition: p, highWatermark: 5, lastStableOffset: 5, logStartOffset: 0, preferredReadReplica: -1}
			if p == 1 && mod != nil {
				mod(&pr)
			}
			t.partitions = append(t.partitions, pr)
		}
		return []fetchTopicResult{t}
	}
	answered := func(topics []fetchTopicResult) []int32 {
		var out []int32
		for _, t := range topics {
			for _, p := range t.partitions {
				out = append(out, p.partition)
			}
		}
		return out
	}

	_, use, code := fs.begin(request(0, 0), now)
	if code != 0 || use.session == nil {
		t.Fatalf("full fetch: code %d, session %v", code, use.session)
	}
	sessionID := use.session.id
	if got, _ := use.finish(answer(nil), false); len(answered(got)) != 2 {
		t.Fatalf("full fetch answered %v, want both partitions", answered(got))
	}
	for i, c := range []struct {
		name string
		mod  func(*fetchPartitionResult)
		want int
	}{
		{"nothing new", nil, 0},
		{"a preferred read replica", func(p *fetchPartitionResult) { p.preferredReadReplica = 2 }, 1},
		{"a diverging epoch", func(p *fetchPartitionResult) { p.diverging = true }, 1},
		{"nothing new again", nil, 0},
	} {
		_, use, code := fs.begin(request(sessionID, int32(i+1)), now)
		if code != 0 {
			t.Fatalf("%s: incremental fetch: code %d", c.name, code)
		}
		got, id := use.finish(answer(c.mod), false)
		if parts := answered(got); len(parts) != c.want || id != sessionID || c.want == 1 && parts[0] != 1 {
			t.Errorf("%s: answered partitions %v in session %d, want %d of them (partition 1) in %d", c.name, parts, id, c.want, sessionID)
		}
	}
}

// TestFetchSessionFollowsARecreatedTopic: a session keeps the partitions it looked up
// while none is added or removed; a topic deleted and created again under the same
// name (a session by names, Fetch v12) is read from its new partition, with its new
// record, not from the closed one.
func TestFetchSessionFollowsARecreatedTopic(t *testing.T) {
	b := startTestBroker(t)
	createTestTopic(t, b, "again", 1)
	fetch := func(sessionID, epoch int32) *kmsg.FetchResponse {
		t.Helper()
		r := kmsg.NewPtrFetchRequest()
		r.Version, r.ReplicaID, r.MaxBytes, r.SessionID, r.SessionEpoch = 12, -1, 1<<20, sessionID, epoch
		if epoch == 0 {
			rt := kmsg.NewFetchRequestTopic()
			rt.Topic = "again"
			rp := kmsg.NewFetchRequestTopicPartition()
			rp.Partition, rp.PartitionMaxBytes, rp.CurrentLeaderEpoch = 0, 1<<20, -1
			rt.Partitions = append(rt.Partitions, rp)
			r.Topics = append(r.Topics, rt)
		}
		select {
		case resp := <-sendFetch(t, b, r):
			return resp
		case <-time.After(10 * time.Second):
			t.Fatal("no fetch response")
			return nil
		}
	}
	first := fetch(0, 0)
	if first.SessionID == 0 || first.ErrorCode != 0 {
		t.Fatalf("full fetch: session %d, error %v", first.SessionID, kerr.ErrorForCode(first.ErrorCode))
	}
	if resp := fetch(first.SessionID, 1); len(resp.Topics) != 0 {
		t.Fatalf("incremental fetch with nothing new answered %d topics", len(resp.Topics))
	}

	del := kmsg.NewPtrDeleteTopicsRequest()
	del.TopicNames = []string{"again"}
	dt := kmsg.NewDeleteTopicsRequestTopic()
	dt.Topic = kmsg.StringPtr("again")
	del.Topics = append(del.Topics, dt)
	if code := call[*kmsg.DeleteTopicsResponse](t, b, del).Topics[0].ErrorCode; code != 0 {
		t.Fatalf("delete: %v", kerr.ErrorForCode(code))
	}
	testutil.WaitFor(t, 10*time.Second, func() bool { return b.replicas.Get("again", 0) == nil }, "the deleted partition gone")
	createTestTopic(t, b, "again", 1)
	if code := produceTo(t, b, "again"); code != 0 {
		t.Fatalf("produce: %v", kerr.ErrorForCode(code))
	}
	resp := fetch(first.SessionID, 2)
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		t.Fatalf("incremental fetch after the topic came back answered %+v, want its partition", resp.Topics)
	}
	if p := resp.Topics[0].Partitions[0]; p.ErrorCode != 0 || p.HighWatermark != 1 || len(p.RecordBatches) == 0 {
		t.Fatalf("the recreated partition answered error %v, high watermark %d, %d bytes; want its record",
			kerr.ErrorForCode(p.ErrorCode), p.HighWatermark, len(p.RecordBatches))
	}
}

// TestFetchSessionOddPartitionNumbers: partition numbers a client may send, -1
// included, stay in the session as sent when other partitions are forgotten, and the
// session's effective request keeps matching its map.
func TestFetchSessionOddPartitionNumbers(t *testing.T) {
	var fs fetchSessions
	fs.init(10)
	now := time.Now()
	request := func(sessionID, epoch int32, add []int32, forget []int32) *kmsg.FetchRequest {
		r := kmsg.NewPtrFetchRequest()
		r.Version, r.SessionID, r.SessionEpoch = 12, sessionID, epoch
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = "t"
		for _, p := range add {
			rp := kmsg.NewFetchRequestTopicPartition()
			rp.Partition = p
			rt.Partitions = append(rt.Partitions, rp)
		}
		r.Topics = append(r.Topics, rt)
		if len(forget) > 0 {
			ft := kmsg.NewFetchRequestForgottenTopic()
			ft.Topic, ft.Partitions = "t", forget
			r.ForgottenTopics = append(r.ForgottenTopics, ft)
		}
		return r
	}
	_, use, code := fs.begin(request(0, 0, []int32{0, -1, 1}, nil), now)
	if code != 0 || use.session == nil {
		t.Fatalf("full fetch: code %d", code)
	}
	s := use.session
	// Each fetch is answered before the next: the partitions as the fetch path leaves
	// them, with nothing to report.
	answered := func(use fetchSessionUse) {
		var topics []fetchTopicResult
		for _, rt := range s.topics {
			t := fetchTopicResult{name: rt.Topic}
			for _, rp := range rt.Partitions {
				t.partitions = append(t.partitions, fetchPartitionResult{partition: rp.Partition, highWatermark: -1, lastStableOffset: -1, logStartOffset: -1, preferredReadReplica: -1})
			}
			topics = append(topics, t)
		}
		use.finish(topics, false)
	}
	check := func(what string, want ...int32) {
		t.Helper()
		var got []int32
		for ti, tp := range s.topics {
			for pi, p := range tp.Partitions {
				got = append(got, p.Partition)
				if sp := s.partitions[s.key(&s.topics[ti], p.Partition)]; sp == nil || sp.topicIndex != ti || sp.partIndex != pi || s.byIndex[ti][pi] != sp {
					t.Fatalf("%s: partition %d at [%d][%d] does not match the session's map", what, p.Partition, ti, pi)
				}
			}
		}
		if !slices.Equal(got, want) || len(s.partitions) != len(want) {
			t.Fatalf("%s: session holds %v (%d in its map), want %v", what, got, len(s.partitions), want)
		}
	}
	check("opened", 0, -1, 1)
	answered(use)
	_, use, code = fs.begin(request(s.id, 1, []int32{2}, []int32{0}), now)
	if code != 0 {
		t.Fatalf("incremental fetch: code %d", code)
	}
	check("0 forgotten, 2 added", -1, 1, 2)
	answered(use)
	if _, _, code := fs.begin(request(s.id, 2, []int32{-1, 3}, []int32{1}), now); code != 0 {
		t.Fatalf("incremental fetch: code %d", code)
	}
	check("1 forgotten, -1 updated, 3 added", -1, 2, 3)
}

// TestFetchSessionMovesServedPartitionsLast: after a fetch the byte limit cut short,
// the partitions that returned records go after the others in the session's order (a
// topic then appearing twice), so the next fetch reads the others first; partitions
// added later join their topic's last entry, and forgetting one keeps the order.
func TestFetchSessionMovesServedPartitionsLast(t *testing.T) {
	var fs fetchSessions
	fs.init(10)
	now := time.Now()
	type tp = sessionPart
	request := sessionRequest
	order := func(r *kmsg.FetchRequest) (out []tp) {
		for _, rt := range r.Topics {
			for _, rp := range rt.Partitions {
				out = append(out, tp{rt.Topic, rp.Partition})
			}
		}
		return out
	}
	// answer is a response in the effective request's order, with records from the
	// partitions in served.
	answer := func(r *kmsg.FetchRequest, served ...tp) []fetchTopicResult {
		var out []fetchTopicResult
		for _, rt := range r.Topics {
			t := fetchTopicResult{name: rt.Topic}
			for _, rp := range rt.Partitions {
				pr := fetchPartitionResult{partition: rp.Partition, highWatermark: 100, lastStableOffset: 100, preferredReadReplica: -1}
				if slices.Contains(served, tp{rt.Topic, rp.Partition}) {
					pr.size = 1000
				}
				t.partitions = append(t.partitions, pr)
			}
			out = append(out, t)
		}
		return out
	}
	eff, use, code := fs.begin(request(0, 0, []tp{{"a", 0}, {"a", 1}, {"b", 0}}, nil), now)
	if code != 0 || use.session == nil {
		t.Fatalf("full fetch: code %d, session %v", code, use.session)
	}
	id := use.session.id
	use.finish(answer(eff, tp{"a", 0}, tp{"a", 1}, tp{"b", 0}), false)

	steps := []struct {
		name        string
		add, forget []tp
		served      []tp
		limited     bool
		want        []tp // the order the fetch reads
	}{
		{"a fetch the limit did not cut keeps the order", nil, nil, []tp{{"a", 0}}, false, []tp{{"a", 0}, {"a", 1}, {"b", 0}}},
		{"a cut fetch moves a-0 last", nil, nil, []tp{{"a", 0}}, true, []tp{{"a", 0}, {"a", 1}, {"b", 0}}},
		{"the next reads a-1 first; a-2 joins a's last entry", []tp{{"a", 2}}, nil, []tp{{"a", 1}, {"b", 0}}, true, []tp{{"a", 1}, {"b", 0}, {"a", 0}, {"a", 2}}},
		// a-0 and a-2 stay first, a-1 joins their entry, b-0 after.
		{"after a-1 and b-0 went last, forgetting a-2", nil, []tp{{"a", 2}}, nil, true, []tp{{"a", 0}, {"a", 1}, {"b", 0}}},
	}
	for i, st := range steps {
		eff, use, code := fs.begin(request(id, int32(i+1), st.add, st.forget), now)
		if code != 0 {
			t.Fatalf("%s: incremental fetch: code %d", st.name, code)
		}
		if got := order(eff); !slices.Equal(got, st.want) {
			t.Fatalf("%s: the fetch reads %v, want %v", st.name, got, st.want)
		}
		use.finish(answer(eff, st.served...), st.limited)
	}
	// Nothing was served last: the order stays, a's partitions one entry again.
	eff, _, _ = fs.begin(request(id, int32(len(steps)+1), nil, nil), now)
	if got, want := order(eff), []tp{{"a", 0}, {"a", 1}, {"b", 0}}; !slices.Equal(got, want) || len(eff.Topics) != 2 {
		t.Fatalf("after the last fetch the session reads %v in %d topic entries, want %v in 2", got, len(eff.Topics), want)
	}
}

// TestFetchSessionOneFetchAtATime: a fetch that names a session another fetch is
// still using — a client pipelining its session's fetches, on one connection or two —
// is refused with INVALID_FETCH_SESSION_EPOCH rather than sharing the session, and
// the session serves its next epoch once the first fetch is answered. Racing pairs of
// fetches (an epoch and the one after it) then always serve the right epoch: under
// -race, the session's state is touched by one fetch at a time.
func TestFetchSessionOneFetchAtATime(t *testing.T) {
	b := startTestBroker(t)
	shareTestTopic(t, b, "pipelined")
	tp, _ := b.image().Topic("pipelined")
	part := b.replicas.Get("pipelined", 0)
	fetch := func(id, epoch, maxWait int32) <-chan *kmsg.FetchResponse {
		r := consumerFetch(maxWait, 1, 1<<20, tp)
		r.SessionID, r.SessionEpoch = id, epoch
		if epoch > 0 {
			r.Topics = nil // incremental: nothing changed
		}
		return sendFetch(t, b, r)
	}
	// forgetting drops the partition from the session: had it been applied while
	// epoch 1 waited, epoch 1's answer would have found its partition gone (which
	// panicked the broker before sessions were busy while used).
	forgetting := func(id, epoch int32) <-chan *kmsg.FetchResponse {
		r := consumerFetch(0, 1, 1<<20, tp)
		r.SessionID, r.SessionEpoch, r.Topics = id, epoch, nil
		ft := kmsg.NewFetchRequestForgottenTopic()
		ft.TopicID, ft.Partitions = tp.ID, []int32{0}
		r.ForgottenTopics = append(r.ForgottenTopics, ft)
		return sendFetch(t, b, r)
	}
	opened := <-fetch(0, 0, 0)
	if opened.ErrorCode != 0 || opened.SessionID == 0 {
		t.Fatalf("full fetch: %v, session %d", kerr.ErrorForCode(opened.ErrorCode), opened.SessionID)
	}
	id := opened.SessionID

	polling := fetch(id, 1, 10_000)
	testutil.WaitFor(t, 5*time.Second, func() bool { return part.Waiting() == 1 }, "epoch 1 long-polling")
	if r := <-forgetting(id, 2); r.ErrorCode != kerr.InvalidFetchSessionEpoch.Code {
		t.Fatalf("epoch 2 sent while epoch 1 waits: %v, want INVALID_FETCH_SESSION_EPOCH", kerr.ErrorForCode(r.ErrorCode))
	}
	if code := produceTo(t, b, "pipelined"); code != 0 {
		t.Fatalf("produce: %v", kerr.ErrorForCode(code))
	}
	select {
	case r := <-polling:
		if r.ErrorCode != 0 || r.SessionID != id || len(r.Topics) != 1 || len(r.Topics[0].Partitions[0].RecordBatches) == 0 {
			t.Fatalf("epoch 1 answered %v, session %d, %d topics: want the record in session %d",
				kerr.ErrorForCode(r.ErrorCode), r.SessionID, len(r.Topics), id)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the write did not wake epoch 1")
	}
	if r := <-fetch(id, 2, 0); r.ErrorCode != 0 || r.SessionID != id {
		t.Fatalf("epoch 2 after epoch 1 was answered: %v, session %d", kerr.ErrorForCode(r.ErrorCode), r.SessionID)
	}

	epoch := int32(3)
	for range 200 {
		right, ahead := fetch(id, epoch, 0), fetch(id, epoch+1, 0)
		if r := <-right; r.ErrorCode != 0 || r.SessionID != id {
			t.Fatalf("epoch %d beside epoch %d: %v, session %d", epoch, epoch+1, kerr.ErrorForCode(r.ErrorCode), r.SessionID)
		}
		epoch++
		if r := <-ahead; r.ErrorCode == 0 {
			epoch++ // it came after the first was answered
		}
	}
}

// sessionPart names a partition of a fetch session in tests.
type sessionPart struct {
	topic string
	part  int32
}

// sessionRequest is a Fetch (v12) of session sessionID at epoch that adds (or
// updates) the partitions add, each in a topic entry of its own, and forgets those of
// forget.
func sessionRequest(sessionID, epoch int32, add, forget []sessionPart) *kmsg.FetchRequest {
	r := kmsg.NewPtrFetchRequest()
	r.Version, r.SessionID, r.SessionEpoch = 12, sessionID, epoch
	for _, x := range add {
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = x.topic
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition = x.part
		rt.Partitions = append(rt.Partitions, rp)
		r.Topics = append(r.Topics, rt)
	}
	for _, x := range forget {
		ft := kmsg.NewFetchRequestForgottenTopic()
		ft.Topic, ft.Partitions = x.topic, []int32{x.part}
		r.ForgottenTopics = append(r.ForgottenTopics, ft)
	}
	return r
}

// TestFetchSessionResendsAfterAnError: a partition answered with an error is answered
// again once the error is gone, though its offsets are those the session reported
// before the error (Kafka forgets the cached high watermark of a partition in error).
func TestFetchSessionResendsAfterAnError(t *testing.T) {
	var fs fetchSessions
	fs.init(10)
	now := time.Now()
	answer := func(errorCode int16) []fetchTopicResult {
		return []fetchTopicResult{{name: "t", partitions: []fetchPartitionResult{{partition: 0, errorCode: errorCode,
			highWatermark: 5, lastStableOffset: 5, logStartOffset: 0, preferredReadReplica: -1}}}}
	}
	_, use, code := fs.begin(sessionRequest(0, 0, []sessionPart{{"t", 0}}, nil), now)
	if code != 0 || use.session == nil {
		t.Fatalf("full fetch: code %d, session %v", code, use.session)
	}
	id := use.session.id
	use.finish(answer(0), false)
	for epoch, c := range []struct {
		name      string
		errorCode int16
		want      int
	}{
		{"nothing new", 0, 0},
		{"an error", kerr.OffsetOutOfRange.Code, 1},
		{"the error gone", 0, 1},
		{"nothing new again", 0, 0},
	} {
		_, use, code := fs.begin(sessionRequest(id, int32(epoch+1), nil, nil), now)
		if code != 0 {
			t.Fatalf("%s: code %d", c.name, code)
		}
		got, _ := use.finish(answer(c.errorCode), false)
		n := 0
		for _, tr := range got {
			n += len(tr.partitions)
		}
		if n != c.want {
			t.Errorf("%s: answered %d partitions, want %d", c.name, n, c.want)
		}
	}
}

// TestFetchSessionEvictionAsKafka: a full cache gives a new session the slot of the
// least recently used session idle for fetchSessionEvictionIdle; else of the first
// session in Kafka's order (consumers' before followers', then fewest partitions)
// among those it may evict, if the new one comes after it. A consumer may evict only
// a session older than fetchSessionEvictionIdle at its last use; a follower also any
// consumer's session.
func TestFetchSessionEvictionAsKafka(t *testing.T) {
	t0 := time.Now()
	parts := func(n int) []sessionPart {
		var out []sessionPart
		for i := range n {
			out = append(out, sessionPart{"t", int32(i)})
		}
		return out
	}
	open := func(fs *fetchSessions, n int, follower bool, at time.Time) int32 {
		t.Helper()
		r := sessionRequest(0, 0, parts(n), nil)
		if follower {
			r.ReplicaID = 2
		}
		_, use, code := fs.begin(r, at)
		if code != 0 {
			t.Fatalf("full fetch: code %d", code)
		}
		if use.session == nil {
			return 0
		}
		_, id := use.finish(nil, false)
		return id
	}
	use := func(fs *fetchSessions, id, epoch int32, at time.Time) {
		t.Helper()
		_, u, code := fs.begin(sessionRequest(id, epoch, nil, nil), at)
		if code != 0 {
			t.Fatalf("session %d epoch %d: code %d", id, epoch, code)
		}
		u.finish(nil, false)
	}
	cached := func(fs *fetchSessions, id int32) bool {
		fs.mu.Lock()
		defer fs.mu.Unlock()
		return fs.mu.sessions[id] != nil
	}

	// A session just made is not evicted by a bigger one.
	var fs fetchSessions
	fs.init(1)
	young := open(&fs, 1, false, t0)
	if id := open(&fs, 2, false, t0.Add(time.Second)); id != 0 || !cached(&fs, young) {
		t.Errorf("a bigger session evicted one made a second before (new session %d)", id)
	}
	// Used once it is older than the eviction time, it is.
	use(&fs, young, 1, t0.Add(fetchSessionEvictionIdle+time.Second))
	if id := open(&fs, 1, false, t0.Add(fetchSessionEvictionIdle+2*time.Second)); id != 0 || !cached(&fs, young) {
		t.Errorf("a session as big evicted it (new session %d)", id)
	}
	if id := open(&fs, 2, false, t0.Add(fetchSessionEvictionIdle+3*time.Second)); id == 0 || cached(&fs, young) {
		t.Errorf("a bigger session did not evict an old one")
	}

	// A follower evicts a consumer's session, even a bigger and younger one, before a
	// follower's smaller one; a consumer never evicts a follower's young session.
	fs.init(2)
	follower := open(&fs, 5, true, t0)
	consumer := open(&fs, 10, false, t0)
	if id := open(&fs, 20, false, t0.Add(time.Second)); id != 0 {
		t.Errorf("a consumer's session evicted a young one")
	}
	if id := open(&fs, 3, true, t0.Add(time.Second)); id == 0 || cached(&fs, consumer) || !cached(&fs, follower) {
		t.Errorf("a follower's session of 3 partitions did not take the consumer's slot (new session %d)", id)
	}
	// Idle long enough, the least recently used session goes, whatever its size.
	later := t0.Add(fetchSessionEvictionIdle + time.Minute)
	if id := open(&fs, 1, false, later); id == 0 || cached(&fs, follower) {
		t.Errorf("a stale follower's session was not evicted (new session %d)", id)
	}
}

// TestFetchUnknownTopicIDWaits: a fetch naming an unknown topic id (a session's topic
// deleted since) beside a partition with nothing to read waits for max.wait.ms as
// Kafka's does, whose ReplicaManager never sees the unresolved partitions, rather than
// answering at once, each fetch of such a session then coming straight back.
func TestFetchUnknownTopicIDWaits(t *testing.T) {
	b := startTestBroker(t)
	createTestTopic(t, b, "idle-beside-gone", 1)
	tp, _ := b.image().Topic("idle-beside-gone")
	gone := *tp
	gone.ID = [16]byte{0xde, 0xad}
	r := consumerFetch(1500, 1, 1<<20, tp, &gone)
	start := time.Now()
	var resp *kmsg.FetchResponse
	select {
	case resp = <-sendFetch(t, b, r):
	case <-time.After(10 * time.Second):
		t.Fatal("no fetch response")
	}
	if waited := time.Since(start); waited < time.Second {
		t.Errorf("answered after %v, want max.wait.ms (1.5 s)", waited)
	}
	codes := map[[16]byte]int16{}
	for _, rt := range resp.Topics {
		codes[rt.TopicID] = rt.Partitions[0].ErrorCode
	}
	if len(codes) != 2 || codes[tp.ID] != 0 || codes[gone.ID] != kerr.UnknownTopicID.Code {
		t.Errorf("answered %v, want the unknown id with UNKNOWN_TOPIC_ID", codes)
	}
}
