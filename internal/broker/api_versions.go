package broker

// ApiVersions (key 18), versions 0–4.
//
// Lists exactly the APIs registered in this package with their served version ranges.
// A request at an unsupported ApiVersions version never reaches this handler: the
// server answers it in v0 with UNSUPPORTED_VERSION and the same list, as Kafka does.
// From v3 the features are listed too (KIP-584): transaction.version is supported and
// finalized at 2 (transactions v2, KIP-890 part 2), which is how clients such as
// franz-go choose EndTxn v5 and Produce v12; the finalized features' epoch is the
// metadata offset.

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-streaming/samsa/internal/protocol"
)

func init() { register(kmsg.ApiVersions, 0, 4, (*Broker).handleAPIVersions) }

func (b *Broker) handleAPIVersions(req *protocol.Request) <-chan protocol.Response {
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.SetVersion(req.Version)
	resp.ApiKeys = APIKeys()
	if req.Version >= 3 {
		for _, f := range features {
			sf := kmsg.NewApiVersionsResponseSupportedFeature()
			sf.Name, sf.MinVersion, sf.MaxVersion = f.name, f.min, f.max
			resp.SupportedFeatures = append(resp.SupportedFeatures, sf)
			ff := kmsg.NewApiVersionsResponseFinalizedFeature()
			ff.Name, ff.MinVersionLevel, ff.MaxVersionLevel = f.name, f.finalized, f.finalized
			resp.FinalizedFeatures = append(resp.FinalizedFeatures, ff)
		}
		resp.FinalizedFeaturesEpoch = max(b.image().Offset(), 0)
	}
	return reply(resp)
}

// features are the feature flags this broker supports and the level it runs at.
var features = []struct {
	name      string
	min, max  int16
	finalized int16
}{
	{name: "transaction.version", min: 0, max: 2, finalized: 2},
}
