package broker

// CreatePartitions (key 37), versions 0–3; on the client listeners and the
// controller listener (brokers forward it to the active controller and answer once
// their image has the new partitions).
//
// Raises a topic's partition count (never lowers it: INVALID_PARTITIONS), optionally
// with a manual replica assignment for the new partitions. Keys hashed to partitions
// move when the count changes, as in Kafka.

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-streaming/samsa/internal/metadata"
	"github.com/samsa-streaming/samsa/internal/protocol"
)

func init() {
	register(kmsg.CreatePartitions, 0, 3, (*Broker).handleCreatePartitions)
	registerController(kmsg.CreatePartitions, 0, 3, (*Broker).serveCreatePartitions)
}

func (b *Broker) handleCreatePartitions(req *protocol.Request) <-chan protocol.Response {
	r := req.Body.(*kmsg.CreatePartitionsRequest)
	return b.forward(req, r.TimeoutMillis, func(img *metadata.Image, resp kmsg.Response) bool {
		if r.ValidateOnly {
			return true
		}
		want := map[string]int32{}
		for _, t := range r.Topics {
			want[t.Topic] = t.Count
		}
		for _, t := range resp.(*kmsg.CreatePartitionsResponse).Topics {
			if tp, ok := img.Topic(t.Topic); t.ErrorCode == 0 && ok && int32(len(tp.Partitions)) < want[t.Topic] {
				return false
			}
		}
		return true
	})
}

// serveCreatePartitions is the controller side.
func (b *Broker) serveCreatePartitions(ctx context.Context, req kmsg.Request) kmsg.Response {
	r := req.(*kmsg.CreatePartitionsRequest)
	resp := kmsg.NewPtrCreatePartitionsResponse()
	resp.SetVersion(r.Version)

	seen := make(map[string]int)
	for _, t := range r.Topics {
		seen[t.Topic]++
	}
	for _, t := range r.Topics {
		st := kmsg.NewCreatePartitionsResponseTopic()
		st.Topic = t.Topic
		if seen[t.Topic] > 1 {
			st.ErrorCode = kerr.InvalidRequest.Code
			st.ErrorMessage = kmsg.StringPtr(fmt.Sprintf("topic %q appears more than once in the request", t.Topic))
			resp.Topics = append(resp.Topics, st)
			continue
		}
		var assignment [][]int32
		for _, a := range t.Assignment {
			assignment = append(assignment, a.Replicas)
		}
		if err := b.controller.CreatePartitions(ctx, t.Topic, t.Count, assignment, r.ValidateOnly); err != nil {
			st.ErrorCode = errorCode(err)
			st.ErrorMessage = errorMessage(err)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}
