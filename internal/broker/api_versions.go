package broker

// ApiVersions (key 18), versions 0–5.
//
// Lists exactly the APIs registered in this package with their served version ranges.
// A request at an unsupported ApiVersions version never reaches this handler: the
// server answers it in v0 with UNSUPPORTED_VERSION and the same list, as Kafka does.
// From v3 the client's software name and version must match Kafka's pattern, else
// INVALID_REQUEST. From v5 (KIP-1242) a client may name the cluster and node it
// believes it reached: naming one without the other is INVALID_REQUEST, naming another
// cluster or node is REBOOTSTRAP_REQUIRED (its metadata sent it to the wrong place).

import (
	"regexp"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-streaming/samsa/internal/protocol"
)

func init() { register(kmsg.ApiVersions, 0, 5, (*Broker).handleAPIVersions) }

// softwareNamePattern is what Kafka accepts as a client software name and version.
var softwareNamePattern = regexp.MustCompile(`^[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?$`)

func (b *Broker) handleAPIVersions(req *protocol.Request) <-chan protocol.Response {
	r := req.Body.(*kmsg.ApiVersionsRequest)
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.SetVersion(req.Version)
	resp.ApiKeys = APIKeys()
	if req.Version >= 3 && (!softwareNamePattern.MatchString(r.ClientSoftwareName) ||
		!softwareNamePattern.MatchString(r.ClientSoftwareVersion)) {
		resp.ErrorCode = kerr.InvalidRequest.Code
	}
	if req.Version >= 5 && resp.ErrorCode == 0 {
		named, numbered := r.ClusterID != nil, r.NodeID != -1
		switch {
		case named != numbered:
			resp.ErrorCode = kerr.InvalidRequest.Code
		case named && (*r.ClusterID != b.clusterID || r.NodeID != b.nodeID):
			resp.ErrorCode = kerr.RebootstrapRequired.Code
		}
	}
	if resp.ErrorCode != 0 {
		resp.ApiKeys = nil // as Kafka: a refused request learns nothing
	}
	return reply(resp)
}
