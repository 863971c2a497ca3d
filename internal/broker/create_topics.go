package broker

// CreateTopics (key 19), versions 0–7.
//
// Validation and placement happen in the controller; creation commits through the
// metadata quorum before the response, so a created topic is immediately usable.
// Errors: INVALID_TOPIC_EXCEPTION (bad name), TOPIC_ALREADY_EXISTS,
// INVALID_REPLICATION_FACTOR (above the number of brokers), INVALID_PARTITIONS,
// INVALID_CONFIG (unknown topic config or bad value; the message names it),
// INVALID_REQUEST for a name repeated in one request. From v5 the response carries the
// topic's partition count, replication factor and effective configs.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-streaming/samsa/internal/config"
	"github.com/samsa-streaming/samsa/internal/controller"
	"github.com/samsa-streaming/samsa/internal/protocol"
)

func init() { register(kmsg.CreateTopics, 0, 7, (*Broker).handleCreateTopics) }

func (b *Broker) handleCreateTopics(req *protocol.Request) <-chan protocol.Response {
	r := req.Body.(*kmsg.CreateTopicsRequest)
	resp := kmsg.NewPtrCreateTopicsResponse()
	resp.SetVersion(req.Version)

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
				ct.Assignments[a.Partition] = a.Replicas
			}
		}
		for _, c := range t.Configs {
			if c.Value != nil {
				ct.Configs[c.Name] = *c.Value
			}
		}
		create = append(create, ct)
	}

	ctx, cancel := b.requestContext(r.TimeoutMillis)
	defer cancel()
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
			st.ErrorMessage = kmsg.StringPtr("topic " + t.Topic + " appears more than once in the request")
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
		if req.Version >= 5 {
			overrides := make(map[string]string)
			for _, c := range t.Configs {
				if c.Value != nil {
					overrides[c.Name] = *c.Value
				}
			}
			for _, e := range config.DescribeTopic(b.cfg, overrides) {
				c := kmsg.NewCreateTopicsResponseTopicConfig()
				c.Name = e.Name
				v := e.Value
				c.Value = &v
				c.ReadOnly = e.ReadOnly
				c.Source = e.Source
				c.IsSensitive = e.Sensitive
				st.Configs = append(st.Configs, c)
			}
		}
		resp.Topics = append(resp.Topics, st)
	}
	return reply(resp)
}
