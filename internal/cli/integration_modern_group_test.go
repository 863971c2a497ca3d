package cli_test

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-streaming/samsa/internal/testutil"
)

// TestGroupCommandsModernGroups: `group list` and `group describe` show KIP-848
// consumer groups and share groups, with their type, members, assignments and lag.
func TestGroupCommandsModernGroups(t *testing.T) {
	b := testutil.StartBroker(t,
		"group.consumer.min.session.timeout.ms=500", "group.consumer.session.timeout.ms=3000",
		"group.consumer.min.heartbeat.interval.ms=50", "group.consumer.heartbeat.interval.ms=200",
		"group.share.min.heartbeat.interval.ms=1000", "group.share.heartbeat.interval.ms=1000")
	ok(t, b, "", "topic", "create", "modern", "-p", "2")
	produceEach(t, b, "modern", 2, 10)

	// A KIP-848 member reads everything and commits.
	cg, err := kgo.NewClient(kgo.SeedBrokers(b.Addr), kgo.ConsumerGroup("m848"), kgo.ServerSideBalancer(),
		kgo.ConsumeTopics("modern"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit())
	if err != nil {
		t.Fatal(err)
	}
	defer cg.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for n := 0; n < 20; {
		fs := cg.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatal("the KIP-848 member did not read 20 records")
		}
		n += len(fs.Records())
	}
	if err := cg.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 20*time.Second, func() bool {
		return groupIs(t, b, "m848", func(d groupDescription) bool {
			return d.Type == "consumer" && d.State == "Stable" && len(d.Members) == 1 && d.assigned() == 2 && d.TotalLag == 0 && len(d.Partitions) == 2
		})
	}, "the consumer group described with its member and no lag")

	// A share group reads everything and accepts it.
	setGroupConfig := kmsg.NewPtrIncrementalAlterConfigsRequest()
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeGroupConfig, "shared"
	res.Configs = []kmsg.IncrementalAlterConfigsRequestResourceConfig{{Name: "share.auto.offset.reset", Value: kmsg.StringPtr("earliest")}}
	setGroupConfig.Resources = append(setGroupConfig.Resources, res)
	if _, err := setGroupConfig.RequestWith(ctx, cg); err != nil {
		t.Fatal(err)
	}
	sc, err := kgo.NewClient(kgo.SeedBrokers(b.Addr), kgo.ShareGroup("shared"), kgo.ConsumeTopics("modern"))
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	for n := 0; n < 20; {
		fs := sc.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatal("the share consumer did not read 20 records")
		}
		fs.EachRecord(func(r *kgo.Record) { r.Ack(kgo.AckAccept) })
		n += len(fs.Records())
	}
	if err := sc.FlushAcks(ctx); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 20*time.Second, func() bool {
		return groupIs(t, b, "shared", func(d groupDescription) bool {
			committed := int64(0)
			for _, p := range d.Partitions {
				if p.CommittedOffset != nil {
					committed += *p.CommittedOffset
				}
			}
			return d.Type == "share" && len(d.Members) == 1 && d.TotalLag == 0 && committed == 20
		})
	}, "the share group described with its start offsets and no lag")

	var groups struct {
		Groups []struct {
			Group string `json:"group"`
			Type  string `json:"type"`
		} `json:"groups"`
	}
	okJSON(t, b, &groups, "group", "list")
	types := map[string]string{}
	for _, g := range groups.Groups {
		types[g.Group] = g.Type
	}
	if types["m848"] != "consumer" || types["shared"] != "share" {
		t.Fatalf("group list types: %v", types)
	}
}
