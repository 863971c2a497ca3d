package integration

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-streaming/samsa/internal/testutil"
)

// TestDeleteGroupsRacingCommitsAndJoins: DeleteGroups of an empty group races, from
// another connection, an offset commit of a partition the group has no offset for yet
// (a simple consumer's, through kadm) or a KIP-848 join (ConsumerGroupHeartbeat).
// Whatever each answered, what clients see afterwards is what a restart loads from
// __consumer_offsets: no deleted group or offset comes back, and nothing acknowledged
// that the deletion did not cover is lost. A member whose join succeeded is known to
// its next heartbeat.
func TestDeleteGroupsRacingCommitsAndJoins(t *testing.T) {
	t.Parallel()
	b := testutil.StartBroker(t, "offsets.topic.num.partitions=1", "group.consumer.session.timeout.ms=60000")
	const topic, rounds = "delete-race", 150
	adm := newAdmin(t, b)
	createTopic(t, adm, topic, 2, nil)
	seed, committer, deleter := adm, newAdmin(t, b), newAdmin(t, b)
	joiner := newClient(t, b)
	ctx := ctxT(t, 3*time.Minute)

	var groups []string
	both := map[string]int{}
	for i := range rounds {
		// A simple consumer's group with an offset for partition 0; partition 1's
		// commit races the deletion.
		og := fmt.Sprintf("delete-race-offsets-%d", i)
		groups = append(groups, og)
		if err := commitOne(ctx, seed, og, topic, 0, 10); err != nil {
			t.Fatalf("seed commit into %s: %v", og, err)
		}
		var commitErr, deleteErr error
		race(i, func() { commitErr = commitOne(ctx, committer, og, topic, 1, 20) },
			func() { deleteErr = deleteGroup(ctx, deleter, og) })
		if commitErr == nil && deleteErr == nil {
			both["commit"]++
		}

		// A consumer group that one member joined and left; another member's join
		// races the deletion.
		cg := fmt.Sprintf("delete-race-consumer-%d", i)
		groups = append(groups, cg)
		first := fmt.Sprintf("first-%d", i)
		if r, err := groupHeartbeat(ctx, joiner, cg, first, 0, topic); err != nil || r.ErrorCode != 0 {
			t.Fatalf("join %s: %v %+v", cg, err, r)
		}
		if r, err := groupHeartbeat(ctx, joiner, cg, first, -1, topic); err != nil || r.ErrorCode != 0 {
			t.Fatalf("leave %s: %v %+v", cg, err, r)
		}
		second := fmt.Sprintf("second-%d", i)
		var joined *kmsg.ConsumerGroupHeartbeatResponse
		var joinErr error
		race(i, func() { deleteErr = deleteGroup(ctx, deleter, cg) },
			func() { joined, joinErr = groupHeartbeat(ctx, joiner, cg, second, 0, topic) })
		if joinErr != nil || joined.ErrorCode != 0 {
			continue
		}
		if deleteErr == nil {
			both["join"]++
		}
		if r, err := groupHeartbeat(ctx, joiner, cg, second, joined.MemberEpoch, topic); err != nil || r.ErrorCode != 0 {
			t.Fatalf("group %s: %s's join succeeded (epoch %d, DeleteGroups: %v) but its next heartbeat got %v %+v",
				cg, second, joined.MemberEpoch, deleteErr, err, r)
		}
	}
	t.Logf("rounds where both succeeded: %v", both)

	answered := groupViews(t, adm, groups)
	b.Restart(t)
	adm = newAdmin(t, b)
	var reloaded map[string]string
	testutil.WaitFor(t, 30*time.Second, func() bool {
		reloaded = groupViews(t, adm, groups)
		return reloaded != nil
	}, "the groups to load after the restart")
	changed := 0
	for _, g := range groups {
		if answered[g] != reloaded[g] {
			if changed++; changed <= 10 {
				t.Errorf("group %s before the restart: %s; after it: %s", g, answered[g], reloaded[g])
			}
		}
	}
	if changed > 0 {
		t.Fatalf("%d of %d groups changed across the restart", changed, len(groups))
	}
}

// race runs a and b at once, b a little later in some rounds, and waits for both.
func race(round int, a, b func()) {
	var wg sync.WaitGroup
	wg.Go(a)
	wg.Go(func() {
		time.Sleep(time.Duration(round%6) * 50 * time.Microsecond)
		b()
	})
	wg.Wait()
}

func commitOne(ctx context.Context, adm *kadm.Client, group, topic string, partition int32, offset int64) error {
	var os kadm.Offsets
	os.AddOffset(topic, partition, offset, -1)
	resp, err := adm.CommitOffsets(ctx, group, os)
	if err != nil {
		return err
	}
	return resp.Error()
}

func deleteGroup(ctx context.Context, adm *kadm.Client, group string) error {
	resp, err := adm.DeleteGroup(ctx, group)
	if err != nil {
		return err
	}
	return resp.Err
}

// groupHeartbeat sends one ConsumerGroupHeartbeat: a join (epoch 0) subscribing to
// topic, a heartbeat at an epoch, or a leave (-1).
func groupHeartbeat(ctx context.Context, cl *kgo.Client, group, member string, epoch int32, topic string) (*kmsg.ConsumerGroupHeartbeatResponse, error) {
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Group, req.MemberID, req.MemberEpoch, req.RebalanceTimeoutMillis = group, member, epoch, -1
	if epoch == 0 {
		req.RebalanceTimeoutMillis = 30000
		req.SubscribedTopicNames = []string{topic}
		req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	}
	return req.RequestWith(ctx, cl)
}

// groupViews describes each group as clients see it: listed or not, its type, its
// consumer-protocol members and its committed offsets. It returns nil while the
// coordinator cannot answer yet.
func groupViews(t *testing.T, adm *kadm.Client, groups []string) map[string]string {
	t.Helper()
	ctx := ctxT(t, 20*time.Second)
	listed, err := adm.ListGroups(ctx)
	if err != nil {
		return nil
	}
	offsets := adm.FetchManyOffsets(ctx, groups...)
	var consumer []string
	for _, g := range groups {
		if l, ok := listed[g]; ok && l.GroupType == "consumer" {
			consumer = append(consumer, g)
		}
	}
	members := map[string][]string{}
	if len(consumer) > 0 {
		described, err := adm.DescribeConsumerGroups(ctx, consumer...)
		if err != nil {
			return nil
		}
		for g, d := range described {
			if d.Err != nil {
				return nil
			}
			for _, m := range d.Members {
				members[g] = append(members[g], m.MemberID)
			}
			slices.Sort(members[g])
		}
	}
	out := map[string]string{}
	for _, g := range groups {
		o := offsets[g]
		if o.Err != nil {
			return nil
		}
		committed := map[string]int64{}
		o.Fetched.Each(func(r kadm.OffsetResponse) {
			committed[fmt.Sprintf("%s/%d", r.Topic, r.Partition)] = r.At
		})
		view := "not listed"
		if l, ok := listed[g]; ok {
			view = fmt.Sprintf("listed as %s, members %v", l.GroupType, members[g])
		}
		out[g] = fmt.Sprintf("%s, offsets %v", view, committed)
	}
	return out
}
