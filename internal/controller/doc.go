// Package controller is the cluster's control plane, KRaft-style: the metadata log on
// Raft (go.etcd.io/raft/v3) among the controllers, the metadata image every node
// applies it to (internal/metadata), and the active controller's decisions — broker
// registration, heartbeats, fencing and unregistration, replica placement, partition leader
// elections, ISR changes (AlterPartition), reassignments — as metadata records.
//
// A single node is a quorum of one and runs exactly the same code as a cluster: its
// RawNode campaigns at start-up, wins at once, and commits each entry as soon as it
// is fsynced.
//
// # Parts
//
//   - Controller (controller.go, raftloop.go, disklog.go): a voter. The active
//     controller is the Raft leader once it has applied an entry of its own term
//     (Active). Its state-changing methods — CreateTopics, DeleteTopics,
//     CreatePartitions, AlterConfigs, RegisterBroker, BrokerHeartbeat,
//     UnregisterBroker, AlterPartition, ElectLeaders, AlterReassignments,
//     AllocateProducerIDs — answer ErrNotController elsewhere.
//   - The planners (placement.go, partition_change.go, replication.go, heartbeat.go):
//     pure functions from an image and an event to records, Kafka's semantics:
//     placeReplicas (rack-aware), partitionChange (Kafka's PartitionChangeBuilder:
//     elections from the ISR, unclean only when allowed, reassignment completion, the
//     leader epoch bump when replicas leave), removeBrokerUpdates (fencing, controlled
//     shutdown, unregistration: KIP-841), alterPartitionUpdates (AlterPartition's
//     validation, KIP-903), nextBrokerState (the broker lifecycle of KIP-631),
//     registerUpdates, unregisterUpdates. They are table-tested; the Controller only
//     runs them on its command goroutine and proposes what they return.
//   - Sessions (heartbeat.go): the active controller's memory of each broker's last
//     heartbeat, never in the log. A new active controller gives every unfenced broker
//     a full session; brokers whose session expires are fenced by the periodic work
//     (maintain), which also records the cluster id, runs unclean elections where
//     topics allow them and rebalances leaders (auto.leader.rebalance.enable).
//   - NetTransport (transport.go): Raft messages between voters over their controller
//     listeners (internal/peer connections, Samsa's internal SamsaRaft request).
//   - Observer (observer.go): how a broker that is not a voter follows the metadata
//     log, by fetching it (SamsaMetadataFetch) from the voters. Controller and
//     Observer both implement Metadata, which is all a broker reads. Fetching rather
//     than Raft learners: brokers need no inbound quorum listener, the voters need no
//     membership change per broker, and it is Kafka's own design (observers fetch).
//   - Channel (channel.go): a broker's requests to the active controller — BrokerRegistration,
//     BrokerHeartbeat, AlterPartition, AllocateProducerIds and the admin requests
//     clients send to any broker — in process when this node leads, over the network
//     otherwise, retried on NOT_CONTROLLER. Its AlterPartition is what the data plane
//     calls (docs/replication.md).
//
// The Kafka API handlers of the controller listener live in internal/broker; this
// package speaks Kafka's protocol only as a client (Channel, Observer, NetTransport),
// and its errors map to Kafka's codes through one table (ErrorCode, ErrorForCode).
//
// # Goroutines and concurrency
//
// All exported methods are safe for concurrent use. Inside, three goroutines:
//
//   - the raft loop owns the RawNode, raft.MemoryStorage and the disk log. It steps
//     ticks, received messages and proposals into Raft and handles each Ready in the
//     order its contract requires: persist (snapshot, HardState, entries, fsync),
//     send messages, apply committed entries, Advance. It publishes each new image
//     with an atomic store, so Image() never blocks.
//   - the command goroutine runs state-changing calls one at a time: validate
//     against the current image → build records → propose → wait until applied →
//     answer. Because a command waits for its own entries before the next one
//     validates, two concurrent CreateTopics of one name cannot both succeed. It
//     waits so even when the caller has given up (its context ended): the entry may
//     still commit, and the next command must see it; the wait ends when the entry
//     applies or fails with the leadership (CheckQuorum). It owns the broker sessions and runs the periodic work (a timer on the injected
//     clock only signals it).
//   - the notifier calls Subscribe callbacks in apply order and then completes the
//     proposals of that apply, so a caller returns only after subscribers saw the
//     change. Callbacks must not call back into state-changing methods.
//
// Functions that need the RawNode (DescribeQuorum's status, the transport's
// ReportUnreachable and ReportSnapshot) are queued to the raft loop (loopFnCh).
// NetTransport has a sender goroutine per peer; Observer one fetching goroutine and a
// notifier; Channel and peer connections a reader goroutine per connection.
//
// Locks: Controller.lifecycle (Start/Close/timer scheduling; may call into the
// Clock while held), Controller.activation (a leaf), notifier.mu (subscribers,
// queue and offset waiters; a leaf), observerTable.mu (a leaf), and per peer queue
// NetTransport's peerQueue.mu (a leaf). Nothing else is shared: the loop state is
// confined to its goroutine, the image, the leader id, the active term and the
// raft state are atomics.
//
// Only the active controller accepts writes; others answer ErrNotController, and
// brokers forward to the active one through their Channel.
//
// # Metadata offsets
//
// An image's Offset is the Raft index of the last entry applied. Entries a new
// leader appends with no records (and conf changes) advance the offset too.
//
// # On-disk format (Dir = <log.dirs[0]>/__cluster_metadata-0)
//
//	00000000000000000001.log       entry-log segments, named by a sequence number
//	00000000000000000002.log       (not an index: Raft may overwrite an uncommitted
//	…                              suffix, so only write order is monotonic)
//	00000000000000012345.snapshot  the newest snapshot, named by its Raft index
//
// A segment is a sequence of frames:
//
//	+-----------+-----------+------+-------------------------------------------+
//	| len  u32  | crc32c u32| type | payload                                   |
//	+-----------+-----------+------+-------------------------------------------+
//	len counts type+payload; the CRC (Castagnoli) covers type+payload; big endian.
//	type 1 entry:      term u64, index u64, entry type u8, data
//	type 2 hard state: term u64, vote u64, commit u64
//
// Each Ready is one write (HardState first, then entries), fsynced before Advance
// when Raft says it must be. Replaying the segments in order into MemoryStorage
// reproduces the log, overwrites included; the last HardState wins. A frame that
// does not read back whole at the end of the newest segment is a crash mid-write:
// the file is truncated there with a warning. Anywhere else it is ErrCorruptLog.
//
// Normal entry data is a proposal: version u8 (1), proposing node id i32, proposal
// sequence u64, then metadata.EncodeBatch of its records (JSON, see
// internal/metadata).
//
// A snapshot file is "SAMSASNP", u32 CRC32C of the rest, then version u8 (1), term
// u64, index u64, first live segment u64, u32 length + protobuf ConfState, and the
// image as metadata.EncodeBatch(image.Records()). It is written to a .tmp file,
// fsynced and renamed. Every SnapshotEvery applied entries the controller writes
// one, starts a new segment (which begins with the current HardState), compacts
// MemoryStorage and deletes segments holding only entries the snapshot covers. A
// snapshot received from the leader replaces the whole log: its "first live
// segment" makes start-up ignore older segments.
//
// Start-up loads the newest snapshot into the image, replays later entries into
// MemoryStorage and restarts the RawNode with Applied = snapshot index; committed
// entries are then re-applied through the normal Ready path.
//
// # Multi-node
//
// Voters come from Options.Voters (controller.quorum.voters); Raft ids are node id + 1
// (Raft reserves 0). Raft runs with pre-vote and check-quorum: a leader cut off from
// the majority steps down after an election timeout, and a node coming back cannot
// disrupt a healthy leader. Ticks are 100 ms; the election timeout is
// controller.quorum.election.timeout.ms (1 s), randomised by Raft up to twice that.
// An active controller that closes hands the leadership to the most up-to-date other
// voter first.
//
// Membership is static: changing the voters of a running cluster is not supported.
//
// # Cluster id
//
// The first active controller records a ClusterRecord: the id it has stored
// (Options.ClusterID, from meta.properties) or a fresh one. Start returns only once
// the image has it, and fails with ErrInconsistentClusterID, naming both ids, when a
// stored id differs. RaftRequest and MetadataFetch carry the sender's id once known;
// a voter refuses messages of another cluster (INCONSISTENT_CLUSTER_ID), and a node
// refused by a majority of the voters stops with that error, so a node with another
// cluster's data cannot disturb the quorum.
package controller
