package integration

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-streaming/samsa/internal/testutil"
)

// TestShareAdminRacingFetches: AlterShareGroupOffsets, DeleteShareGroupOffsets and
// DeleteGroups of a share group without members race the ShareFetches of sessions
// whose members are gone (ShareFetch, as in Kafka, does not check membership). Once the
// operation answered, a new session gets records from where it said: the new start
// after an alter, the log end (share.auto.offset.reset latest) after a deletion; the
// old state is not served on from memory.
func TestShareAdminRacingFetches(t *testing.T) {
	t.Parallel()
	for _, op := range []string{"alter", "delete-offsets", "delete-group"} {
		t.Run(op, func(t *testing.T) {
			t.Parallel()
			raceShareAdminWithFetches(t, op)
		})
	}
}

func raceShareAdminWithFetches(t *testing.T, op string) {
	b := testutil.StartBroker(t)
	const topic, group, records, stale, rounds = "share-admin-race", "share-admin-race", 100, 6, 60
	adm := newAdmin(t, b)
	createTopic(t, adm, topic, 1, nil)
	cl := newClient(t, b)
	id := topicID(t, cl, topic)
	produceValues(t, b, topic, "v", records)
	ctx := ctxT(t, 5*time.Minute)
	testutil.WaitFor(t, 30*time.Second, func() bool { return shareAlter(ctx, cl, group, topic, 0) == nil }, "the first AlterShareGroupOffsets")

	// Stale sessions fetch one record at a time, releasing the one before, while running.
	// A session whose fetch fails as a whole (its session is gone, or the client sent
	// it again after a timeout) starts a new one and abandons the record it held: that
	// stays locked to its member until the lock expires, as in Kafka (abandoned).
	// Releasing gives a record back to be acquired again, so the sessions acquire the
	// same few records over and over: one acquired for the deliveryLimit-th time is
	// archived when released (spent). Those answered after the operation was sent may
	// have been spent in the state it started, so they count against the new start.
	const deliveryLimit = 5 // share.delivery.count.limit, Kafka's default
	var running, opSent atomic.Bool
	var abandoned atomic.Int64
	var spentMu sync.Mutex
	spent := map[int64]bool{}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	defer func() { close(stop); wg.Wait() }()
	var goes, dones []chan struct{}
	for z := range stale {
		s := &rawShareSession{c: newClient(t, b), group: group, member: fmt.Sprintf("gone-member-%011d", z), topicID: id}
		do, done := make(chan struct{}, 1), make(chan struct{}, 1)
		goes, dones = append(goes, do), append(dones, done)
		wg.Go(func() {
			var held []int64
			for {
				select {
				case <-stop:
					return
				case <-do:
				}
				for running.Load() {
					got, err := s.fetch(ctx, 0, 1, held, 2) // release
					if err != nil {
						t.Errorf("stale session fetch: %v", err)
						break
					}
					if s.epoch == 0 && len(held) > 0 {
						abandoned.Add(int64(len(held)))
						t.Logf("a stale session's fetch failed as a whole: it abandons offset %d", held[0])
					}
					if opSent.Load() {
						spentMu.Lock()
						for i, o := range got {
							if s.deliveries[i] >= deliveryLimit {
								spent[o] = true
							}
						}
						spentMu.Unlock()
					}
					held = got
				}
				done <- struct{}{}
			}
		})
	}

	for round := range rounds {
		want := int64(50 * (round % 2)) // alter: the new start
		if op != "alter" {
			if err := shareAlter(ctx, cl, group, topic, want); err != nil {
				t.Fatalf("round %d: AlterShareGroupOffsets to %d before the deletion: %v", round, want, err)
			}
			want = records // deleted: the log end
		}
		abandoned.Store(0) // an alter or deletion clears what earlier rounds abandoned
		opSent.Store(false)
		clear(spent)
		running.Store(true)
		for _, g := range goes {
			g <- struct{}{}
		}
		time.Sleep(time.Duration(round%5) * 100 * time.Microsecond)
		opSent.Store(true)
		var err error
		switch op {
		case "alter":
			err = shareAlter(ctx, cl, group, topic, want)
		case "delete-offsets":
			err = shareDeleteOffsets(ctx, cl, group, topic)
		case "delete-group":
			err = deleteGroup(ctx, adm, group)
		}
		running.Store(false)
		for _, d := range dones {
			<-d
		}
		if err != nil {
			t.Fatalf("round %d: %s: %v", round, op, err)
		}
		// The stale sessions may still hold their last record each (until its lock
		// expires), and those they abandoned, and may have spent records past the new
		// start, so the first record may come up to `stale` + abandoned + spent after it.
		late := 0
		for o := range spent {
			if o >= want {
				late++
			}
		}
		fresh := &rawShareSession{c: cl, group: group, member: fmt.Sprintf("fresh-member-%010d", round), topicID: id}
		got, err := fresh.fetch(ctx, 100, records, nil, 0)
		if err != nil {
			t.Fatalf("round %d: a new session's fetch: %v", round, err)
		}
		switch {
		case op == "alter" && (len(got) == 0 || got[0] < want || got[0] > want+stale+abandoned.Load()+int64(late)):
			t.Fatalf("round %d: AlterShareGroupOffsets to %d answered, yet a new session got %d records from %v (the stale sessions abandoned %d and spent %d from %d on)",
				round, want, len(got), firstOf(got), abandoned.Load(), late, want)
		case op != "alter" && len(got) > 0:
			t.Fatalf("round %d: %s answered, yet a new session got %d records from %d (the log end is %d)", round, op, len(got), got[0], records)
		}
		if err := fresh.close(ctx, got); err != nil {
			t.Fatalf("round %d: closing the new session: %v", round, err)
		}
	}
}

func firstOf(offsets []int64) any {
	if len(offsets) == 0 {
		return "none"
	}
	return offsets[0]
}

// TestDeleteShareGroupRacingOffsetAdmin: DeleteGroups of a share group without members
// races AlterShareGroupOffsets (of a topic the group has state on, or of a new one) or
// DeleteShareGroupOffsets of the same group. Whatever each answered, ListGroups and
// DescribeShareGroupOffsets answer the same before and after a restart, and a group
// that is gone left no state behind: a new group of its name starts at the log end.
func TestDeleteShareGroupRacingOffsetAdmin(t *testing.T) {
	t.Parallel()
	b := testutil.StartBroker(t, "offsets.topic.num.partitions=1")
	const known, other, rounds = "share-delete-race-a", "share-delete-race-b", 150
	adm := newAdmin(t, b)
	createTopic(t, adm, known, 1, nil)
	createTopic(t, adm, other, 1, nil)
	produceValues(t, b, known, "a", 20)
	produceValues(t, b, other, "b", 20)
	cl, deleter, racer := newClient(t, b), newAdmin(t, b), newClient(t, b)
	knownID := topicID(t, cl, known)
	ctx := ctxT(t, 5*time.Minute)
	testutil.WaitFor(t, 30*time.Second, func() bool { return shareAlter(ctx, cl, "warm-up", known, 0) == nil }, "the share coordinator")

	answers := map[string]int{}
	var groups []string
	for i := range rounds {
		kind := []string{"alter", "alter a new topic", "delete offsets"}[i%3]
		g := fmt.Sprintf("share-delete-race-%d", i)
		groups = append(groups, g)
		if err := shareAlter(ctx, cl, g, known, 5); err != nil {
			t.Fatalf("%s: AlterShareGroupOffsets: %v", g, err)
		}
		var deleted, raced error
		race(i, func() { deleted = deleteGroup(ctx, deleter, g) }, func() {
			switch kind {
			case "alter":
				raced = shareAlter(ctx, racer, g, known, 7)
			case "alter a new topic":
				raced = shareAlter(ctx, racer, g, other, 7)
			default:
				raced = shareDeleteOffsets(ctx, racer, g, known)
			}
		})
		answers[fmt.Sprintf("DeleteGroups %v, %s %v", deleted, kind, raced)]++
	}
	t.Logf("answers: %v", answers)

	views := func(adm *kadm.Client) map[string]string {
		listed, err := adm.ListGroups(ctx)
		if err != nil {
			return nil
		}
		out := map[string]string{}
		for _, g := range groups {
			a, _, aErr := shareStart(ctx, cl, g, known)
			o, _, oErr := shareStart(ctx, cl, g, other)
			if errors.Is(aErr, kerr.CoordinatorNotAvailable) || errors.Is(aErr, kerr.CoordinatorLoadInProgress) {
				return nil
			}
			out[g] = fmt.Sprintf("listed %q, start %d (%v) on %s, %d (%v) on %s", listed[g].GroupType, a, aErr, known, o, oErr, other)
		}
		return out
	}
	before := views(adm)
	b.Restart(t)
	adm, cl = newAdmin(t, b), newClient(t, b)
	var after map[string]string
	testutil.WaitFor(t, 30*time.Second, func() bool { after = views(adm); return after != nil }, "the groups after the restart")
	for _, g := range slices.Sorted(maps.Keys(before)) {
		if before[g] != after[g] {
			t.Errorf("%s before the restart: %s; after it: %s", g, before[g], after[g])
		}
	}

	listed, err := adm.ListGroups(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i, g := range groups {
		if _, ok := listed[g]; ok {
			continue
		}
		member := fmt.Sprintf("new-member-%013d", i)
		if err := shareJoin(ctx, cl, g, member, known); err != nil {
			t.Fatalf("%s: a new member's join: %v", g, err)
		}
		s := &rawShareSession{c: cl, group: g, member: member, topicID: knownID}
		got, err := s.fetch(ctx, 100, 100, nil, 0)
		if err != nil {
			t.Fatalf("%s: a new member's fetch: %v", g, err)
		}
		if len(got) > 0 {
			t.Errorf("%s is gone (%s), yet a new member of that name got records from %d, its old state", g, after[g], got[0])
		}
	}
}

// rawShareSession is one member's share session on one partition (partition 0 of
// topicID), over c.
type rawShareSession struct {
	c             *kgo.Client
	group, member string
	topicID       [16]byte
	epoch         int32
	deliveries    []int16 // the delivery count of each offset the last fetch acquired
}

// fetch sends a ShareFetch (strict: at most maxRecords) that acknowledges acked with
// ackType, and returns the offsets acquired.
func (s *rawShareSession) fetch(ctx context.Context, maxWaitMillis, maxRecords int32, acked []int64, ackType int8) ([]int64, error) {
	req := kmsg.NewPtrShareFetchRequest()
	req.GroupID, req.MemberID, req.ShareSessionEpoch = &s.group, &s.member, s.epoch
	req.MaxWaitMillis, req.MinBytes, req.MaxBytes, req.MaxRecords, req.BatchSize = maxWaitMillis, 1, 1<<20, maxRecords, maxRecords
	req.ShareAcquireMode = 1 // record limit
	rt := kmsg.NewShareFetchRequestTopic()
	rt.TopicID = s.topicID
	rp := kmsg.NewShareFetchRequestTopicPartition()
	for _, o := range acked {
		ab := kmsg.NewShareFetchRequestTopicPartitionAcknowledgementBatch()
		ab.FirstOffset, ab.LastOffset, ab.AcknowledgeTypes = o, o, []int8{ackType}
		rp.AcknowledgementBatches = append(rp.AcknowledgementBatches, ab)
	}
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, s.c)
	if err != nil {
		return nil, err
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		s.epoch = 0
		return nil, nil // a stale session's error: it starts a new one
	}
	s.epoch++
	var got []int64
	s.deliveries = s.deliveries[:0]
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			for _, a := range p.AcquiredRecords {
				for o := a.FirstOffset; o <= a.LastOffset; o++ {
					got = append(got, o)
					s.deliveries = append(s.deliveries, a.DeliveryCount)
				}
			}
		}
	}
	return got, nil
}

// close releases held and ends the session.
func (s *rawShareSession) close(ctx context.Context, held []int64) error {
	req := kmsg.NewPtrShareAcknowledgeRequest()
	req.GroupID, req.MemberID, req.ShareSessionEpoch = &s.group, &s.member, -1
	rt := kmsg.NewShareAcknowledgeRequestTopic()
	rt.TopicID = s.topicID
	rp := kmsg.NewShareAcknowledgeRequestTopicPartition()
	for _, o := range held {
		ab := kmsg.NewShareAcknowledgeRequestTopicPartitionAcknowledgementBatch()
		ab.FirstOffset, ab.LastOffset, ab.AcknowledgeTypes = o, o, []int8{2} // release
		rp.AcknowledgementBatches = append(rp.AcknowledgementBatches, ab)
	}
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, s.c)
	if err != nil {
		return err
	}
	return kerr.ErrorForCode(resp.ErrorCode)
}

// shareAlter moves the share-partition start of partition 0 of topic.
func shareAlter(ctx context.Context, c *kgo.Client, group, topic string, start int64) error {
	req := kmsg.NewPtrAlterShareGroupOffsetsRequest()
	req.GroupID = group
	rt := kmsg.NewAlterShareGroupOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewAlterShareGroupOffsetsRequestTopicPartition()
	rp.StartOffset = start
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, c)
	if err != nil {
		return err
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return err
	}
	return kerr.ErrorForCode(resp.Topics[0].Partitions[0].ErrorCode)
}

func shareDeleteOffsets(ctx context.Context, c *kgo.Client, group, topic string) error {
	req := kmsg.NewPtrDeleteShareGroupOffsetsRequest()
	req.GroupID = group
	rt := kmsg.NewDeleteShareGroupOffsetsRequestTopic()
	rt.Topic = topic
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, c)
	if err != nil {
		return err
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return err
	}
	return kerr.ErrorForCode(resp.Topics[0].ErrorCode)
}

// shareStart is the share-partition start offset (-1: no state) and lag of partition
// 0 of topic, or the error DescribeShareGroupOffsets answered.
func shareStart(ctx context.Context, c *kgo.Client, group, topic string) (start, lag int64, err error) {
	req := kmsg.NewPtrDescribeShareGroupOffsetsRequest()
	rg := kmsg.NewDescribeShareGroupOffsetsRequestGroup()
	rg.GroupID = group
	rt := kmsg.NewDescribeShareGroupOffsetsRequestGroupTopic()
	rt.Topic, rt.Partitions = topic, []int32{0}
	rg.Topics = append(rg.Topics, rt)
	req.Groups = append(req.Groups, rg)
	resp, err := req.RequestWith(ctx, c)
	if err != nil {
		return 0, 0, err
	}
	if err := kerr.ErrorForCode(resp.Groups[0].ErrorCode); err != nil {
		return 0, 0, err
	}
	if len(resp.Groups[0].Topics) != 1 || len(resp.Groups[0].Topics[0].Partitions) != 1 {
		return 0, 0, fmt.Errorf("DescribeShareGroupOffsets answered %d topics for one", len(resp.Groups[0].Topics))
	}
	p := resp.Groups[0].Topics[0].Partitions[0]
	return p.StartOffset, p.Lag, kerr.ErrorForCode(p.ErrorCode)
}

func shareJoin(ctx context.Context, c *kgo.Client, group, member, topic string) error {
	req := kmsg.NewPtrShareGroupHeartbeatRequest()
	req.GroupID, req.MemberID, req.SubscribedTopicNames = group, member, []string{topic}
	resp, err := req.RequestWith(ctx, c)
	if err != nil {
		return err
	}
	return kerr.ErrorForCode(resp.ErrorCode)
}
