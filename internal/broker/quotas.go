package broker

// Client quotas (auth.Quotas), enforced as Kafka enforces them (KIP-219): a Produce
// request's size counts towards producer_byte_rate, a Fetch response's towards
// consumer_byte_rate (followers are exempt); a client over its quota is answered at
// once with throttle_time_ms set, and its connection is not read again until that
// time has passed. CreateTopics, CreatePartitions and DeleteTopics count partitions
// towards controller_mutation_rate: once over it, such requests are refused with
// THROTTLING_QUOTA_EXCEEDED (KIP-599) until the rate is back under the quota.
// request_percentage counts the time a request's handler takes (not the time its
// response takes to write, nor streamed Produce requests, which producer_byte_rate
// covers).

import (
	"encoding/binary"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-streaming/samsa/internal/auth"
	"github.com/samsa-streaming/samsa/internal/metadata"
	"github.com/samsa-streaming/samsa/internal/protocol"
)

// throttleFetch records a Fetch response's size and sets its throttle time (the
// first field of the pre-encoded body).
func (b *Broker) throttleFetch(req *protocol.Request, resp *protocol.Response) {
	var size int64
	for _, ch := range resp.Chunks {
		size += ch.Size()
	}
	d := b.quotas.Record(auth.ConsumerByteRate, req.Principal.Name, req.ClientID, float64(size), b.clock.Now())
	if d <= 0 || len(resp.Chunks) == 0 || len(resp.Chunks[0].Bytes) < 4 {
		return
	}
	binary.BigEndian.PutUint32(resp.Chunks[0].Bytes, uint32(d/time.Millisecond))
	resp.Throttle = d
}

// mutations is the number of partitions a forwarded request creates or deletes,
// and whether its version can be refused with THROTTLING_QUOTA_EXCEEDED; ok is
// false for requests controller_mutation_rate does not count.
func (b *Broker) mutations(body kmsg.Request) (n int, strict, ok bool) {
	img := b.image()
	switch r := body.(type) {
	case *kmsg.CreateTopicsRequest:
		for _, t := range r.Topics {
			p := int(t.NumPartitions)
			if p < 0 {
				p = len(t.ReplicaAssignment)
			}
			if p <= 0 {
				p = int(b.cfg.NumPartitions)
			}
			n += p
		}
		return n, r.Version >= 6, true
	case *kmsg.DeleteTopicsRequest:
		for _, name := range r.TopicNames {
			if t, ok := img.Topic(name); ok {
				n += len(t.Partitions)
			}
		}
		for _, rt := range r.Topics {
			if rt.Topic != nil {
				if t, ok := img.Topic(*rt.Topic); ok {
					n += len(t.Partitions)
				}
			} else if t, ok := img.TopicByID(metadata.TopicID(rt.TopicID)); ok {
				n += len(t.Partitions)
			}
		}
		return n, r.Version >= 5, true
	case *kmsg.CreatePartitionsRequest:
		for _, rt := range r.Topics {
			if t, ok := img.Topic(rt.Topic); ok && int(rt.Count) > len(t.Partitions) {
				n += int(rt.Count) - len(t.Partitions)
			}
		}
		return n, r.Version >= 3, true
	}
	return 0, false, false
}

// mutationQuota applies controller_mutation_rate to a forwarded request: a client
// already over its quota is refused (refuse is its answer) when the version allows
// it; otherwise the partitions are counted and the throttle time returned.
func (b *Broker) mutationQuota(req *protocol.Request) (refuse kmsg.Response, throttle time.Duration) {
	if !b.quotas.Enabled() {
		return nil, 0
	}
	n, strict, ok := b.mutations(req.Body)
	if !ok {
		return nil, 0
	}
	now := b.clock.Now()
	user, client := req.Principal.Name, req.ClientID
	if d := b.quotas.Throttle(auth.ControllerMutationRate, user, client, now); d > 0 && strict {
		resp := failedResponse(req.Body, kerr.ThrottlingQuotaExceeded.Code, "controller_mutation_rate quota exceeded: retry after the throttle time")
		setThrottle(resp, d)
		return resp, d
	}
	return nil, b.quotas.Record(auth.ControllerMutationRate, user, client, float64(n), now)
}

func setThrottle(resp kmsg.Response, d time.Duration) {
	if t, ok := resp.(interface{ SetThrottle(int32) }); ok {
		t.SetThrottle(int32(d / time.Millisecond))
	}
}

// handleMetered serves a request and counts the time its handler took towards the
// client's request_percentage quota (percent of one thread, as Kafka's request
// quota); a client over it gets the throttle time on the response.
func (b *Broker) handleMetered(fn handlerFunc, req *protocol.Request) <-chan protocol.Response {
	start := time.Now()
	ch := b.serve(fn, req)
	d := b.quotas.Record(auth.RequestPercentage, req.Principal.Name, req.ClientID, time.Since(start).Seconds()*100, b.clock.Now())
	if d <= 0 {
		return ch
	}
	out := make(chan protocol.Response, 1)
	b.answerLater(req, out, func() {
		resp, ok := <-ch
		if !ok {
			close(out)
			return
		}
		if t, ok := resp.Body.(interface{ Throttle() (int32, bool) }); ok && resp.Body != nil {
			if current, _ := t.Throttle(); time.Duration(current)*time.Millisecond < d {
				setThrottle(resp.Body, d)
			}
		}
		resp.Throttle = max(resp.Throttle, d)
		out <- resp
	})
	return out
}
