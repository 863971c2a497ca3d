package broker

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-streaming/samsa/internal/clock"
	"github.com/samsa-streaming/samsa/internal/config"
	"github.com/samsa-streaming/samsa/internal/controller"
	"github.com/samsa-streaming/samsa/internal/storage"
)

func startTestBroker(t *testing.T) *Broker {
	t.Helper()
	return startTestBrokerOn(t, nil, t.TempDir())
}

// startTestBrokerOn starts a one-node broker on log directories dirs whose segment
// files are opened through fsys (nil: the real file system).
func startTestBrokerOn(t testing.TB, fsys storage.FS, dirs ...string) *Broker {
	t.Helper()
	return startTestBrokerWith(t, fsys, nil, dirs...)
}

// startTestBrokerWith is startTestBrokerOn with extra configuration properties.
func startTestBrokerWith(t testing.TB, fsys storage.FS, props []string, dirs ...string) *Broker {
	t.Helper()
	return startTestBrokerOptions(t, Options{FS: fsys}, props, dirs...)
}

// startTestBrokerOptions is startTestBrokerWith with more of the broker's options
// (o's Config, Clock and Logger are set here).
func startTestBrokerOptions(t testing.TB, o Options, props []string, dirs ...string) *Broker {
	t.Helper()
	props = append([]string{"log.dirs=" + strings.Join(dirs, ","), "listeners=PLAINTEXT://127.0.0.1:0"}, props...)
	cfg, err := config.Load("", props)
	if err != nil {
		t.Fatal(err)
	}
	o.Config, o.Clock, o.Logger = cfg, clock.Real{}, slog.New(slog.DiscardHandler)
	b, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	if err := b.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	return b
}

// createTestTopic creates a topic of replication factor 1 through CreateTopics.
func createTestTopic(t testing.TB, b *Broker, name string, partitions int32) {
	t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, partitions, 1
	req.Topics = append(req.Topics, rt)
	if code := call[*kmsg.CreateTopicsResponse](t, b, req).Topics[0].ErrorCode; code != 0 {
		t.Fatalf("create %s: %v", name, kerr.ErrorForCode(code))
	}
}

// TestAlterPartitionThroughTheChannel drives AlterPartition the way the data plane
// will: through the broker's Channel (in process here: the node is the active
// controller) and the controller listener's handler, with Kafka's error codes
// coming back as the controller's errors.
func TestAlterPartitionThroughTheChannel(t *testing.T) {
	b := startTestBroker(t)
	createTestTopic(t, b, "isr", 1)
	tp, _ := b.image().Topic("isr")
	p := tp.Partitions[0]
	item := controller.AlterPartitionItem{
		TopicID: tp.ID, Partition: 0, LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch,
		NewISR: []controller.ISRMember{{BrokerID: 1, BrokerEpoch: b.BrokerEpoch()}},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	results, err := b.Channel().AlterPartition(ctx, 1, b.BrokerEpoch(), []controller.AlterPartitionItem{item})
	if err != nil || results[0].Err != nil || results[0].State.Leader != 1 || results[0].State.PartitionEpoch != p.PartitionEpoch {
		t.Fatalf("unchanged ISR: %v %+v", err, results)
	}
	stale := item
	stale.LeaderEpoch--
	results, _ = b.Channel().AlterPartition(ctx, 1, b.BrokerEpoch(), []controller.AlterPartitionItem{stale})
	if !errors.Is(results[0].Err, controller.ErrFencedLeaderEpoch) {
		t.Fatalf("old leader epoch: %v", results[0].Err)
	}
	foreign := item
	foreign.NewISR = append(foreign.NewISR, controller.ISRMember{BrokerID: 7, BrokerEpoch: -1})
	results, _ = b.Channel().AlterPartition(ctx, 1, b.BrokerEpoch(), []controller.AlterPartitionItem{foreign})
	if !errors.Is(results[0].Err, controller.ErrInvalidRequest) {
		t.Fatalf("member outside the replicas: %v", results[0].Err)
	}
	if _, err := b.Channel().AlterPartition(ctx, 1, b.BrokerEpoch()+1, []controller.AlterPartitionItem{item}); !errors.Is(err, controller.ErrStaleBrokerEpoch) {
		t.Fatalf("stale broker epoch: %v", err)
	}

	// Version 1 names topics and answers with the codes it knows.
	v1 := kmsg.NewPtrAlterPartitionRequest()
	v1.SetVersion(1)
	v1.BrokerID, v1.BrokerEpoch = 1, b.BrokerEpoch()
	t1 := kmsg.NewAlterPartitionRequestTopic()
	t1.Topic = "isr"
	p1 := kmsg.NewAlterPartitionRequestTopicPartition()
	p1.LeaderEpoch, p1.PartitionEpoch, p1.NewISR = p.LeaderEpoch, p.PartitionEpoch, []int32{1}
	t1.Partitions = append(t1.Partitions, p1)
	v1.Topics = append(v1.Topics, t1)
	resp, err := b.serveController(ctx, v1)
	if err != nil {
		t.Fatal(err)
	}
	got := resp.(*kmsg.AlterPartitionResponse).Topics[0].Partitions[0]
	if got.ErrorCode != 0 || got.LeaderID != 1 || len(got.ISR) != 1 {
		t.Fatalf("v1: %+v", got)
	}
	if code := alterPartitionErrorCode(controller.ErrIneligibleReplica, 1); code != kerr.OperationNotAttempted.Code {
		t.Fatalf("INELIGIBLE_REPLICA before v2 = %d", code)
	}
}
