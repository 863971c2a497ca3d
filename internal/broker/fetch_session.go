package broker

// Incremental fetch sessions (KIP-227), for Fetch v7 and later.
//
// A full fetch with session epoch 0 creates a session: the broker remembers the
// partitions asked for, with their fetch offsets and limits, and answers with a session
// id. Later fetches name the session and its next epoch (1, 2, …, wrapping to 1 after
// the largest int32) and carry only what changed: partitions added or whose fetch
// offset moved, and ForgottenTopics to drop; one that forgets the session's last
// partition closes it and is answered without a session, as in Kafka. The response
// of an incremental fetch holds only partitions with something new: records, an
// error, a preferred read replica, or a high watermark, last stable offset or log
// start offset that changed since the session last reported it. Epoch -1 closes the
// session (and fetches without one).
//
// Errors (the top-level error code of an empty response): FETCH_SESSION_ID_NOT_FOUND
// for a session that is unknown or was evicted, INVALID_FETCH_SESSION_EPOCH for an
// epoch other than the next one, FETCH_SESSION_TOPIC_ID_ERROR when a session made
// with topic ids (v13+) is used without them or the other way round. Clients answer
// all three with a full fetch that starts a new session.
//
// The cache holds max.incremental.fetch.session.cache.slots sessions. When it is full,
// a new session takes the slot of the least recently used session idle for more than
// fetchSessionEvictionIdle (Kafka's min.incremental.fetch.session.eviction.ms), else
// (evictLocked) of the smallest session it may evict if the new one is bigger: a
// consumer's session only one that had lived fetchSessionEvictionIdle when last used,
// a follower's also any consumer's; otherwise the fetch is answered without a session
// (id 0) and the client keeps sending full fetches.
//
// A session is used by one fetch at a time: from begin to finish it is busy, and a
// fetch that names it then — one a client sent before the answer to the previous one,
// on the same connection or another — is answered INVALID_FETCH_SESSION_EPOCH, so the
// client starts a new session. (Kafka fails the earlier fetch instead, when it finds
// the epoch moved on; clients send a session's fetches one at a time.)
//
// A session's partitions are kept in request order as a kmsg request body that is
// rewritten in place, so the fetch path reads a session exactly as it reads a full
// fetch, and an incremental fetch allocates nothing per partition — except after a
// fetch the byte limit cut short, which moves the partitions that returned records
// last (moveServedLast), as Kafka does, so that each partition gets its turn.

import (
	"math/rand/v2"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-streaming/samsa/internal/protocol"
	"github.com/samsa-streaming/samsa/internal/replica"
)

// fetchSessionEvictionIdle is how long a session must be unused before any new
// session may take its slot (Kafka's min.incremental.fetch.session.eviction.ms).
const fetchSessionEvictionIdle = 120 * time.Second

// fetchSessionKey names a partition of a session: by topic id from Fetch v13, by
// name before.
type fetchSessionKey struct {
	topic string
	id    [16]byte
	part  int32
}

// sessionPartition is what a session remembers of a partition: where it sits in the
// effective request, and what the last response said about it.
type sessionPartition struct {
	topicIndex, partIndex int
	highWatermark         int64
	lastStableOffset      int64
	logStartOffset        int64
	// replica is the partition as looked up at replica generation replicaGen: a
	// fetch of many partitions does not look each up again while no partition was
	// added or removed.
	replica    *replica.Partition
	replicaGen uint64
	served     bool // the last response held records of it (finish)
}

type fetchSession struct {
	id         int32
	epoch      int32 // the epoch the next fetch must carry
	usesIDs    bool
	privileged bool // a follower's session
	created    time.Time
	lastUsed   time.Time
	partitions map[fetchSessionKey]*sessionPartition
	topics     []kmsg.FetchRequestTopic // the effective request's topics
	byIndex    [][]*sessionPartition    // the partitions of topics, by index
	topicIndex map[fetchSessionKey]int  // key with part -1 -> index in topics
	compactDue bool                     // partitions were removed: rebuild topics
	busy       bool                     // a fetch uses it (guarded by the cache's mutex)
}

// fetchSessions is the broker's session cache. It is safe for concurrent use.
type fetchSessions struct {
	mu struct {
		sync.Mutex
		slots    int
		sessions map[int32]*fetchSession
	}
}

func (fs *fetchSessions) init(slots int) {
	fs.mu.slots = slots
	fs.mu.sessions = map[int32]*fetchSession{}
}

// fetchSessionUse is one Fetch request's use of the cache.
type fetchSessionUse struct {
	cache   *fetchSessions
	session *fetchSession // nil: no session (sessionless full fetch)
	full    bool          // answer every partition (the fetch that created the session)
}

// Len reports how many sessions are cached.
func (fs *fetchSessions) Len() int {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return len(fs.mu.sessions)
}

// begin resolves a Fetch request against the session cache. It returns the request
// to serve (the session's full partition list for an incremental fetch, r itself
// otherwise), the use to finish with, and a non-zero error code when the request must
// be answered with that error and nothing else.
func (fs *fetchSessions) begin(r *kmsg.FetchRequest, now time.Time) (*kmsg.FetchRequest, fetchSessionUse, int16) {
	if r.Version < 7 || fs.mu.slots <= 0 && r.SessionEpoch <= 0 {
		return r, fetchSessionUse{}, 0
	}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	usesIDs := r.Version >= 13
	switch {
	case r.SessionEpoch == -1: // final: close the session, fetch without one
		delete(fs.mu.sessions, r.SessionID)
		return r, fetchSessionUse{}, 0
	case r.SessionEpoch == 0: // a full fetch that opens a new session
		if r.SessionID != 0 {
			delete(fs.mu.sessions, r.SessionID)
		}
		s := fs.newSessionLocked(r, usesIDs, now)
		if s == nil {
			return r, fetchSessionUse{}, 0
		}
		s.busy = true
		s.update(r)
		return s.request(r), fetchSessionUse{cache: fs, session: s, full: true}, 0
	}
	s := fs.mu.sessions[r.SessionID]
	switch {
	case s == nil:
		return nil, fetchSessionUse{}, kerr.FetchSessionIDNotFound.Code
	case s.epoch != r.SessionEpoch, s.busy:
		return nil, fetchSessionUse{}, kerr.InvalidFetchSessionEpoch.Code
	case s.usesIDs != usesIDs:
		return nil, fetchSessionUse{}, kerr.FetchSessionTopicIDError.Code
	}
	s.update(r)
	if len(s.partitions) == 0 { // all forgotten: Kafka closes the session
		delete(fs.mu.sessions, s.id)
		return r, fetchSessionUse{}, 0
	}
	s.epoch = nextSessionEpoch(s.epoch)
	s.lastUsed, s.busy = now, true
	return s.request(r), fetchSessionUse{cache: fs, session: s}, 0
}

func nextSessionEpoch(e int32) int32 {
	if e == 1<<31-1 {
		return 1
	}
	return e + 1
}

// newSessionLocked makes a session for r, evicting one if the cache is full; nil
// when no slot can be had.
func (fs *fetchSessions) newSessionLocked(r *kmsg.FetchRequest, usesIDs bool, now time.Time) *fetchSession {
	if fs.mu.slots <= 0 {
		return nil
	}
	size := 0
	for _, t := range r.Topics {
		size += len(t.Partitions)
	}
	privileged := r.ReplicaID >= 0 || r.ReplicaState.ID >= 0
	if len(fs.mu.sessions) >= fs.mu.slots && !fs.evictLocked(size, privileged, now) {
		return nil
	}
	id := int32(0)
	for id == 0 || fs.mu.sessions[id] != nil {
		id = rand.Int32()
	}
	s := &fetchSession{
		id: id, epoch: 1, usesIDs: usesIDs, privileged: privileged, created: now, lastUsed: now,
		partitions: map[fetchSessionKey]*sessionPartition{}, topicIndex: map[fetchSessionKey]int{},
	}
	fs.mu.sessions[id] = s
	return s
}

// evictLocked frees a slot for a new session of size partitions, as Kafka's
// FetchSessionCache.tryEvict does: the least recently used session if it has been idle
// for more than fetchSessionEvictionIdle; else the first of the sessions the new one
// may evict, in Kafka's order (consumers' before followers', then fewest partitions),
// if the new one comes after it. A new follower's session may evict any consumer's
// session, and a session of either kind one that was older than
// fetchSessionEvictionIdle when last used; a session just made is safe from all but
// followers until then.
func (fs *fetchSessions) evictLocked(size int, privileged bool, now time.Time) bool {
	var stale, first *fetchSession
	for _, s := range fs.mu.sessions {
		if now.Sub(s.lastUsed) > fetchSessionEvictionIdle && (stale == nil || s.lastUsed.Before(stale.lastUsed)) {
			stale = s
		}
		mature := s.lastUsed.Sub(s.created) > fetchSessionEvictionIdle
		if !mature && (s.privileged || !privileged) {
			continue
		}
		if first == nil || s.evictsBefore(first) {
			first = s
		}
	}
	victim := stale
	if victim == nil && first != nil && (privileged && !first.privileged ||
		privileged == first.privileged && size > len(first.partitions)) {
		victim = first
	}
	if victim == nil {
		return false
	}
	delete(fs.mu.sessions, victim.id)
	return true
}

// evictsBefore reports whether s comes before o in Kafka's eviction order: consumers'
// sessions before followers', then by size, then by id.
func (s *fetchSession) evictsBefore(o *fetchSession) bool {
	if s.privileged != o.privileged {
		return !s.privileged
	}
	if len(s.partitions) != len(o.partitions) {
		return len(s.partitions) < len(o.partitions)
	}
	return s.id < o.id
}

func (s *fetchSession) key(t *kmsg.FetchRequestTopic, part int32) fetchSessionKey {
	if s.usesIDs {
		return fetchSessionKey{id: t.TopicID, part: part}
	}
	return fetchSessionKey{topic: t.Topic, part: part}
}

// update applies a request's partitions (added or updated) and forgotten topics.
func (s *fetchSession) update(r *kmsg.FetchRequest) {
	for _, ft := range r.ForgottenTopics {
		for _, p := range ft.Partitions {
			k := fetchSessionKey{topic: ft.Topic, part: p}
			if s.usesIDs {
				k = fetchSessionKey{id: ft.TopicID, part: p}
			}
			if sp := s.partitions[k]; sp != nil {
				delete(s.partitions, k) // and from the topics by compact
				s.compactDue = true
			}
		}
	}
	if s.compactDue {
		s.compact()
	}
	for i := range r.Topics {
		rt := &r.Topics[i]
		for _, rp := range rt.Partitions {
			k := s.key(rt, rp.Partition)
			if sp := s.partitions[k]; sp != nil {
				s.topics[sp.topicIndex].Partitions[sp.partIndex] = rp
				continue
			}
			tk := k
			tk.part = -1
			ti, ok := s.topicIndex[tk]
			if !ok {
				ti = len(s.topics)
				s.topicIndex[tk] = ti
				s.topics = append(s.topics, kmsg.FetchRequestTopic{Topic: rt.Topic, TopicID: rt.TopicID})
				s.byIndex = append(s.byIndex, nil)
			}
			t := &s.topics[ti]
			t.Partitions = append(t.Partitions, rp)
			sp := &sessionPartition{topicIndex: ti, partIndex: len(t.Partitions) - 1,
				highWatermark: -1, lastStableOffset: -1, logStartOffset: -1}
			s.partitions[k] = sp
			s.byIndex[ti] = append(s.byIndex[ti], sp)
		}
	}
}

// compact drops removed partitions (and empty topics) from the effective request: a
// partition stays where the session's map still points at its place, so that no
// partition number a client sends can pass for a removed one.
func (s *fetchSession) compact() {
	s.compactDue = false
	topics, byIndex := s.topics[:0], s.byIndex[:0]
	clear(s.topicIndex)
	for oldTi, t := range s.topics {
		parts := t.Partitions[:0]
		for oldPi, p := range t.Partitions {
			if sp := s.partitions[s.key(&t, p.Partition)]; sp != nil && sp.topicIndex == oldTi && sp.partIndex == oldPi {
				parts = append(parts, p)
			}
		}
		if len(parts) == 0 {
			continue
		}
		t.Partitions = parts
		ti := len(topics)
		topics = append(topics, t)
		tk := s.key(&topics[ti], -1)
		s.topicIndex[tk] = ti
		sps := make([]*sessionPartition, len(parts))
		for pi, p := range parts {
			sp := s.partitions[s.key(&topics[ti], p.Partition)]
			sp.topicIndex, sp.partIndex = ti, pi
			sps[pi] = sp
		}
		byIndex = append(byIndex, sps)
	}
	s.topics, s.byIndex = topics, byIndex
}

// replica returns the partition of the effective request at topic ti, partition pi
// (named topic, partition), looked up again only when a partition was added or
// removed since.
func (s *fetchSession) replica(replicas *replica.Manager, ti, pi int, topic string, partition int32) *replica.Partition {
	sp := s.byIndex[ti][pi]
	if gen := replicas.Generation(); sp.replica == nil || sp.replicaGen != gen {
		sp.replica, sp.replicaGen = replicas.Get(topic, partition), gen
	}
	return sp.replica
}

// request returns the request to serve: r's settings with the session's partitions.
func (s *fetchSession) request(r *kmsg.FetchRequest) *kmsg.FetchRequest {
	eff := *r
	eff.Topics = s.topics
	eff.ForgottenTopics = nil
	return &eff
}

// finish drops from an incremental response the partitions with nothing new, records
// what the response reports, frees the session for the next fetch, and returns the
// session id to answer with. Topics are swapped, never copied, so each pooled topic
// result keeps a partition slice of its own. When the fetch's byte limit left a
// partition less than its own (limited), the partitions that returned records go last
// in the session (moveServedLast).
func (u fetchSessionUse) finish(topics []fetchTopicResult, limited bool) ([]fetchTopicResult, int32) {
	s := u.session
	if s == nil {
		return topics, 0
	}
	n, served := 0, false
	for ti := range topics {
		t := &topics[ti]
		parts := t.partitions[:0]
		for pi, p := range t.partitions {
			// The results are in the order of the effective request (ti is still this
			// topic's place: the swap below only moves topics already seen).
			sp := s.byIndex[ti][pi]
			// A preferred read replica (KIP-392) or a diverging epoch is news too,
			// though it comes without records.
			changed := u.full || p.errorCode != 0 || p.size > 0 || p.preferredReadReplica >= 0 || p.diverging ||
				p.highWatermark != sp.highWatermark || p.lastStableOffset != sp.lastStableOffset || p.logStartOffset != sp.logStartOffset
			if p.errorCode == 0 {
				sp.highWatermark, sp.lastStableOffset, sp.logStartOffset = p.highWatermark, p.lastStableOffset, p.logStartOffset
			} else {
				// As Kafka does: the partition is answered again once the error is gone,
				// even with the offsets it had before.
				sp.highWatermark = -1
			}
			sp.served = p.size > 0
			served = served || sp.served
			if changed {
				parts = append(parts, p)
			}
		}
		t.partitions = parts
		if len(parts) > 0 || u.full {
			topics[n], topics[ti] = topics[ti], topics[n]
			n++
		}
	}
	if limited && served {
		s.moveServedLast()
	}
	u.cache.mu.Lock()
	s.busy = false
	u.cache.mu.Unlock()
	return topics[:n], s.id
}

// moveServedLast puts the partitions the last response held records of after the
// others, each kept in its order, as Kafka's incremental fetch context does: a
// session's fetch reads its partitions in order until the byte limit, so without this
// the partitions at its head, while they have records, would keep the others from
// being read. A topic whose partitions end up apart appears more than once in the
// effective request, as in Kafka's; partitions added later join its last entry.
// Samsa reorders only after a fetch the byte limit cut short (Kafka after every
// incremental one): otherwise every partition got all it asked for.
func (s *fetchSession) moveServedLast() {
	topics := make([]kmsg.FetchRequestTopic, 0, len(s.topics)+1)
	byIndex := make([][]*sessionPartition, 0, len(s.topics)+1)
	for _, served := range []bool{false, true} {
		for ti := range s.topics {
			t := &s.topics[ti]
			for pi, p := range t.Partitions {
				sp := s.byIndex[ti][pi]
				if sp.served != served {
					continue
				}
				n := len(topics)
				if n == 0 || s.key(&topics[n-1], -1) != s.key(t, -1) {
					topics = append(topics, kmsg.FetchRequestTopic{Topic: t.Topic, TopicID: t.TopicID})
					byIndex = append(byIndex, nil)
					n++
				}
				sp.topicIndex, sp.partIndex = n-1, len(topics[n-1].Partitions)
				topics[n-1].Partitions = append(topics[n-1].Partitions, p)
				byIndex[n-1] = append(byIndex[n-1], sp)
			}
		}
	}
	s.topics, s.byIndex = topics, byIndex
	clear(s.topicIndex)
	for ti := range topics { // a topic's last entry
		s.topicIndex[s.key(&topics[ti], -1)] = ti
	}
}

// fetchSessionError is the answer to a fetch whose session cannot be used: the error,
// no session, no partitions.
func fetchSessionError(r *kmsg.FetchRequest, code int16) protocol.Response {
	resp := r.ResponseKind().(*kmsg.FetchResponse)
	resp.ErrorCode = code
	return protocol.Response{Body: resp}
}
