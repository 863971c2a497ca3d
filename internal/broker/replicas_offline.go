package broker

// SamsaReplicasOffline (Samsa-internal key 32003), version 0, on the controller
// listener only.
//
// When a log directory fails on a node that has others, its partitions there stop
// being served by this node (KAFKA_STORAGE_ERROR), but the rest of the cluster would
// go on treating this node as their leader or as an in-sync follower: writes to the
// partitions it led would fail until a restart, and acks=all writes to those it
// follows would wait for it until replica.lag.time.max.ms. So the node tells the
// active controller which of its replicas are offline, and the controller marks them
// offline in the partitions' metadata (none of them may lead or join an ISR until
// this node registers again as a new process), takes this node out of their ISRs and
// moves their leadership to another in-sync replica, as Kafka's controller does for
// the offline directories a broker heartbeat reports (KIP-858). Where this node is the
// last in-sync replica, KIP-841 keeps it in the ISR and the partition is left without
// a leader — or, on a topic that allows unclean elections, led by an online replica
// outside the ISR. The report follows each heartbeat for as long as the metadata has
// an offline replica here unmarked.

import (
	"context"
	"maps"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-streaming/samsa/internal/controller"
	"github.com/samsa-streaming/samsa/internal/metadata"
	"github.com/samsa-streaming/samsa/internal/protocol"
	"github.com/samsa-streaming/samsa/internal/replica"
)

func init() {
	registerController(protocol.ReplicasOfflineKey, 0, 0, (*Broker).serveReplicasOffline)
}

func (b *Broker) serveReplicasOffline(ctx context.Context, req kmsg.Request) kmsg.Response {
	r := req.(*protocol.ReplicasOfflineRequest)
	offline := make([]controller.PartitionRef, 0, len(r.Partitions))
	for _, p := range r.Partitions {
		offline = append(offline, controller.PartitionRef{TopicID: p.TopicID, Partition: p.Partition})
	}
	err := b.controller.ReplicasOffline(ctx, r.BrokerID, r.BrokerEpoch, offline)
	return &protocol.ReplicasOfflineResponse{ErrorCode: errorCode(err)}
}

// setUnopened records the partitions the last reconcile could not open because their
// log directory is offline.
func (b *Broker) setUnopened(keys map[replica.Key]bool) {
	b.unopened.Lock()
	b.unopened.m = keys
	b.unopened.Unlock()
}

// unopenedKeys returns the partitions the last reconcile could not open because their
// log directory is offline.
func (b *Broker) unopenedKeys() []replica.Key {
	b.unopened.Lock()
	defer b.unopened.Unlock()
	return slices.Collect(maps.Keys(b.unopened.m))
}

// replicaOffline reports whether this node's replica of a partition is offline: its
// log directory failed, before it was opened or since.
func (b *Broker) replicaOffline(topic string, partition int32) bool {
	if p := b.replicas.Get(topic, partition); p != nil {
		return p.Offline()
	}
	b.unopened.Lock()
	defer b.unopened.Unlock()
	return b.unopened.m[replica.Key{Topic: topic, Partition: partition}]
}

// offlineReplicas lists the partitions whose replica here is offline (its log
// directory failed, before or since start-up) and that img does not mark so yet.
func (b *Broker) offlineReplicas(img *metadata.Image) []controller.PartitionRef {
	if !b.logs.AnyOffline() {
		return nil // every heartbeat comes here: the usual case costs nothing
	}
	keys := map[replica.Key]bool{}
	for _, p := range b.replicas.All() {
		if p.Offline() {
			keys[replica.Key{Topic: p.Topic, Partition: p.Index}] = true
		}
	}
	for _, k := range b.unopenedKeys() {
		keys[k] = true
	}
	var out []controller.PartitionRef
	for k := range keys {
		t, ok := img.Topic(k.Topic)
		if !ok || int(k.Partition) >= len(t.Partitions) {
			continue
		}
		if p := t.Partitions[k.Partition]; slices.Contains(p.Replicas, b.nodeID) && !slices.Contains(p.OfflineReplicas, b.nodeID) {
			out = append(out, controller.PartitionRef{TopicID: t.ID, Partition: k.Partition})
		}
	}
	return out
}

// reportOfflineReplicas tells the active controller about offlineReplicas, if any.
func (b *Broker) reportOfflineReplicas(ctx context.Context, epoch int64, timeout time.Duration) {
	offline := b.offlineReplicas(b.meta.Image())
	if len(offline) == 0 {
		return
	}
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := b.channel.ReplicasOffline(rctx, b.nodeID, epoch, offline); err != nil && ctx.Err() == nil {
		b.logger.Warn("could not report the replicas of failed log directories to the active controller; trying again after the next heartbeat",
			"partitions", len(offline), "err", err)
		return
	}
	b.logger.Info("reported the replicas of failed log directories to the active controller", "partitions", len(offline))
}
