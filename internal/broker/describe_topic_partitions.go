package broker

// DescribeTopicPartitions (key 75), version 0 (KIP-966): topics and their partitions
// as Metadata describes them, paged. Topics are answered in name order (all topics
// when the request names none), at most ResponsePartitionLimit partitions per
// response (at most 2000, Kafka's max.request.partition.size.limit); when partitions
// are left, NextCursor names the first of them and a request with that cursor
// continues there. A requested topic that does not exist answers
// UNKNOWN_TOPIC_OR_PARTITION; one the principal may not describe answers
// TOPIC_AUTHORIZATION_FAILED, and an all-topics answer leaves those out. Eligible
// leader replicas (KIP-966's ELR) are not kept: those fields are null.

import (
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-streaming/samsa/internal/auth"
	"github.com/samsa-streaming/samsa/internal/protocol"
)

// describeTopicPartitionsLimit is Kafka's max.request.partition.size.limit default.
const describeTopicPartitionsLimit = 2000

func init() {
	register(kmsg.DescribeTopicPartitions, 0, 0, (*Broker).handleDescribeTopicPartitions)
}

func (b *Broker) handleDescribeTopicPartitions(req *protocol.Request) <-chan protocol.Response {
	r := req.Body.(*kmsg.DescribeTopicPartitionsRequest)
	resp := r.ResponseKind().(*kmsg.DescribeTopicPartitionsResponse)
	img := b.image()
	var names []string
	if len(r.Topics) == 0 {
		for _, t := range img.Topics() {
			// Topics the principal may not describe are not listed, nor paged over
			// (api_auth_groups.go refuses the named ones).
			if b.allowed(req, auth.OpDescribe, auth.ResourceTopic, t.Name) {
				names = append(names, t.Name)
			}
		}
	} else {
		for _, t := range r.Topics {
			names = append(names, t.Topic)
		}
		slices.Sort(names)
		names = slices.Compact(names)
	}
	limit := int(r.ResponsePartitionLimit)
	if limit <= 0 || limit > describeTopicPartitionsLimit {
		limit = describeTopicPartitionsLimit
	}
	startPartition := int32(0)
	if c := r.Cursor; c != nil {
		i, _ := slices.BinarySearchFunc(names, c.Topic, strings.Compare)
		names = names[i:]
		if len(names) > 0 && names[0] == c.Topic {
			startPartition = max(c.Partition, 0)
		}
	}
	for ti, name := range names {
		rt := kmsg.NewDescribeTopicPartitionsResponseTopic()
		n := name
		rt.Topic = &n
		rt.AuthorizedOperations = authorizedOperationsOmitted
		t, ok := img.Topic(name)
		if !ok {
			rt.ErrorCode = kerr.UnknownTopicOrPartition.Code
			resp.Topics = append(resp.Topics, rt)
			continue
		}
		mt := b.topicMetadata(img, t)
		rt.TopicID, rt.IsInternal = mt.TopicID, mt.IsInternal
		first := int32(0)
		if ti == 0 {
			first = startPartition
		}
		for _, mp := range mt.Partitions {
			if mp.Partition < first {
				continue
			}
			if limit == 0 {
				resp.NextCursor = &kmsg.DescribeTopicPartitionsResponseNextCursor{Topic: name, Partition: mp.Partition}
				break
			}
			rp := kmsg.NewDescribeTopicPartitionsResponseTopicPartition()
			rp.ErrorCode, rp.Partition, rp.LeaderID, rp.LeaderEpoch = mp.ErrorCode, mp.Partition, mp.Leader, mp.LeaderEpoch
			rp.Replicas, rp.ISR, rp.OfflineReplicas = mp.Replicas, mp.ISR, mp.OfflineReplicas
			rt.Partitions = append(rt.Partitions, rp)
			limit--
		}
		resp.Topics = append(resp.Topics, rt)
		if resp.NextCursor != nil {
			break
		}
		if limit == 0 && ti+1 < len(names) {
			resp.NextCursor = &kmsg.DescribeTopicPartitionsResponseNextCursor{Topic: names[ti+1], Partition: 0}
			break
		}
	}
	return reply(resp)
}
