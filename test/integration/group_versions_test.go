package integration

// The newest versions of the group APIs, driven with raw requests: OffsetCommit and
// OffsetFetch v10 (topics by id), FindCoordinator v6 (share keys).

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/samsa-streaming/samsa/internal/testutil"
)

func TestGroupAPIsByTopicID(t *testing.T) {
	t.Parallel()
	b := testutil.StartBroker(t)
	adm := newAdmin(t, b)
	createTopic(t, adm, "byid", 2, nil)
	details, err := adm.ListTopics(ctxT(t, 10*time.Second), "byid")
	if err != nil {
		t.Fatal(err)
	}
	id := details["byid"].ID
	cl := newClient(t, b, kgo.MaxVersions(kversion.Stable()))
	ctx := ctxT(t, 20*time.Second)

	commit := kmsg.NewPtrOffsetCommitRequest()
	commit.Version, commit.Group, commit.Generation = 10, "byid-g", -1
	for _, tid := range [][16]byte{id, {1, 2, 3}} {
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.TopicID = tid
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset = 1, 42
		rt.Partitions = append(rt.Partitions, rp)
		commit.Topics = append(commit.Topics, rt)
	}
	cresp, err := commit.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if cresp.Version != 10 || cresp.Topics[0].TopicID != id || cresp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("commit by id: %+v", cresp.Topics[0])
	}
	if code := cresp.Topics[1].Partitions[0].ErrorCode; code != kerr.UnknownTopicID.Code {
		t.Fatalf("commit to an unknown topic id: error %d", code)
	}

	for _, all := range []bool{false, true} {
		fetch := kmsg.NewPtrOffsetFetchRequest()
		fetch.Version = 10
		g := kmsg.NewOffsetFetchRequestGroup()
		g.Group = "byid-g"
		if !all {
			rt := kmsg.NewOffsetFetchRequestGroupTopic()
			rt.TopicID, rt.Partitions = id, []int32{0, 1}
			g.Topics = append(g.Topics, rt)
		}
		fetch.Groups = append(fetch.Groups, g)
		fresp, err := fetch.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		topics := fresp.Groups[0].Topics
		if len(topics) != 1 || topics[0].TopicID != id {
			t.Fatalf("fetch by id (all %v): %+v", all, topics)
		}
		for _, p := range topics[0].Partitions {
			if want := map[int32]int64{0: -1, 1: 42}[p.Partition]; p.Offset != want {
				t.Fatalf("fetch by id (all %v): partition %d at %d, want %d", all, p.Partition, p.Offset, want)
			}
		}
	}

	find := kmsg.NewPtrFindCoordinatorRequest()
	find.Version, find.CoordinatorType = 6, 2
	find.CoordinatorKeys = []string{"g:AAAAAAAAAAAAAAAAAAAAAA:0"}
	fc, err := find.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if c := fc.Coordinators[0]; c.ErrorCode != 0 || c.NodeID != 1 {
		t.Fatalf("share coordinator: error %d node %d", c.ErrorCode, c.NodeID)
	}
}

// TestDescribeTopicPartitionsCursor pages through topics with a partition limit.
func TestDescribeTopicPartitionsCursor(t *testing.T) {
	t.Parallel()
	b := testutil.StartBroker(t)
	adm := newAdmin(t, b)
	createTopic(t, adm, "dtp-a", 3, nil)
	createTopic(t, adm, "dtp-b", 2, nil)
	cl := newClient(t, b)
	var got []string
	var cursor *kmsg.DescribeTopicPartitionsRequestCursor
	for page := 0; page < 5; page++ {
		req := kmsg.NewPtrDescribeTopicPartitionsRequest()
		for _, n := range []string{"dtp-b", "dtp-a", "dtp-missing"} {
			req.Topics = append(req.Topics, kmsg.DescribeTopicPartitionsRequestTopic{Topic: n})
		}
		req.ResponsePartitionLimit = 2
		req.Cursor = cursor
		resp, err := req.RequestWith(ctxT(t, 10*time.Second), cl)
		if err != nil {
			t.Fatal(err)
		}
		for _, rt := range resp.Topics {
			if *rt.Topic == "dtp-missing" {
				if rt.ErrorCode != kerr.UnknownTopicOrPartition.Code {
					t.Fatalf("missing topic: error %d", rt.ErrorCode)
				}
				got = append(got, "missing")
				continue
			}
			for _, p := range rt.Partitions {
				got = append(got, fmt.Sprintf("%s/%d@%d", *rt.Topic, p.Partition, p.LeaderID))
			}
		}
		if resp.NextCursor == nil {
			break
		}
		cursor = &kmsg.DescribeTopicPartitionsRequestCursor{Topic: resp.NextCursor.Topic, Partition: resp.NextCursor.Partition}
	}
	want := []string{"dtp-a/0@1", "dtp-a/1@1", "dtp-a/2@1", "dtp-b/0@1", "dtp-b/1@1", "missing"}
	if !slices.Equal(got, want) {
		t.Fatalf("pages gave %v, want %v", got, want)
	}
}
