package broker

import "github.com/twmb/franz-go/pkg/kmsg"

// Versions between nodes of different builds (a rolling upgrade). A node sends
// other nodes some requests at versions a newer build raised; these tables name
// them with the lowest version it may send instead to a node that serves no newer
// one (peer.Options.Downgrade: each connection asks its peer's versions first), so
// that a cluster keeps working while its nodes are upgraded one at a time. A
// version may only be listed when the lower one means the same to the older node.
var (
	// brokerDowngrades: requests to other brokers' inter-broker listener.
	// WriteTxnMarkers v2 (KIP-1228) adds each marker's transaction version; a node
	// that serves only v1 checks a marker's epoch by the v0 rule, which accepts the
	// epoch a transactions v2 end bumps to.
	brokerDowngrades = map[int16]int16{int16(kmsg.WriteTxnMarkers): 1}
	// controllerDowngrades: this node's own requests to the controllers.
	// BrokerRegistration v4 (KAFKA-17011) differs from v3 only in the features it
	// may list, which Samsa's controller does not read.
	controllerDowngrades = map[int16]int16{int16(kmsg.BrokerRegistration): 3}
)
