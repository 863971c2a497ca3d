package group

import (
	"testing"
	"time"
)

// FuzzLoadRecord feeds arbitrary records to the loader: nothing may panic, whatever a
// __consumer_offsets partition holds.
func FuzzLoadRecord(f *testing.F) {
	g := newGroup("g", 0, time.Unix(1, 0))
	g.protocolType, g.protocol, g.generation = "consumer", "range", 3
	g.add(&member{id: "m", protocols: []protocol{{name: "range", metadata: consumerMeta("t")}}, sessionTimeout: time.Second}, nil)
	owned := Assignment{}
	owned.add(topicIDOf("t"), 1)
	for _, r := range []Record{
		offsetRecord("g", TopicPartition{"t", 1}, CommittedOffset{Offset: 5, LeaderEpoch: 2, Metadata: "x", CommitTime: time.Unix(2, 0)}),
		offsetTombstone("g", TopicPartition{"t", 1}),
		groupRecord(g, map[string][]byte{"m": []byte("a")}),
		groupTombstone("g"),
		// KIP-848 and share groups (a member with an assignment, a share group with
		// and without initialized topics).
		consumerGroupRecord("c", &consumerGroup{epoch: 4, targetEpoch: 4, subscriptionHash: 9}),
		consumerMemberRecord("c", &consumerMember{id: "m", subscribedNames: []string{"t"}, epoch: 4, assigned: owned}),
		consumerMemberTombstone("c", "m"),
		shareGroupRecord("s", &shareGroup{epoch: 2, initialized: map[TopicID]int32{topicIDOf("t"): 3}}),
		shareGroupRecord("s", &shareGroup{epoch: 1, initialized: map[TopicID]int32{}}),
		shareMemberRecord("s", &shareMember{id: "m", subscribedNames: []string{"t"}, epoch: 2, assignment: owned, target: owned}),
	} {
		f.Add(r.Key, r.Value, r.Value == nil)
	}
	f.Fuzz(func(t *testing.T, key, value []byte, tombstone bool) {
		if tombstone {
			value = nil
		}
		l := &loader{groups: map[string]*group{}, logger: discardLogger()}
		_ = l.apply(Record{Key: key, Value: value})
		_ = l.apply(Record{Key: key, Value: value})
		for _, g := range l.finish(time.Unix(10, 0)) {
			_ = groupRecord(g, nil)
			_ = g.computeSubscribedTopics()
		}
	})
}
