package group

import (
	"cmp"
	"slices"
	"strings"
)

// The server-side assignors of consumer groups (group.consumer.assignors).
//
// uniform spreads every subscribed partition over the members subscribed to its topic
// so that member sizes differ by at most one where subscriptions allow; it is sticky:
// a member keeps the partitions of its previous target that it still subscribes to,
// up to its share, so a member joining or leaving moves only the partitions that must
// move. With racks, a partition goes preferably to a member in a rack holding one of
// its replicas. range gives each member subscribed to a topic a contiguous range of
// its partitions (members in member id order, the first ones one partition more), as
// Kafka's range assignor; topics with the same partition count are co-partitioned.

const (
	assignorUniform = "uniform"
	assignorRange   = "range"
)

// assignMember is one member as the assignors see it.
type assignMember struct {
	id         string
	rack       string
	topics     map[string]bool // subscribed, existing topics
	previous   Assignment      // the previous target
	assignment Assignment
}

type assignPartition struct {
	topic TopicInfo
	p     int32
}

func (ap assignPartition) rackMatches(rack string) bool {
	if rack == "" || int(ap.p) >= len(ap.topic.Racks) {
		return false
	}
	return slices.Contains(ap.topic.Racks[ap.p], rack)
}

// assign computes the target assignment of members (sorted by id) with the named
// assignor.
func assign(assignor string, members []*assignMember, topics *Topics) {
	for _, m := range members {
		m.assignment = Assignment{}
	}
	if assignor == assignorRange {
		assignRange(members, topics)
		return
	}
	assignUniform(members, topics)
}

func assignRange(members []*assignMember, topics *Topics) {
	for _, name := range topics.Names {
		t := topics.ByName[name]
		var subs []*assignMember
		for _, m := range members {
			if m.topics[name] {
				subs = append(subs, m)
			}
		}
		if len(subs) == 0 {
			continue
		}
		n := int32(len(subs))
		per, extra := t.Partitions/n, t.Partitions%n
		next := int32(0)
		for i, m := range subs {
			count := per
			if int32(i) < extra {
				count++
			}
			for p := next; p < next+count; p++ {
				m.assignment.add(t.ID, p)
			}
			next += count
		}
	}
}

func assignUniform(members []*assignMember, topics *Topics) {
	// Every partition some member subscribes to, and who may take it.
	var all []assignPartition
	eligible := map[string][]*assignMember{}
	for _, name := range topics.Names {
		for _, m := range members {
			if m.topics[name] {
				eligible[name] = append(eligible[name], m)
			}
		}
		if len(eligible[name]) == 0 {
			continue
		}
		t := topics.ByName[name]
		for p := range t.Partitions {
			all = append(all, assignPartition{topic: t, p: p})
		}
	}
	count := map[string]int{}
	// A member's share: what it would get if the partitions of each of its topics were
	// spread evenly over that topic's subscribers (rounded up).
	share := map[string]int{}
	for _, m := range members {
		s := 0.0
		for name := range m.topics {
			s += float64(topics.ByName[name].Partitions) / float64(len(eligible[name]))
		}
		share[m.id] = int(s + 0.999999)
	}
	// Stickiness: keep previous partitions that are still valid, up to the share.
	taken := map[TopicID]map[int32]bool{}
	take := func(m *assignMember, ap assignPartition) {
		m.assignment.add(ap.topic.ID, ap.p)
		count[m.id]++
		if taken[ap.topic.ID] == nil {
			taken[ap.topic.ID] = map[int32]bool{}
		}
		taken[ap.topic.ID][ap.p] = true
	}
	for _, m := range members {
		for _, ap := range all {
			if count[m.id] >= share[m.id] {
				break
			}
			if m.topics[ap.topic.Name] && m.previous.has(ap.topic.ID, ap.p) && !taken[ap.topic.ID][ap.p] {
				take(m, ap)
			}
		}
	}
	// The rest goes to the least loaded eligible member, same rack first.
	for _, ap := range all {
		if taken[ap.topic.ID][ap.p] {
			continue
		}
		take(leastLoaded(eligible[ap.topic.Name], count, ap), ap)
	}
	balance(all, eligible, count, members)
}

// leastLoaded picks the member with the fewest partitions, preferring one whose rack
// holds a replica of the partition, then the smallest member id.
func leastLoaded(candidates []*assignMember, count map[string]int, ap assignPartition) *assignMember {
	var best *assignMember
	better := func(m *assignMember) bool {
		if best == nil {
			return true
		}
		rm, rb := ap.rackMatches(m.rack), ap.rackMatches(best.rack)
		if rm != rb && count[m.id] <= count[best.id]+1 && count[best.id] <= count[m.id]+1 {
			return rm
		}
		if c := cmp.Compare(count[m.id], count[best.id]); c != 0 {
			return c < 0
		}
		return strings.Compare(m.id, best.id) < 0
	}
	for _, m := range candidates {
		if better(m) {
			best = m
		}
	}
	return best
}

// balance moves partitions from the most to the least loaded eligible members until no
// move makes two members' sizes closer.
func balance(all []assignPartition, eligible map[string][]*assignMember, count map[string]int, members []*assignMember) {
	owner := map[TopicID]map[int32]*assignMember{}
	for _, m := range members {
		for t, ps := range m.assignment {
			if owner[t] == nil {
				owner[t] = map[int32]*assignMember{}
			}
			for _, p := range ps {
				owner[t][p] = m
			}
		}
	}
	for range len(all) + 1 {
		moved := false
		// Scan from the end so the highest partitions move, keeping ranges compact.
		for i := len(all) - 1; i >= 0; i-- {
			ap := all[i]
			from := owner[ap.topic.ID][ap.p]
			to := leastLoaded(eligible[ap.topic.Name], count, ap)
			if to == from || count[to.id]+1 >= count[from.id] {
				continue
			}
			removePartition(from.assignment, ap.topic.ID, ap.p)
			count[from.id]--
			to.assignment.add(ap.topic.ID, ap.p)
			count[to.id]++
			owner[ap.topic.ID][ap.p] = to
			moved = true
		}
		if !moved {
			return
		}
	}
}

func removePartition(a Assignment, t TopicID, p int32) {
	ps := a[t]
	if i, ok := slices.BinarySearch(ps, p); ok {
		ps = slices.Delete(ps, i, i+1)
		if len(ps) == 0 {
			delete(a, t)
		} else {
			a[t] = ps
		}
	}
}
