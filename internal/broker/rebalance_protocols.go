package broker

// group.coordinator.rebalance.protocols: a group protocol left out of it keeps its
// APIs listed by ApiVersions but answers them UNSUPPORTED_VERSION, before any
// authorization, as Kafka's KafkaApis does. Without consumer, a KIP-848 client's
// first ConsumerGroupHeartbeat learns the protocol is off: franz-go falls back to the
// classic protocol, the Java client (group.protocol=consumer) fails. share is not
// gated here (Kafka 4.1 and later gate share groups on the share.version feature, not
// on this list); streams has no APIs served.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-streaming/samsa/internal/protocol"
)

// protocolDisabled answers a request of a group protocol that
// group.coordinator.rebalance.protocols leaves out, and reports whether it did.
func (b *Broker) protocolDisabled(req *protocol.Request) (<-chan protocol.Response, bool) {
	if k := kmsg.Key(req.Key); k != kmsg.ConsumerGroupHeartbeat && k != kmsg.ConsumerGroupDescribe || b.cfg.ConsumerProtocolEnabled() {
		return nil, false // every other request goes on at the cost of one comparison
	}
	code := kerr.UnsupportedVersion.Code
	var resp kmsg.Response
	switch r := req.Body.(type) {
	case *kmsg.ConsumerGroupHeartbeatRequest:
		hb := kmsg.NewPtrConsumerGroupHeartbeatResponse()
		hb.ErrorCode = code
		resp = hb
	case *kmsg.ConsumerGroupDescribeRequest:
		d := kmsg.NewPtrConsumerGroupDescribeResponse()
		for _, g := range r.Groups {
			dg := kmsg.NewConsumerGroupDescribeResponseGroup()
			dg.Group, dg.ErrorCode = g, code
			d.Groups = append(d.Groups, dg)
		}
		resp = d
	default:
		return nil, false
	}
	resp.SetVersion(req.Version)
	return reply(resp), true
}
