// Package broker is the Kafka API surface of a Samsa node. Each Kafka API (or family)
// has its own file, which registers its handler and served version range in an init
// function; ApiVersions is built from that registry, so what is advertised is exactly
// what is implemented.
//
// A handler casts the decoded kmsg request, validates it, calls into the layers below
// (controller for metadata changes, replica/storage for partition data, group for the
// group coordinator, txn for the transaction coordinator) and fills the kmsg response.
// Transactions (docs/transactions.md) also need requests between brokers: the
// coordinator's WriteTxnMarkers to partition leaders (txn_markers.go) and the leaders'
// AddPartitionsToTxn verifications (txn_verify.go), over one peer connection per broker
// (brokerPeers). Handlers that wait (Fetch with
// min.bytes, acks=all Produce, JoinGroup) return a channel that is completed later; the
// server writes responses in request order regardless.
//
// A node also serves the controller listener (controller_apis.go): ControllerHandler
// answers the APIs of Kafka's controller — broker registration and heartbeats,
// AlterPartition, producer-id blocks, the admin requests brokers forward — and
// Samsa's internal Raft and metadata-fetch requests. Each API's file registers its
// client side (register) and its controller side (registerController). On the client
// listeners, admin requests that need the controller are forwarded unchanged to the
// active controller through the node's controller.Channel (forward.go), in process
// when this node is it. lifecycle.go is the broker's side of registration,
// heartbeats and controlled shutdown.
//
// Concurrency: Handle is called sequentially per connection and concurrently across
// connections; Broker's own state is either immutable after Start, atomic, or guarded
// by the sub-systems it calls.
package broker
