package broker

// CreateTopics (key 19), versions 0–7; on the client listeners and the controller
// listener.
//
// A broker forwards the request to the active controller (in process when it is that
// controller) and answers once its own metadata image has the new topics, so a
// created topic is immediately usable through the broker that created it. The
// controller validates and places the replicas (distinct brokers, leaders spread
// round-robin, racks alternated when broker.rack is set; explicit assignments
// honoured) and commits the topics through the metadata quorum before it answers.
// Errors: INVALID_TOPIC_EXCEPTION (bad name), TOPIC_ALREADY_EXISTS,
// INVALID_REPLICATION_FACTOR (above the number of brokers), INVALID_PARTITIONS,
// INVALID_REPLICA_ASSIGNMENT (a partition assigned twice, a broker twice in one, ...),
// INVALID_CONFIG (unknown topic config, bad value or none; the message names it),
// INVALID_REQUEST for a name repeated in one request. From v5 the response carries the
// topic's partition count, replication factor and effective configs.

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-streaming/samsa/internal/config"
	"github.com/samsa-streaming/samsa/internal/controller"
	"github.com/samsa-streaming/samsa/internal/metadata"
	"github.com/samsa-streaming/samsa/internal/protocol"
)

func init() {
	register(kmsg.CreateTopics, 0, 7, (*Broker).handleCreateTopics)
	registerController(kmsg.CreateTopics, 0, 7, (*Broker).serveCreateTopics)
}

func (b *Broker) handleCreateTopics(req *protocol.Request) <-chan protocol.Response {
	r := req.Body.(*kmsg.CreateTopicsRequest)
	return b.forward(req, r.TimeoutMillis, func(img *metadata.Image, resp kmsg.Response) bool {
		if r.ValidateOnly {
			return true
		}
		for _, t := range resp.(*kmsg.CreateTopicsResponse).Topics {
			if t.ErrorCode != 0 {
				continue
			}
			// Before v7 the answer has no topic id (a remote controller's answer,
			// decoded at the client's version, has it zero): the name tells.
			tp, ok := img.Topic(t.Topic)
			if id := metadata.TopicID(t.TopicID); !ok || !id.IsZero() && tp.ID != id {
				return false
			}
		}
		return true
	})
}

// serveCreateTopics is the controller side.
func (b *Broker) serveCreateTopics(ctx context.Context, req kmsg.Request) kmsg.Response {
	r := req.(*kmsg.CreateTopicsRequest)
	resp := kmsg.NewPtrCreateTopicsResponse()
	resp.SetVersion(r.Version)

	seen := make(map[string]int)
	for _, t := range r.Topics {
		seen[t.Topic]++
	}
	var create []controller.CreateTopic
	for _, t := range r.Topics {
		if seen[t.Topic] > 1 {
			continue
		}
		ct := controller.CreateTopic{
			Name:              t.Topic,
			NumPartitions:     t.NumPartitions,
			ReplicationFactor: t.ReplicationFactor,
			Configs:           make(map[string]string),
		}
		if len(t.ReplicaAssignment) > 0 {
			ct.Assignments = make(map[int32][]int32)
			for _, a := range t.ReplicaAssignment {
				if _, twice := ct.Assignments[a.Partition]; twice {
					ct.AssignedTwice = append(ct.AssignedTwice, a.Partition)
				}
				ct.Assignments[a.Partition] = a.Replicas
			}
		}
		for _, c := range t.Configs {
			if c.Value != nil {
				ct.Configs[c.Name] = *c.Value
			} else {
				ct.NullConfigs = append(ct.NullConfigs, c.Name)
			}
		}
		create = append(create, ct)
	}

	results := b.controller.CreateTopics(ctx, create, r.ValidateOnly)
	byName := make(map[string]controller.TopicResult, len(results))
	for _, res := range results {
		byName[res.Name] = res
	}

	for _, t := range r.Topics {
		st := kmsg.NewCreateTopicsResponseTopic()
		st.Topic = t.Topic
		st.NumPartitions, st.ReplicationFactor = -1, -1
		if seen[t.Topic] > 1 {
			st.ErrorCode = kerr.InvalidRequest.Code
			st.ErrorMessage = kmsg.StringPtr(fmt.Sprintf("topic %q appears more than once in the request", t.Topic))
			resp.Topics = append(resp.Topics, st)
			continue
		}
		res := byName[t.Topic]
		if res.Err != nil {
			st.ErrorCode = errorCode(res.Err)
			st.ErrorMessage = errorMessage(res.Err)
			resp.Topics = append(resp.Topics, st)
			continue
		}
		st.TopicID = [16]byte(res.ID)
		st.NumPartitions = res.NumPartitions
		st.ReplicationFactor = res.ReplicationFactor
		if r.Version >= 5 {
			overrides := make(map[string]string)
			for _, c := range t.Configs {
				if c.Value != nil {
					overrides[c.Name] = *c.Value
				}
			}
			for _, e := range config.DescribeTopic(b.effectiveConfig(b.image()), overrides) {
				c := kmsg.NewCreateTopicsResponseTopicConfig()
				c.Name = e.Name
				v := e.Value
				c.Value = &v
				c.ReadOnly = e.ReadOnly
				c.Source = e.CreateSource
				c.IsSensitive = e.Sensitive
				st.Configs = append(st.Configs, c)
			}
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}

// createTopics creates topics on the broker's own account (auto-creation,
// __consumer_offsets) through the active controller, and returns once this node's
// image has the ones that were created.
func (b *Broker) createTopics(ctx context.Context, topics []kmsg.CreateTopicsRequestTopic) ([]kmsg.CreateTopicsResponseTopic, error) {
	req := kmsg.NewPtrCreateTopicsRequest()
	req.SetVersion(5)
	req.Topics = topics
	req.TimeoutMillis = 30_000
	r, err := b.channel.Send(ctx, req)
	if err != nil {
		return nil, err
	}
	resp := r.(*kmsg.CreateTopicsResponse)
	b.awaitImage(ctx, func(img *metadata.Image) bool {
		for _, t := range resp.Topics {
			if _, ok := img.Topic(t.Topic); t.ErrorCode == 0 && !ok {
				return false
			}
		}
		return true
	})
	return resp.Topics, nil
}

// newTopic is a CreateTopics entry; configs may be nil.
func newTopic(name string, partitions int32, rf int16, configs map[string]string) kmsg.CreateTopicsRequestTopic {
	t := kmsg.NewCreateTopicsRequestTopic()
	t.Topic, t.NumPartitions, t.ReplicationFactor = name, partitions, rf
	for _, k := range slices.Sorted(maps.Keys(configs)) {
		c := kmsg.NewCreateTopicsRequestTopicConfig()
		c.Name, c.Value = k, kmsg.StringPtr(configs[k])
		t.Configs = append(t.Configs, c)
	}
	return t
}
