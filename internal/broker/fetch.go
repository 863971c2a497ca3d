package broker

// Fetch (key 1), versions 4–18 (v17 and v18 add only follower fields).
//
// Reads whole batches from each partition's log — for a consumer up to the high
// watermark (up to the last stable offset for read_committed, with the aborted
// transactions overlapping what is returned, so that the consumer drops their
// records), for a follower (replica id ≥ 0) up to the log end — within partition max
// bytes and the response's max bytes; the first batch of the first non-empty partition
// is returned whole even when larger (KIP-74). Topics are named by ID from v13. Record
// bytes are not copied: the response carries file ranges that the server writes with
// sendfile.
//
// min.bytes / max.wait.ms make a delayed operation: when less than min.bytes is
// available the request waits, woken whenever a requested partition's high watermark
// moves (the last stable offset moves only with it), until enough data arrives below
// the fetch's bound (high watermark or last stable offset) or max.wait.ms passes.
//
// A follower names itself by ReplicaID before v15 and by ReplicaState from v15, with
// its broker epoch: a fetch of an older incarnation than the one registered (or than
// one already heard from) is answered NOT_LEADER_OR_FOLLOWER and moves nothing
// (KIP-903; serveFollower).
//
// From v11 a consumer's fetch may be served by a follower, and a leader configured
// with the rack-aware replica selector names the replica a consumer should read from
// (KIP-392; fetch_consumer.go).
//
// Incremental fetch sessions (KIP-227) are resolved in fetch_session.go: an
// incremental request is turned into the session's full partition list before
// anything is read, and the response keeps only partitions with something new. A
// session lives on the broker it was made with, leader or follower alike. A partition
// named twice is answered once, as Kafka keys a fetch's partitions by topic and
// partition: where first named, from its last mention's offset (dropRepeats; a
// session keeps it once too).

import (
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-streaming/samsa/internal/auth"
	"github.com/samsa-streaming/samsa/internal/metadata"
	"github.com/samsa-streaming/samsa/internal/protocol"
	"github.com/samsa-streaming/samsa/internal/replica"
	"github.com/samsa-streaming/samsa/internal/storage"
)

func init() {
	register(kmsg.Fetch, 4, 18, (*Broker).handleFetch)
	fetchStates.New = newFetchState
}

func (b *Broker) handleFetch(req *protocol.Request) <-chan protocol.Response {
	r, session, code := b.fetchSessions.begin(req.Body.(*kmsg.FetchRequest), b.clock.Now())
	if code != 0 {
		return protocol.Ready(fetchSessionError(req.Body.(*kmsg.FetchRequest), code))
	}
	replicaID, replicaEpoch := r.ReplicaID, int64(-1) // before v15 a follower's broker epoch is unknown
	if r.Version >= 15 {
		replicaID, replicaEpoch = r.ReplicaState.ID, r.ReplicaState.Epoch
	}
	st := fetchStates.Get().(*fetchState)
	if session.session == nil { // a session keeps each partition once already
		r = st.dropRepeats(r)
	}
	st.replicaID, st.replicaEpoch, st.session, st.req = replicaID, replicaEpoch, session, req
	b.authorizeFetch(req, r, st)
	total, answerNow := b.readFetch(r, st)
	if answerNow || total >= int64(r.MinBytes) || r.MaxWaitMillis <= 0 || len(st.parts) == 0 {
		return protocol.Ready(b.fetchResponse(r, st))
	}
	out := make(chan protocol.Response, 1)
	b.answerLater(req, out, func() {
		wake := make(chan struct{}, 1)
		expired, stop := b.after(time.Duration(r.MaxWaitMillis) * time.Millisecond)
		defer stop()
		register := func(i int) {
			if p := st.parts[i]; replicaID >= 0 {
				st.marks[i] = p.WaitLogEnd(wake) // a follower waits for new records, not for the high watermark
			} else {
				st.marks[i] = p.Wait(wake)
			}
		}
		// A partition is read again only once its change count moved past the one it
		// was registered at (which also says the wake-up spent the registration), and
		// registered again before it is read, so a change while it is read wakes this
		// fetch. A fetch of 10,000 idle partitions is not read whole on every wake-up.
		var changed []int
		for i, read := range st.marks {
			if register(i); st.marks[i] != read {
				changed = append(changed, i) // it moved between its read and the registration
			}
		}
		for {
			if len(changed) > 0 {
				total, answerNow = b.readAgain(r, st, changed)
				if answerNow || total >= int64(r.MinBytes) {
					break
				}
			}
			select {
			case <-wake:
				changed = st.changed(changed[:0])
				for _, i := range changed {
					register(i)
				}
				continue
			case <-expired:
			}
			b.readFetch(r, st)
			break
		}
		// Answered: an idle partition keeps no trace of this fetch. (Before the answer
		// is handed over: once written, st goes back to the pool.)
		for _, p := range st.parts {
			if replicaID >= 0 {
				p.StopWaitingLogEnd(wake)
			} else {
				p.StopWaiting(wake)
			}
		}
		out <- b.fetchResponse(r, st)
	})
	return out
}

// fetchState is what serving one Fetch request takes: the partitions' results, the file
// ranges of all of them in one slice, and the encoded response. States are pooled, their
// slices keeping their capacity, so a Fetch of many partitions allocates nothing per
// partition; one goes back to the pool once its response has been written.
type fetchState struct {
	replicaID int32 // a follower's fetch (≥ 0) or a consumer's (-1)
	// replicaEpoch is a follower's broker epoch (Fetch v15's ReplicaState), -1 unknown.
	replicaEpoch int64
	denied       []bool // by topic of the request: TOPIC_AUTHORIZATION_FAILED; empty without an authorizer
	req          *protocol.Request
	topics       []fetchTopicResult
	// parts are the partitions read (to wait on), with a change count each
	// (replica.Partition.Changes: loaded before it was read, then the one its
	// registration to wait returned) and where its request and result are (slots:
	// topic and partition index, the same in both).
	parts   []*replica.Partition
	marks   []uint64
	slots   []fetchSlot
	total   int64 // record bytes in the results
	again   bool  // readAgain is reading parts already watched
	ranges  []storage.FileRange
	aborted []storage.AbortedTxn // of every read_committed partition
	w       chunkWriter
	written func() // release, made once per pooled state (a method value allocates)
	session fetchSessionUse
	// firstNamed is dropRepeats' scratch: where each partition of the request is
	// answered.
	firstNamed map[fetchSessionKey]fetchSlot
	// partitionBits is mayRepeat's scratch: the partition ids of one topic entry
	// seen so far, all zero between calls.
	partitionBits []uint64
	// limited: the fetch's byte limit left a partition less than its own limit (its
	// session then moves the partitions that returned records last).
	limited bool
}

// fetchStates holds idle fetchStates (New is set in init: release puts back).
var fetchStates sync.Pool

func newFetchState() any {
	st := new(fetchState)
	st.written = st.release
	return st
}

// fetchSlot locates a partition in the request and in the results.
type fetchSlot struct{ topic, partition int32 }

// dropRepeats returns r with each partition named once, as Kafka keys a fetch's
// partitions by topic (its id from v13) and partition: one named again is answered
// once, at the place it is first named, from its last mention's fetch offset and
// bounds; a topic entry left with no partition is dropped. When nothing repeats, r
// itself is returned and nothing allocated.
func (st *fetchState) dropRepeats(r *kmsg.FetchRequest) *kmsg.FetchRequest {
	key := func(rt *kmsg.FetchRequestTopic, partition int32) fetchSessionKey {
		if r.Version >= 13 {
			return fetchSessionKey{id: rt.TopicID, part: partition}
		}
		return fetchSessionKey{topic: rt.Topic, part: partition}
	}
	if st.firstNamed == nil {
		st.firstNamed = map[fetchSessionKey]fetchSlot{}
	}
	seen := st.firstNamed
	if !st.mayRepeat(r, key) {
		return r
	}
	clear(seen)
	eff := *r
	eff.Topics = make([]kmsg.FetchRequestTopic, 0, len(r.Topics))
	for i := range r.Topics {
		rt := &r.Topics[i]
		ti := len(eff.Topics)
		eff.Topics = append(eff.Topics, *rt)
		eff.Topics[ti].Partitions = nil
		for _, rp := range rt.Partitions {
			k := key(rt, rp.Partition)
			if at, ok := seen[k]; ok {
				eff.Topics[at.topic].Partitions[at.partition] = rp
				continue
			}
			t := &eff.Topics[ti]
			seen[k] = fetchSlot{int32(ti), int32(len(t.Partitions))}
			t.Partitions = append(t.Partitions, rp)
		}
		if len(eff.Topics[ti].Partitions) == 0 && len(rt.Partitions) > 0 {
			eff.Topics = eff.Topics[:ti]
		}
	}
	return &eff
}

// maxPartitionBitmap bounds the partition ids mayRepeat tracks in its bitmap; a
// request naming a larger one takes dropRepeats' map.
const maxPartitionBitmap = 1 << 16

// mayRepeat reports whether some partition of r may be named twice, hashing its
// topics but not its partitions: a follower fetches every partition it replicates
// without a session, and a map of them all cost 50 µs per 1,000 partitions. A topic
// named twice, or a partition id outside the bitmap, answers true.
func (st *fetchState) mayRepeat(r *kmsg.FetchRequest, key func(*kmsg.FetchRequestTopic, int32) fetchSessionKey) bool {
	seen := st.firstNamed
	clear(seen)
	if len(r.Topics) > 1 {
		for i := range r.Topics {
			k := key(&r.Topics[i], 0)
			if _, ok := seen[k]; ok {
				return true
			}
			seen[k] = fetchSlot{}
		}
	}
	for i := range r.Topics {
		parts := r.Topics[i].Partitions
		repeat := false
		for _, rp := range parts {
			p := rp.Partition
			if p < 0 || p >= maxPartitionBitmap {
				repeat = true
				break
			}
			if w := int(p / 64); w >= len(st.partitionBits) {
				st.partitionBits = append(st.partitionBits, make([]uint64, w+1-len(st.partitionBits))...)
			}
			bit := &st.partitionBits[p/64]
			if *bit&(1<<(p%64)) != 0 {
				repeat = true
				break
			}
			*bit |= 1 << (p % 64)
		}
		for _, rp := range parts { // the bitmap is left clear for the next topic
			if p := rp.Partition; p >= 0 && p < maxPartitionBitmap {
				st.partitionBits[p/64] = 0
			}
		}
		if repeat {
			return true
		}
	}
	return false
}

// watch records that p is being read, its change count loaded just before: a fetch
// that waits waits on it. Reading it again (readAgain) changes nothing: it is read
// after its registration, whose count is the mark then.
func (st *fetchState) watch(p *replica.Partition, mark uint64) {
	if st.again {
		return
	}
	st.parts = append(st.parts, p)
	st.marks = append(st.marks, mark)
}

// changed appends to dst the indexes of the parts whose change count moved past
// their mark.
func (st *fetchState) changed(dst []int) []int {
	for i, p := range st.parts {
		if p.Changes() != st.marks[i] {
			dst = append(dst, i)
		}
	}
	return dst
}

// release returns the state to the pool.
func (st *fetchState) release() {
	clear(st.parts)
	clear(st.ranges) // they hold *os.File
	st.session, st.req = fetchSessionUse{}, nil
	fetchStates.Put(st)
}

// fetchResponse encodes the final response and records its metrics.
func (b *Broker) fetchResponse(r *kmsg.FetchRequest, st *fetchState) protocol.Response {
	var sessionID int32
	st.topics, sessionID = st.session.finish(st.topics, st.limited)
	for _, t := range st.topics {
		for _, p := range t.partitions {
			if p.errorCode != 0 {
				b.metrics.FetchError(p.errorCode)
			} else if p.size > 0 && st.replicaID < 0 { // Kafka's BytesOut excludes followers
				b.metrics.FetchedBytes(t.name, 0, int(p.size))
			}
		}
	}
	st.w.reset()
	chunks := st.w.fetchResponse(r.Version, 0, sessionID, r.IsolationLevel == 1, st.topics)
	resp := protocol.Response{Chunks: chunks, Written: st.written}
	if b.quotas.Enabled() && st.replicaID < 0 {
		b.throttleFetch(st.req, &resp)
	}
	return resp
}

// readFetch reads every requested partition once into st. It returns the number of
// record bytes found and whether the fetch is to be answered at once (a partition
// failed or has a preferred read replica); the partitions read (for waiting) are in
// st.parts. Followers' partitions are served by serveFollower, consumers' by
// serveConsumer (fetch_consumer.go).
func (b *Broker) readFetch(r *kmsg.FetchRequest, st *fetchState) (int64, bool) {
	img := b.image()
	remaining := b.fetchByteLimit(r.MaxBytes, st.replicaID < 0)
	var (
		total     int64
		answerNow bool
	)
	st.parts, st.marks, st.slots = st.parts[:0], st.marks[:0], st.slots[:0]
	st.ranges, st.aborted = st.ranges[:0], st.aborted[:0]
	st.limited = false
	topics := st.topics[:0]
	for i, rt := range r.Topics {
		n := len(topics)
		if n < cap(topics) {
			topics = topics[:n+1]
		} else {
			topics = append(topics, fetchTopicResult{})
		}
		tr := &topics[n]
		tr.name, tr.id, tr.partitions = rt.Topic, rt.TopicID, tr.partitions[:0]
		var (
			topicErr int16
			topicID  [16]byte // the topic's id in img: local partitions of another id are not read
		)
		if r.Version >= 13 {
			if t, ok := img.TopicByID(metadata.TopicID(rt.TopicID)); ok {
				tr.name, topicID = t.Name, [16]byte(t.ID)
			} else {
				topicErr = kerr.UnknownTopicID.Code
			}
		} else if t, ok := img.Topic(rt.Topic); ok {
			topicID = [16]byte(t.ID)
		}
		if topicErr == 0 && i < len(st.denied) && st.denied[i] {
			topicErr = kerr.TopicAuthorizationFailed.Code
		}
		for _, rp := range rt.Partitions {
			pr := newFetchPartitionResult(rp.Partition)
			if topicErr != 0 {
				// Not read, so no reason to answer at once: Kafka keeps the partitions of
				// unknown topic ids or denied topics out of its ReplicaManager's fetch,
				// which waits on the others (or answers at once when none is left).
				pr.errorCode = topicErr
				tr.partitions = append(tr.partitions, pr)
				continue
			}
			var p *replica.Partition
			if s := st.session.session; s != nil {
				p = s.replica(b.replicas, i, len(tr.partitions), tr.name, rp.Partition)
			} else {
				p = b.replicas.Get(tr.name, rp.Partition)
			}
			if p != nil && (p.TopicID != topicID || topicID == [16]byte{}) {
				p = nil // the old topic's, deleted and created again (Broker.topicReplica)
			}
			maxBytes := max(min(int64(rp.PartitionMaxBytes), remaining), 0)
			st.limited = st.limited || remaining < int64(rp.PartitionMaxBytes)
			read := len(st.parts)
			n, now := b.servePartition(st, r, img, p, &rp, &pr, maxBytes, total == 0)
			if len(st.parts) > read {
				st.slots = append(st.slots, fetchSlot{int32(i), int32(len(tr.partitions))})
			}
			answerNow = answerNow || now
			total += n
			remaining -= n
			tr.partitions = append(tr.partitions, pr)
		}
	}
	st.topics, st.total = topics, total
	return total, answerNow
}

// fetchByteLimit is the most bytes a fetch is answered with: its MaxBytes (0 or less:
// no limit of its own), and for a consumer no more than fetch.max.bytes, as Kafka
// bounds it. A first batch larger than that still comes whole.
func (b *Broker) fetchByteLimit(maxBytes int32, consumer bool) int64 {
	limit := int64(maxBytes)
	if maxBytes <= 0 {
		limit = 1<<31 - 1
	}
	if consumer {
		limit = min(limit, int64(b.cfg.FetchMaxBytes))
	}
	return limit
}

// newFetchPartitionResult is partition's result before it is read: no offsets known,
// no preferred read replica.
func newFetchPartitionResult(partition int32) fetchPartitionResult {
	return fetchPartitionResult{partition: partition, highWatermark: -1, lastStableOffset: -1, logStartOffset: -1,
		preferredReadReplica: -1}
}

// servePartition reads one partition of the fetch into pr, a follower's or a
// consumer's.
func (b *Broker) servePartition(st *fetchState, r *kmsg.FetchRequest, img *metadata.Image, p *replica.Partition,
	rp *kmsg.FetchRequestTopicPartition, pr *fetchPartitionResult, maxBytes int64, minOneBatch bool) (int64, bool) {
	if st.replicaID >= 0 {
		n := b.serveFollower(st, img, p, rp, pr, maxBytes, minOneBatch)
		// A follower behind the leader's log start (DeleteRecords moved it) hears of it
		// at once: DeleteRecords waits for the followers' log starts.
		behind := rp.LogStartOffset >= 0 && pr.logStartOffset > rp.LogStartOffset
		return n, pr.errorCode != 0 || behind
	}
	return b.serveConsumer(st, r, img, p, rp, pr, maxBytes, minOneBatch)
}

// readAgain reads the parts at indexes again into their results, with what the
// fetch's byte limit leaves them, and returns readFetch's figures for the whole
// fetch.
func (b *Broker) readAgain(r *kmsg.FetchRequest, st *fetchState, indexes []int) (int64, bool) {
	img := b.image()
	limit := b.fetchByteLimit(r.MaxBytes, st.replicaID < 0)
	answerNow := false
	for _, i := range indexes {
		slot := st.slots[i]
		rp := &r.Topics[slot.topic].Partitions[slot.partition]
		pr := &st.topics[slot.topic].partitions[slot.partition]
		st.total -= pr.size
		*pr = newFetchPartitionResult(rp.Partition)
		maxBytes := max(min(int64(rp.PartitionMaxBytes), limit-st.total), 0)
		st.limited = st.limited || limit-st.total < int64(rp.PartitionMaxBytes)
		st.again = true
		n, now := b.servePartition(st, r, img, st.parts[i], rp, pr, maxBytes, st.total == 0)
		st.again = false
		st.total += n
		answerNow = answerNow || now
	}
	return st.total, answerNow
}

// serveFollower reads one partition of a follower's fetch into pr and returns the
// record bytes found. The follower's position moves the high watermark; a follower
// out of the ISR that caught up nudges the ISR loop. A fetch sent at a broker epoch
// older than the follower's registration in img comes from an incarnation that is
// gone: NOT_LEADER_OR_FOLLOWER, its position not taken (KIP-903, as Kafka's
// Replica.updateFetchStateOrThrow).
func (b *Broker) serveFollower(st *fetchState, img *metadata.Image, p *replica.Partition, rp *kmsg.FetchRequestTopicPartition,
	pr *fetchPartitionResult, maxBytes int64, minOneBatch bool) int64 {
	if p == nil {
		pr.errorCode = kerr.UnknownTopicOrPartition.Code
		return 0
	}
	if st.replicaEpoch >= 0 {
		if br, ok := img.Broker(metadata.NodeID(st.replicaID)); ok && br.Epoch > st.replicaEpoch {
			pr.errorCode = kerr.NotLeaderForPartition.Code
			return 0
		}
	}
	fp := replica.FetchPartition{CurrentLeaderEpoch: rp.CurrentLeaderEpoch, FetchOffset: rp.FetchOffset,
		LastFetchedEpoch: rp.LastFetchedEpoch, LogStartOffset: rp.LogStartOffset}
	mark := p.Changes() // before p is read: a change while it is read moves it
	res, ranges, err := p.ServeFollower(st.replicaID, st.replicaEpoch, fp, int(maxBytes), minOneBatch, st.ranges, b.clock.Now())
	st.ranges = ranges
	pr.highWatermark, pr.lastStableOffset, pr.logStartOffset = res.HighWatermark, res.HighWatermark, res.LogStartOffset
	if err != nil {
		b.storageFailed(p, err)
		pr.errorCode = errorCode(err)
		return 0
	}
	st.watch(p, mark)
	if res.Diverging {
		pr.diverging, pr.divergingEpoch, pr.divergingEnd = true, res.DivergingEpoch, res.DivergingEndOffset
		return 0
	}
	if !p.InISR(st.replicaID) {
		b.nudgeISR()
	}
	pr.ranges, pr.size = res.Ranges, res.Size
	return res.Size
}

// fetchablePartition checks that a partition exists here, is led by this node and that
// the client's leader epoch matches.
func fetchablePartition(p *replica.Partition, currentLeaderEpoch int32) error {
	return readablePartition(p, currentLeaderEpoch, true)
}

// readablePartition checks that a partition exists here, its log directory is online,
// the client's leader epoch is this replica's and, when leaderOnly, that this node
// leads it.
func readablePartition(p *replica.Partition, currentLeaderEpoch int32, leaderOnly bool) error {
	if p == nil {
		return kerr.UnknownTopicOrPartition
	}
	if p.Offline() {
		return replica.ErrOffline
	}
	if err := p.CheckLeaderEpoch(currentLeaderEpoch); err != nil {
		return err
	}
	if leaderOnly && !p.IsLeader() {
		return kerr.NotLeaderForPartition
	}
	return nil
}

// authorizeFetch marks the topics a Fetch may not read: a follower's fetch needs
// CLUSTER_ACTION on the cluster, a consumer's READ on each topic.
func (b *Broker) authorizeFetch(req *protocol.Request, r *kmsg.FetchRequest, st *fetchState) {
	st.denied = st.denied[:0]
	if b.authz == nil {
		return
	}
	follower := st.replicaID >= 0 && b.authorizeCluster(req, auth.OpClusterAction)
	img := b.image()
	for _, rt := range r.Topics {
		name := rt.Topic
		if r.Version >= 13 {
			if t, ok := img.TopicByID(metadata.TopicID(rt.TopicID)); ok {
				name = t.Name
			}
		}
		denied := !follower
		if st.replicaID < 0 {
			denied = !b.authorize(req, auth.OpRead, auth.ResourceTopic, name)
		}
		st.denied = append(st.denied, denied)
	}
}
