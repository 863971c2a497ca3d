package broker

// ApiVersions (key 18), versions 0–4.
//
// Lists exactly the APIs registered in this package with their served version ranges.
// A request at an unsupported ApiVersions version never reaches this handler: the
// server answers it in v0 with UNSUPPORTED_VERSION and the same list, as Kafka does.

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-streaming/samsa/internal/protocol"
)

func init() { register(kmsg.ApiVersions, 0, 4, (*Broker).handleAPIVersions) }

func (b *Broker) handleAPIVersions(req *protocol.Request) <-chan protocol.Response {
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.SetVersion(req.Version)
	resp.ApiKeys = APIKeys()
	return reply(resp)
}
