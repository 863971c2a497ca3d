package group

import (
	"maps"
	"regexp"
	"slices"
	"time"
)

// The KIP-848 consumer group protocol: the coordinator computes the assignment, members
// reconcile towards it incrementally. A consumer group shares the group's id space, its
// committed offsets and its __consumer_offsets partition with the classic protocol; a
// *group with a non-nil consumer is a consumer group, and its classic fields stay those
// of an Empty classic group.
//
// Epochs (KIP-848):
//   - the group epoch grows with every change that calls for a new assignment: a
//     member joining, leaving or changing its subscription, a subscribed topic
//     created, deleted or given partitions;
//   - the target assignment epoch is the group epoch the target assignment was
//     computed at;
//   - a member's epoch is the target assignment epoch it has reconciled to. A
//     partition is owned by at most one member at a time: a member gets a partition
//     only once no other member owns it (assigned or pending revocation), and a member
//     asked to revoke partitions keeps its epoch until it reports them gone.

// TopicID is a topic's id, as the metadata image and the wire carry it.
type TopicID [16]byte

// TopicInfo is what the assignors need to know of a topic.
type TopicInfo struct {
	Name       string
	ID         TopicID
	Partitions int32
	// Racks lists, per partition, the racks of its replicas (nil when no broker has a
	// rack).
	Racks [][]string
}

// Topics is a snapshot of the cluster's topics. Version grows with every change.
type Topics struct {
	Version int64
	ByName  map[string]TopicInfo
	Names   []string // sorted
	ByID    map[TopicID]string
	// AuthorizeRegex is set when an authorizer decides what a member may describe:
	// the regex of a member that has not sent its describable since it was loaded from
	// the log then resolves only to the topics it holds or is to hold (resolved under
	// its ACLs before), rather than to every topic.
	AuthorizeRegex bool
}

// Assignment maps topic ids to sorted partition lists.
type Assignment map[TopicID][]int32

func (a Assignment) clone() Assignment {
	out := make(Assignment, len(a))
	for t, ps := range a {
		out[t] = slices.Clone(ps)
	}
	return out
}

func (a Assignment) equal(b Assignment) bool {
	if len(a) != len(b) {
		return false
	}
	for t, ps := range a {
		if !slices.Equal(ps, b[t]) {
			return false
		}
	}
	return true
}

func (a Assignment) has(t TopicID, p int32) bool {
	_, ok := slices.BinarySearch(a[t], p)
	return ok
}

func (a Assignment) add(t TopicID, p int32) {
	ps := a[t]
	if i, ok := slices.BinarySearch(ps, p); !ok {
		a[t] = slices.Insert(ps, i, p)
	}
}

func (a Assignment) size() int {
	n := 0
	for _, ps := range a {
		n += len(ps)
	}
	return n
}

// intersects reports whether a and b share a partition.
func (a Assignment) intersects(b Assignment) bool {
	for t, ps := range a {
		for _, p := range ps {
			if b.has(t, p) {
				return true
			}
		}
	}
	return false
}

// memberState is a consumer member's reconciliation state (Kafka's MemberState).
type memberState int8

const (
	// memberStable: the member has reconciled to the target assignment epoch.
	memberStable memberState = iota
	// memberUnrevoked: the member must revoke partitions before it gets new ones.
	memberUnrevoked
	// memberUnreleased: partitions of its target are still owned by other members.
	memberUnreleased
)

func (s memberState) String() string {
	switch s {
	case memberUnrevoked:
		return "UNREVOKED_PARTITIONS"
	case memberUnreleased:
		return "UNRELEASED_PARTITIONS"
	}
	return "STABLE"
}

// Member epochs with a meaning of their own.
const (
	leaveEpoch       int32 = -1 // a member leaving the group
	staticLeaveEpoch int32 = -2 // a static member leaving for a while (it may come back)
)

type consumerMember struct {
	// Persisted (consumerMemberValue).
	id               string
	instanceID       string
	rackID           string
	clientID         string
	clientHost       string
	rebalanceTimeout time.Duration
	subscribedNames  []string // sorted
	subscribedRegex  string
	serverAssignor   string
	epoch            int32
	previousEpoch    int32
	state            memberState
	assigned         Assignment
	revoking         Assignment
	target           Assignment
	// assignmentEpochs holds, for every partition of assigned and revoking, the epoch
	// at which it was assigned to the member (KIP-1251): a commit at an epoch older
	// than the member's is accepted for the partitions it has held since that epoch.
	assignmentEpochs partitionEpochs
	// classic is set for a member that speaks the classic protocol (JoinGroup,
	// SyncGroup, Heartbeat) in a consumer group (consumer_classic.go).
	classic *classicMember

	// Memory only.
	sessionDeadline time.Time
	// describable filters what subscribedRegex resolves to (nil: every topic); it is
	// the member's last heartbeat's (ConsumerGroupHeartbeat).
	describable    func(topic string) bool
	revokeDeadline time.Time // while memberUnrevoked: fenced if not revoked by then
	// classicDeadline: a classic member told to rejoin must send JoinGroup, and one
	// that joined must send SyncGroup, within its rebalance timeout.
	classicDeadline time.Time
}

// classicMember is what a classic protocol member of a consumer group keeps besides a
// consumer member's fields (Kafka's ClassicMemberMetadata).
type classicMember struct {
	sessionTimeout time.Duration
	protocols      []protocol // as its last JoinGroup named them, in its order
}

func (m *consumerMember) static() bool { return m.instanceID != "" }

// owns is everything the member holds: assigned and pending revocation.
func (m *consumerMember) owns(t TopicID, p int32) bool {
	return m.assigned.has(t, p) || m.revoking.has(t, p)
}

// assignmentEpoch returns the epoch at which the member was assigned a partition it
// owns (assigned or pending revocation); false when it does not own it.
func (m *consumerMember) assignmentEpoch(t TopicID, p int32) (int32, bool) {
	if !m.owns(t, p) {
		return 0, false
	}
	e, ok := m.assignmentEpochs[t][p]
	return e, ok
}

// partitionEpochs maps partitions to an epoch: a member's assignment epochs
// (Kafka's ConsumerGroupMember keeps them beside each assigned partition).
type partitionEpochs map[TopicID]map[int32]int32

func (e partitionEpochs) set(t TopicID, p, epoch int32) {
	if e[t] == nil {
		e[t] = map[int32]int32{}
	}
	e[t][p] = epoch
}

func (e partitionEpochs) clone() partitionEpochs {
	out := make(partitionEpochs, len(e))
	for t, ps := range e {
		out[t] = maps.Clone(ps)
	}
	return out
}

func (e partitionEpochs) equal(o partitionEpochs) bool {
	return maps.EqualFunc(e, o, func(a, b map[int32]int32) bool { return maps.Equal(a, b) })
}

// epochsOf returns the epochs of the partitions of the assignments, taken from
// from; a partition it has none for gets epoch.
func epochsOf(from partitionEpochs, epoch int32, owned ...Assignment) partitionEpochs {
	out := partitionEpochs{}
	for _, a := range owned {
		for t, ps := range a {
			for _, p := range ps {
				e, ok := from[t][p]
				if !ok {
					e = epoch
				}
				out.set(t, p, e)
			}
		}
	}
	return out
}

type consumerGroup struct {
	epoch       int32
	targetEpoch int32
	members     map[string]*consumerMember
	static      map[string]string // group.instance.id -> member id

	// subscriptionHash is subscriptionHashOf at epoch (persisted).
	subscriptionHash uint64
	// assignedAt is when the target assignment at targetEpoch was computed (zero: not
	// known). The next one waits for the group's assignment interval to pass
	// (KIP-1263): until then the group epoch runs ahead of targetEpoch ("Assigning").
	assignedAt time.Time

	// Memory only: the topics version last resolved against, compiled regexes.
	topicsVersion int64
	regexes       map[string]*regexp.Regexp
}

func newConsumerGroup() *consumerGroup {
	return &consumerGroup{members: map[string]*consumerMember{}, static: map[string]string{}, topicsVersion: -1}
}

// memberIDs returns the member ids, sorted.
func (cg *consumerGroup) memberIDs() []string {
	return slices.Sorted(maps.Keys(cg.members))
}

// stateName is the group state as ConsumerGroupDescribe and ListGroups show it.
func (cg *consumerGroup) stateName() string {
	if len(cg.members) == 0 {
		return "Empty"
	}
	if cg.targetEpoch != cg.epoch {
		return "Assigning"
	}
	for _, m := range cg.members {
		if m.epoch != cg.targetEpoch && m.epoch != staticLeaveEpoch || m.state != memberStable {
			return "Reconciling"
		}
	}
	return "Stable"
}

// ownerOf returns the member that owns a partition (assigned or pending revocation),
// nil when it is free.
func (cg *consumerGroup) ownerOf(t TopicID, p int32) *consumerMember {
	for _, m := range cg.members {
		if m.owns(t, p) {
			return m
		}
	}
	return nil
}

// owners maps every owned partition to its owner.
func (cg *consumerGroup) owners() map[TopicID]map[int32]string {
	out := map[TopicID]map[int32]string{}
	for id, m := range cg.members {
		for _, a := range []Assignment{m.assigned, m.revoking} {
			for t, ps := range a {
				if out[t] == nil {
					out[t] = map[int32]string{}
				}
				for _, p := range ps {
					out[t][p] = id
				}
			}
		}
	}
	return out
}

// subscribedTopics returns the topics a member subscribes to that exist in topics.
func (cg *consumerGroup) subscribedTopics(m *consumerMember, topics *Topics) map[string]bool {
	out := map[string]bool{}
	for _, name := range m.subscribedNames {
		if _, ok := topics.ByName[name]; ok {
			out[name] = true
		}
	}
	if m.subscribedRegex != "" {
		re := cg.regexes[m.subscribedRegex]
		if re == nil {
			var err error
			if re, err = compileSubscription(m.subscribedRegex); err != nil {
				return out
			}
			if cg.regexes == nil {
				cg.regexes = map[string]*regexp.Regexp{}
			}
			cg.regexes[m.subscribedRegex] = re
		}
		for _, name := range topics.Names {
			if !re.MatchString(name) {
				continue
			}
			switch {
			case m.describable != nil:
				if !m.describable(name) {
					continue
				}
			case topics.AuthorizeRegex:
				// Loaded from the log and not heard from since (its ACL check is kept in
				// memory only): the topics it holds or is to hold were resolved under its
				// ACLs, and stay; a topic new to it waits for its next heartbeat. Kafka
				// keeps the resolved regex in the log instead.
				if id := topics.ByName[name].ID; len(m.assigned[id]) == 0 && len(m.revoking[id]) == 0 && len(m.target[id]) == 0 {
					continue
				}
			}
			out[name] = true
		}
	}
	return out
}

// compileSubscription compiles a subscription regex; like Java's Matcher.matches it
// must match the whole topic name.
func compileSubscription(expr string) (*regexp.Regexp, error) {
	return regexp.Compile(`^(?:` + expr + `)$`)
}

// subscriptionHashOf hashes what the assignment depends on besides membership: the
// subscribed topics with their ids, partition counts and racks (FNV-1a).
func (cg *consumerGroup) subscriptionHashOf(topics *Topics) uint64 {
	all := map[string]bool{}
	for _, m := range cg.members {
		maps.Copy(all, cg.subscribedTopics(m, topics))
	}
	h := uint64(14695981039346656037)
	mix := func(b []byte) {
		for _, c := range b {
			h ^= uint64(c)
			h *= 1099511628211
		}
	}
	for _, name := range slices.Sorted(maps.Keys(all)) {
		t := topics.ByName[name]
		mix([]byte(name))
		mix(t.ID[:])
		mix([]byte{byte(t.Partitions >> 24), byte(t.Partitions >> 16), byte(t.Partitions >> 8), byte(t.Partitions), 0})
		for _, racks := range t.Racks {
			for _, r := range racks {
				mix([]byte(r))
			}
			mix([]byte{1})
		}
	}
	return h
}
