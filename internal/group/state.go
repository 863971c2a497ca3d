package group

import (
	"errors"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-streaming/samsa/internal/clock"
)

// Sentinel errors.
var (
	// ErrNotCoordinator may be wrapped by a Log to say this node no longer leads the
	// __consumer_offsets partition; it maps to NOT_COORDINATOR.
	ErrNotCoordinator = errors.New("group: not the coordinator")
	// ErrClosed is returned by LoadPartition after Close.
	ErrClosed = errors.New("group: coordinator closed")
	// ErrCorruptRecord marks a __consumer_offsets record that cannot be decoded.
	ErrCorruptRecord = errors.New("group: corrupt __consumer_offsets record")
	// ErrInvalidConfig is wrapped by Config.Validate.
	ErrInvalidConfig = errors.New("group: invalid config")
)

// newMemberJoinTimeout bounds how long a new member may wait in its first JoinGroup
// (Kafka's GroupCoordinator.NewMemberJoinTimeoutMs).
const newMemberJoinTimeout = 5 * time.Minute

// consumerProtocolType is the protocol type of Kafka's consumer groups.
const consumerProtocolType = "consumer"

// TopicPartition names a partition of a topic.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// CommittedOffset is a committed consumer position.
type CommittedOffset struct {
	Offset      int64
	LeaderEpoch int32 // -1 when unknown
	Metadata    string
	CommitTime  time.Time
	ExpireTime  time.Time // zero unless the commit asked for a retention (OffsetCommit v2–v4)
}

// State is a group's state, named as Kafka names it in DescribeGroups and ListGroups.
type State int8

const (
	StateEmpty State = iota
	StatePreparingRebalance
	StateCompletingRebalance
	StateStable
	StateDead
)

func (s State) String() string {
	switch s {
	case StateEmpty:
		return "Empty"
	case StatePreparingRebalance:
		return "PreparingRebalance"
	case StateCompletingRebalance:
		return "CompletingRebalance"
	case StateStable:
		return "Stable"
	case StateDead:
		return "Dead"
	}
	return "Unknown"
}

type protocol struct {
	name     string
	metadata []byte
}

type joinWaiter struct {
	ch      chan *kmsg.JoinGroupResponse
	version int16
}

type syncWaiter struct {
	ch      chan *kmsg.SyncGroupResponse
	version int16
}

type member struct {
	id               string
	instanceID       string
	static           bool
	clientID         string
	clientHost       string
	rebalanceTimeout time.Duration
	sessionTimeout   time.Duration
	protocolType     string
	protocols        []protocol // in the member's order of preference
	assignment       []byte
	isNew            bool
	join             *joinWaiter // non-nil while the member waits in JoinGroup
	sync             *syncWaiter // non-nil while the member waits in SyncGroup
	// heartbeatDeadline is when the member expires unless it heartbeats; zero when the
	// member is exempt (waiting in a rebalance).
	heartbeatDeadline time.Time
}

func (m *member) metadataFor(name string) []byte {
	for _, p := range m.protocols {
		if p.name == name {
			return p.metadata
		}
	}
	return nil
}

// matches reports whether protocols equal the member's current ones.
func (m *member) matches(protocols []protocol) bool {
	return slices.EqualFunc(m.protocols, protocols, func(a, b protocol) bool {
		return a.name == b.name && string(a.metadata) == string(b.metadata)
	})
}

// vote is the member's most preferred protocol among the candidates.
func (m *member) vote(candidates map[string]bool) string {
	for _, p := range m.protocols {
		if candidates[p.name] {
			return p.name
		}
	}
	return ""
}

type group struct {
	id           string
	partition    int32
	state        State
	prevState    State // the state before the last transition
	stateTime    time.Time
	generation   int32
	protocolType string // "" for groups that only store offsets
	protocol     string // selected protocol, "" when none
	leader       string

	members map[string]*member
	order   []string          // member ids in join order (deterministic iteration)
	static  map[string]string // group.instance.id -> member id
	// pending are member ids handed out with MEMBER_ID_REQUIRED, with their expiry.
	pending map[string]time.Time
	// pendingSync are members of the current generation that have not sent SyncGroup.
	pendingSync     map[string]bool
	supported       map[string]int // protocol name -> members supporting it
	numAwaitingJoin int

	// Rebalance timers.
	joinDeadline     time.Time // PreparingRebalance: when the join phase ends
	joinInitial      bool      // the join phase is group.initial.rebalance.delay.ms
	initialDelay     time.Duration
	initialRemaining time.Duration
	newMemberAdded   bool
	syncDeadline     time.Time // pending SyncGroup expiry for syncGeneration
	syncGeneration   int32

	subscribedTopics map[string]bool // nil: unknown
	offsets          map[TopicPartition]CommittedOffset
	// txnOffsets are the offsets committed in transactions not decided yet, by
	// producer id (txn_offsets.go).
	txnOffsets map[int64]map[TopicPartition]*txnOffset
	txnSeq     int64 // the seq of the last transactional commit replayed (txnOffset.seq)
	// queued counts, by partition, the offset commits (plain or transactional) handed
	// to the partition's writer and not replayed yet: a deletion decided meanwhile must
	// tombstone them too, since they reach the log before its tombstones.
	queued map[TopicPartition]int

	// consumer is set when the group uses the KIP-848 consumer protocol; the classic
	// fields above then stay those of an Empty group without members.
	consumer *consumerGroup
	// share is set when the group is a KIP-932 share group.
	share *shareGroup

	// The group's timer, armed for nextDeadline() (see settleGroupLocked).
	timer    clock.Timer
	timerAt  time.Time
	timerSeq uint64
}

func newGroup(id string, partition int32, now time.Time) *group {
	return &group{
		id:          id,
		partition:   partition,
		state:       StateEmpty,
		stateTime:   now,
		members:     map[string]*member{},
		static:      map[string]string{},
		pending:     map[string]time.Time{},
		pendingSync: map[string]bool{},
		supported:   map[string]int{},
		offsets:     map[TopicPartition]CommittedOffset{},
	}
}

func (g *group) transition(s State, now time.Time) {
	g.prevState = g.state
	g.state = s
	g.stateTime = now
}

func (g *group) is(states ...State) bool { return slices.Contains(states, g.state) }

// useless reports whether the group holds nothing worth keeping.
func (g *group) useless() bool {
	return g.state == StateEmpty && len(g.members) == 0 && len(g.pending) == 0 &&
		len(g.offsets) == 0 && len(g.queued) == 0 && g.generation == 0 && g.protocolType == "" && g.consumer == nil && g.share == nil
}

func (g *group) rebalanceTimeout() time.Duration {
	var d time.Duration
	for _, m := range g.members {
		d = max(d, m.rebalanceTimeout)
	}
	return d
}

func (g *group) allJoined() bool {
	return len(g.members) == g.numAwaitingJoin && len(g.pending) == 0
}

// supportsProtocols is Kafka's check that a joining member can be part of the group.
func (g *group) supportsProtocols(protocolType string, protocols []protocol) bool {
	if g.state == StateEmpty && len(g.members) == 0 {
		return protocolType != "" && len(protocols) > 0
	}
	if g.protocolType != protocolType {
		return false
	}
	for _, p := range protocols {
		if g.supported[p.name] == len(g.members) {
			return true
		}
	}
	return false
}

func (g *group) countProtocols(m *member, delta int) {
	for _, p := range m.protocols {
		g.supported[p.name] += delta
		if g.supported[p.name] <= 0 {
			delete(g.supported, p.name)
		}
	}
}

func (g *group) add(m *member, w *joinWaiter) {
	if len(g.members) == 0 {
		g.protocolType = m.protocolType
	}
	if g.leader == "" {
		g.leader = m.id
	}
	g.members[m.id] = m
	g.order = append(g.order, m.id)
	if m.static {
		g.static[m.instanceID] = m.id
	}
	g.countProtocols(m, 1)
	m.join = w
	if w != nil {
		g.numAwaitingJoin++
	}
	delete(g.pending, m.id)
}

// failWaiters answers every member's waiting JoinGroup and SyncGroup with code.
func (g *group) failWaiters(code int16) {
	for _, m := range g.members {
		if m.join != nil {
			m.join.fail(code, m.id)
			m.join = nil
		}
		if m.sync != nil {
			m.sync.fail(code)
			m.sync = nil
		}
	}
}

// remove drops a member without answering its waiters (callers do that).
func (g *group) remove(id string) {
	m, ok := g.members[id]
	if ok {
		delete(g.members, id)
		g.order = slices.DeleteFunc(g.order, func(x string) bool { return x == id })
		g.countProtocols(m, -1)
		if m.join != nil {
			g.numAwaitingJoin--
		}
		if m.static && g.static[m.instanceID] == id {
			delete(g.static, m.instanceID)
		}
	}
	if g.leader == id {
		g.leader = ""
		if len(g.order) > 0 {
			g.leader = g.order[0]
		}
	}
	delete(g.pending, id)
	delete(g.pendingSync, id)
}

// updateMember replaces a member's protocols and join waiter.
func (g *group) updateMember(m *member, protocols []protocol, w *joinWaiter) {
	g.countProtocols(m, -1)
	m.protocols = protocols
	g.countProtocols(m, 1)
	switch {
	case w != nil && m.join == nil:
		g.numAwaitingJoin++
	case w == nil && m.join != nil:
		g.numAwaitingJoin--
	}
	if m.join != nil && w != nil && m.join != w {
		// The client gave up on its earlier JoinGroup and sent another one.
		m.join.fail(kerrRebalanceInProgress, m.id)
	}
	m.join = w
}

// replaceStaticMember gives a static member a new member id, fencing whatever the old
// incarnation is waiting for.
func (g *group) replaceStaticMember(instanceID, oldID, newID string) *member {
	m := g.members[oldID]
	if m.join != nil {
		m.join.fail(kerrFencedInstanceID, oldID)
		m.join = nil
		g.numAwaitingJoin--
	}
	if m.sync != nil {
		m.sync.fail(kerrFencedInstanceID)
		m.sync = nil
	}
	delete(g.members, oldID)
	m.id = newID
	g.members[newID] = m
	for i, id := range g.order {
		if id == oldID {
			g.order[i] = newID
		}
	}
	if g.leader == oldID {
		g.leader = newID
	}
	if g.pendingSync[oldID] {
		delete(g.pendingSync, oldID)
		g.pendingSync[newID] = true
	}
	g.static[instanceID] = newID
	return m
}

// validateMember is Kafka's ClassicGroup.validateMember: with an instance id, the
// instance must be known (UNKNOWN_MEMBER_ID) and held by memberID (FENCED_INSTANCE_ID);
// without one, memberID must be a member.
func (g *group) validateMember(memberID string, instanceID *string) int16 {
	if instanceID != nil {
		cur, ok := g.static[*instanceID]
		switch {
		case !ok:
			return kerrUnknownMemberID
		case cur != memberID:
			return kerrFencedInstanceID
		}
	}
	if g.members[memberID] == nil {
		return kerrUnknownMemberID
	}
	return kerrNone
}

// staticFenced is Kafka's isStaticMemberFenced.
func (g *group) staticFenced(instanceID *string, memberID string) bool {
	if instanceID == nil {
		return false
	}
	cur, ok := g.static[*instanceID]
	return ok && cur != memberID
}

// selectProtocol picks, among the protocols every member supports, the one most
// members prefer; ties go to the protocol whose first vote came first in join order.
func (g *group) selectProtocol() string {
	candidates := map[string]bool{}
	for name, n := range g.supported {
		if n == len(g.members) {
			candidates[name] = true
		}
	}
	votes := map[string]int{}
	var first []string
	for _, id := range g.order {
		v := g.members[id].vote(candidates)
		if v == "" {
			continue
		}
		if votes[v] == 0 {
			first = append(first, v)
		}
		votes[v]++
	}
	best := ""
	for _, name := range first {
		if best == "" || votes[name] > votes[best] {
			best = name
		}
	}
	return best
}

// computeSubscribedTopics parses the consumer protocol subscriptions: empty for a
// consumer group without members; nil (unknown) when the group is not a consumer
// group, has no protocol selected, or a subscription cannot be parsed.
func (g *group) computeSubscribedTopics() map[string]bool {
	if g.protocolType != consumerProtocolType {
		return nil
	}
	if len(g.members) == 0 {
		return map[string]bool{}
	}
	if g.protocol == "" {
		return nil
	}
	topics := map[string]bool{}
	for _, m := range g.members {
		var meta kmsg.ConsumerMemberMetadata
		if err := meta.ReadFrom(m.metadataFor(g.protocol)); err != nil {
			return nil
		}
		for _, t := range meta.Topics {
			topics[t] = true
		}
	}
	return topics
}

// subscribedTo is Kafka's isSubscribedToTopic: unknown subscriptions of a consumer
// group count as subscribed.
func (g *group) subscribedTo(topic string) bool {
	if g.subscribedTopics == nil {
		return g.protocolType == consumerProtocolType
	}
	return g.subscribedTopics[topic]
}

// currentMemberMetadata is what the leader receives in its JoinGroup response.
func (g *group) currentMemberMetadata() []kmsg.JoinGroupResponseMember {
	out := make([]kmsg.JoinGroupResponseMember, 0, len(g.order))
	for _, id := range g.order {
		m := g.members[id]
		jm := kmsg.NewJoinGroupResponseMember()
		jm.MemberID = m.id
		if m.static {
			s := m.instanceID
			jm.InstanceID = &s
		}
		jm.ProtocolMetadata = m.metadataFor(g.protocol)
		out = append(out, jm)
	}
	return out
}
