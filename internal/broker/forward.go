package broker

import (
	"context"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-streaming/samsa/internal/metadata"
	"github.com/samsa-streaming/samsa/internal/protocol"
)

// forward answers a client's admin request the way Kafka's brokers do: the request
// goes, as it is (same API, same version), to the active controller — in process
// when this node is it — and the controller's answer goes back to the client. When
// visible is given, the answer waits (within the request's time) until this node's
// metadata image shows the change, so that a client that created a topic here can
// use it here at once. If no controller answers in time every item fails with
// REQUEST_TIMED_OUT, which clients retry.
func (b *Broker) forward(req *protocol.Request, timeoutMs int32, visible func(*metadata.Image, kmsg.Response) bool) <-chan protocol.Response {
	fwd, refused := b.authorizeForward(req)
	switch {
	case fwd == nil && refused == nil: // the cluster operation is refused (forward_auth.go)
		return reply(failedResponse(req.Body, kerr.ClusterAuthorizationFailed.Code, "not authorized on the cluster"))
	case fwd == nil: // every item is refused
		resp := req.Body.ResponseKind()
		resp.SetVersion(req.Version)
		refused(resp)
		return reply(resp)
	}
	req = fwd
	refuse, throttle := b.mutationQuota(req)
	if refuse != nil {
		return protocol.Ready(protocol.Response{Body: refuse, Throttle: throttle})
	}
	out := make(chan protocol.Response, 1)
	b.answerLater(req, out, func() {
		ctx, cancel := b.requestContext(timeoutMs)
		defer cancel()
		resp, err := b.channel.Send(ctx, req.Body)
		if err != nil {
			b.logger.Warn("no active controller answered a forwarded request", "api", kmsg.NameForKey(req.Key), "error", err)
			failed := failedResponse(req.Body, kerr.RequestTimedOut.Code, wireMessage(err))
			if refused != nil {
				refused(failed)
			}
			out <- protocol.Response{Body: failed}
			return
		}
		if visible != nil {
			b.awaitImage(ctx, func(img *metadata.Image) bool { return visible(img, resp) })
		}
		if refused != nil {
			refused(resp)
		}
		if throttle > 0 {
			setThrottle(resp, throttle)
		}
		out <- protocol.Response{Body: resp, Throttle: throttle}
	})
	return out
}

// awaitImage waits until cond holds for this node's image or ctx ends. Once the node
// serves as a broker, that is the image it has acted on (reconcile has run for it),
// not merely the latest one published: a topic whose partitions this node has not
// opened yet would answer UNKNOWN_TOPIC_OR_PARTITION to the client that created it
// here.
func (b *Broker) awaitImage(ctx context.Context, cond func(*metadata.Image) bool) {
	for {
		changed := b.imageWatch.next()
		if cond(b.actedImage()) {
			return
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return
		}
	}
}

// imageWatch lets goroutines wait for the next metadata change: next returns a
// channel that the next change closes.
type imageWatch struct {
	mu sync.Mutex
	ch chan struct{}
}

func (w *imageWatch) next() <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ch == nil {
		w.ch = make(chan struct{})
	}
	return w.ch
}

func (w *imageWatch) changed() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ch != nil {
		close(w.ch)
		w.ch = nil
	}
}

// failedResponse answers req with code (and message, where the API has one) for
// every item, as the forwarded APIs' responses allow.
func failedResponse(req kmsg.Request, code int16, message string) kmsg.Response {
	msg := &message
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	switch r := req.(type) {
	case *kmsg.CreateTopicsRequest:
		out := resp.(*kmsg.CreateTopicsResponse)
		for _, t := range r.Topics {
			st := kmsg.NewCreateTopicsResponseTopic()
			st.Topic, st.ErrorCode, st.ErrorMessage = t.Topic, code, msg
			st.NumPartitions, st.ReplicationFactor = -1, -1
			out.Topics = append(out.Topics, st)
		}
	case *kmsg.DeleteTopicsRequest:
		out := resp.(*kmsg.DeleteTopicsResponse)
		for _, n := range r.TopicNames {
			st := kmsg.NewDeleteTopicsResponseTopic()
			st.Topic, st.ErrorCode, st.ErrorMessage = kmsg.StringPtr(n), code, msg
			out.Topics = append(out.Topics, st)
		}
		if r.Version >= 6 {
			out.Topics = out.Topics[:0]
			for _, t := range r.Topics {
				st := kmsg.NewDeleteTopicsResponseTopic()
				st.Topic, st.TopicID, st.ErrorCode, st.ErrorMessage = t.Topic, t.TopicID, code, msg
				out.Topics = append(out.Topics, st)
			}
		}
	case *kmsg.CreatePartitionsRequest:
		out := resp.(*kmsg.CreatePartitionsResponse)
		for _, t := range r.Topics {
			st := kmsg.NewCreatePartitionsResponseTopic()
			st.Topic, st.ErrorCode, st.ErrorMessage = t.Topic, code, msg
			out.Topics = append(out.Topics, st)
		}
	case *kmsg.AlterConfigsRequest:
		out := resp.(*kmsg.AlterConfigsResponse)
		for _, res := range r.Resources {
			sr := kmsg.NewAlterConfigsResponseResource()
			sr.ResourceType, sr.ResourceName, sr.ErrorCode, sr.ErrorMessage = res.ResourceType, res.ResourceName, code, msg
			out.Resources = append(out.Resources, sr)
		}
	case *kmsg.IncrementalAlterConfigsRequest:
		out := resp.(*kmsg.IncrementalAlterConfigsResponse)
		for _, res := range r.Resources {
			sr := kmsg.NewIncrementalAlterConfigsResponseResource()
			sr.ResourceType, sr.ResourceName, sr.ErrorCode, sr.ErrorMessage = res.ResourceType, res.ResourceName, code, msg
			out.Resources = append(out.Resources, sr)
		}
	case *kmsg.CreateACLsRequest:
		out := resp.(*kmsg.CreateACLsResponse)
		for range r.Creations {
			res := kmsg.NewCreateACLsResponseResult()
			res.ErrorCode, res.ErrorMessage = code, msg
			out.Results = append(out.Results, res)
		}
	case *kmsg.DeleteACLsRequest:
		out := resp.(*kmsg.DeleteACLsResponse)
		for range r.Filters {
			res := kmsg.NewDeleteACLsResponseResult()
			res.ErrorCode, res.ErrorMessage = code, msg
			out.Results = append(out.Results, res)
		}
	case *kmsg.AlterClientQuotasRequest:
		out := resp.(*kmsg.AlterClientQuotasResponse)
		for _, e := range r.Entries {
			res := kmsg.NewAlterClientQuotasResponseEntry()
			for _, ent := range e.Entity {
				re := kmsg.NewAlterClientQuotasResponseEntryEntity()
				re.Type, re.Name = ent.Type, ent.Name
				res.Entity = append(res.Entity, re)
			}
			res.ErrorCode, res.ErrorMessage = code, msg
			out.Entries = append(out.Entries, res)
		}
	case *kmsg.AlterUserSCRAMCredentialsRequest:
		out := resp.(*kmsg.AlterUserSCRAMCredentialsResponse)
		seen := map[string]bool{}
		add := func(user string) {
			if !seen[user] {
				seen[user] = true
				res := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
				res.User, res.ErrorCode, res.ErrorMessage = user, code, msg
				out.Results = append(out.Results, res)
			}
		}
		for _, d := range r.Deletions {
			add(d.Name)
		}
		for _, u := range r.Upsertions {
			add(u.Name)
		}
	case *kmsg.ElectLeadersRequest:
		out := resp.(*kmsg.ElectLeadersResponse)
		out.ErrorCode = code
		for _, t := range r.Topics {
			rt := kmsg.NewElectLeadersResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewElectLeadersResponseTopicPartition()
				rp.Partition, rp.ErrorCode, rp.ErrorMessage = p, code, msg
				rt.Partitions = append(rt.Partitions, rp)
			}
			out.Topics = append(out.Topics, rt)
		}
	case *kmsg.AlterPartitionAssignmentsRequest:
		out := resp.(*kmsg.AlterPartitionAssignmentsResponse)
		out.ErrorCode, out.ErrorMessage = code, msg
	case *kmsg.ListPartitionReassignmentsRequest:
		out := resp.(*kmsg.ListPartitionReassignmentsResponse)
		out.ErrorCode, out.ErrorMessage = code, msg
	case *kmsg.DescribeQuorumRequest:
		out := resp.(*kmsg.DescribeQuorumResponse)
		out.ErrorCode, out.ErrorMessage = code, msg
	case *kmsg.UnregisterBrokerRequest:
		out := resp.(*kmsg.UnregisterBrokerResponse)
		out.ErrorCode, out.ErrorMessage = code, msg
	}
	return resp
}
