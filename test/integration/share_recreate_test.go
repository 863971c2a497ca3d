package integration

import (
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-streaming/samsa/internal/testutil"
)

// describeAllShareOffsets answers DescribeShareGroupOffsets for all the group's
// topics: topic name -> topic id -> partitions' start offsets.
func describeAllShareOffsets(t *testing.T, b *testutil.Broker, group string) ([]kmsg.DescribeShareGroupOffsetsResponseGroupTopic, error) {
	t.Helper()
	req := kmsg.NewPtrDescribeShareGroupOffsetsRequest()
	rg := kmsg.NewDescribeShareGroupOffsetsRequestGroup()
	rg.GroupID = group
	req.Groups = append(req.Groups, rg)
	resp, err := req.RequestWith(ctxT(t, 5*time.Second), newClient(t, b))
	if err != nil {
		return nil, err
	}
	return resp.Groups[0].Topics, nil
}

// TestShareGroupsConsumeRecreatedTopic: share consumers of a topic that is deleted
// and created again with the same name (a new topic id) consume the new topic's
// records from its start (share.auto.offset.reset=earliest), and the group's offsets
// name the new topic only.
func TestShareGroupsConsumeRecreatedTopic(t *testing.T) {
	t.Parallel()
	led0 := &shareLedger{}
	b := startGroupBroker(t, "group.share.min.heartbeat.interval.ms=1000", "group.share.heartbeat.interval.ms=1000")
	t.Cleanup(func() {
		if t.Failed() {
			for _, l := range strings.Split(b.FullLog(), "\n") {
				if strings.Contains(l, "share") || strings.Contains(l, "WARN") || strings.Contains(l, "ERROR") {
					t.Log(l)
				}
			}
			t.Logf("ledger: %v", led0.all())
		}
	})
	adm := newAdmin(t, b)
	const topic, group = "share-recreated", "share-recreated-g"
	createTopic(t, adm, topic, 2, nil)
	setGroupConfigs(t, b, group, map[string]string{"share.auto.offset.reset": "earliest"})
	old := produceValues(t, b, topic, "old", 30)
	led := led0
	var stops []func()
	for _, name := range []string{"c0", "c1"} {
		_, _, stop := shareMember(t, b, name, group, topic, led, acceptAll)
		stops = append(stops, stop)
	}
	testutil.WaitFor(t, 30*time.Second, func() bool { return led.acceptedAll(old) }, "the old topic's records accepted")

	ctx := ctxT(t, 30*time.Second)
	if res, err := adm.DeleteTopics(ctx, topic); err != nil || res[topic].Err != nil {
		t.Fatalf("delete: %v %v", err, res[topic].Err)
	}
	createTopic(t, adm, topic, 2, nil)
	fresh := produceValues(t, b, topic, "new", 20)
	// franz-go never adopts a topic's new id (its cursors keep the old one until the
	// topic is purged), so new consumers of the group take over.
	for _, stop := range stops {
		stop()
	}
	for _, name := range []string{"c2", "c3"} {
		shareMember(t, b, name, group, topic, led, acceptAll)
	}
	testutil.WaitFor(t, 30*time.Second, func() bool { return led.acceptedAll(fresh) }, "the re-created topic's records accepted")

	newID := topicIDByName(t, newClient(t, b), topic) // not kadm's cached metadata
	testutil.WaitFor(t, 10*time.Second, func() bool {
		topics, err := describeAllShareOffsets(t, b, group)
		if err != nil || len(topics) != 1 || topics[0].TopicID != newID {
			t.Logf("offsets: %+v %v", topics, err)
			return false
		}
		var sum int64
		for _, p := range topics[0].Partitions {
			sum += p.StartOffset
		}
		return sum == int64(len(fresh))
	}, "the group's offsets naming the new topic only, at its end")

	// After a restart the group goes on with the new topic where it was: nothing of
	// the old topic's state is read back for it.
	b.Restart(t)
	later := produceValues(t, b, topic, "later", 10)
	shareMember(t, b, "c4", group, topic, led, acceptAll)
	testutil.WaitFor(t, 30*time.Second, func() bool { return led.acceptedAll(later) }, "the records produced after the restart accepted")
	for v, n := range led.accepted() {
		if n != 1 {
			t.Fatalf("record %s accepted %d times", v, n)
		}
	}
}
