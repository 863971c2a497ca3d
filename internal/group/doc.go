// Package group is Samsa's group coordinator: the classic group membership protocol
// (JoinGroup, SyncGroup, Heartbeat, LeaveGroup), the KIP-848 consumer group protocol
// (ConsumerGroupHeartbeat, ConsumerGroupDescribe: server-side assignment, epochs,
// incremental reconciliation — consumer_*.go), KIP-932 share group membership
// (ShareGroupHeartbeat, ShareGroupDescribe — share_group.go; the share-partition
// state itself is internal/share's), committed offsets (OffsetCommit, OffsetFetch,
// OffsetDelete, and TxnOffsetCommit, whose offsets stay pending until their
// transaction's marker: txn_offsets.go) and group administration (DescribeGroups,
// ListGroups, DeleteGroups), stored in the internal topic __consumer_offsets. A group
// id names one group of one type; an empty group may change between the classic and
// the consumer protocol, keeping its offsets, whatever group.consumer.migration.policy
// says (as in Kafka), and one with members as the policy allows, its classic members
// carrying on inside a consumer group (consumer_classic.go).
//
// # What it owns
//
// For every __consumer_offsets partition this node coordinates (LoadPartition), the
// groups hashed to it (PartitionFor: Java's String.hashCode of the group id, Kafka's
// Utils.abs, modulo offsets.topic.num.partitions) with their members, generation,
// selected protocol, leader, assignments and committed offsets.
//
// # Model
//
// The group state machine follows Kafka's classic GroupCoordinator:
//
//	Empty -> PreparingRebalance -> CompletingRebalance -> Stable
//	  ^            ^   |                  |                 |
//	  |            |   +------------------+-----------------+ (join, leave, expiry)
//	  +------------+ (last member gone)          Dead (deleted / expired)
//
// Handlers run under one mutex and never block: they check the request against the
// in-memory state and either answer at once or park the answer (a buffered channel that
// receives exactly one response) on the member or on a pending log write. A request
// that names many groups (DescribeGroups, ConsumerGroupDescribe, ShareGroupDescribe,
// OffsetFetch v8+, DeleteGroups) takes the mutex for one group at a time, so that its
// size does not hold off every other request of the coordinator. Nothing inside the
// state machine reads the wall clock, starts a goroutine or does I/O: the time is
// passed in (the driver reads the injected clock.Clock once per operation), timers are
// deadlines stored on groups and members, and writes are records handed to the driver.
// The driver arms one clock timer per group, for that group's earliest deadline, and
// one for the periodic offset expiry check.
//
// Durable state changes only when a record is replayed. A handler that must persist
// something (an offset commit, the assignment of a completed rebalance, a static member
// replacing its predecessor, a deletion, expired offsets) returns the records to append
// to its __consumer_offsets partition together with a replay step. The driver appends
// the records through Log (in order, one writer goroutine per partition) and, once they
// are committed, runs the replay step under the mutex; only then is the offset visible
// to OffsetFetch, the group Stable with its assignment handed out, the returning static
// member answered, or the group gone. A failed append maps to COORDINATOR_NOT_AVAILABLE
// (NOT_COORDINATOR when the error wraps ErrNotCoordinator) and changes nothing durable:
// a static member's replacement is reverted, a deletion undone, a rebalance restarted.
// A deletion (DeleteGroups, OffsetDelete, offset expiry) is decided while offset
// commits accepted before it may still wait in the writer: they reach the log first, so
// the deletion counts them (group.queued). DeleteGroups and OffsetDelete tombstone them
// too, expiry leaves them be, and a group with one queued is not dead. From the
// decision until its tombstones are replayed the group is Dead: a join, heartbeat or
// commit into it gets COORDINATOR_NOT_AVAILABLE, so nothing lands after the tombstones.
// Loading a partition is the same replay, from the log start. Transient membership (who
// waits in a JoinGroup, heartbeat deadlines, the generation of a rebalance in progress)
// is memory only, as in Kafka: after a restart, groups come back with their last
// persisted generation, members and assignment (Stable, or Empty), and members that do
// not heartbeat within their session timeout are removed.
//
// The records use Kafka's own __consumer_offsets schema (kmsg.OffsetCommitKey/Value,
// kmsg.GroupMetadataKey/Value; key versions 1 and 2, value versions 3), so Kafka tools
// can read the topic. Consumer and share groups write Samsa's own records (key
// versions 0x5301–0x5302 and 0x5311–0x5312, JSON values; see consumer_records.go and
// share_group.go), which Kafka's tools skip.
//
// # Consumer and share groups
//
// They follow Kafka's coordinator runtime more closely than the classic state machine:
// a heartbeat computes the records of its change, which are replayed into memory at
// once (through the same code that loads a partition, so memory is what the records
// say) and answered once they are committed after every earlier write of the
// partition. A write that fails cannot be taken back: the partition is reloaded from
// its log. Answers read from memory wait for the writes queued before them and fail
// with them (describes; a classic member's Heartbeat, a write without records in
// Kafka; and refusals — an OffsetCommit or ConsumerGroupHeartbeat refused because a
// queued removal took the member away, which Kafka answers at once), so that no client
// acts on a change the log never got. Member session and
// revocation deadlines are memory only, given a full timeout again after a load.
//
// # Concurrency
//
// Coordinator is safe for concurrent use. All group state is guarded by Coordinator.mu;
// Log.Append and Log.Load are never called with it held. Lock order: Coordinator.mu,
// then a partition writer's mu (enqueueing); the clock's own lock is only taken inside
// AfterFunc/Stop. Timer callbacks and the per-partition writers take Coordinator.mu to
// run due deadlines and replay steps. Channels returned by the delayed APIs are
// buffered and receive exactly one response, also when the partition is unloaded or the
// coordinator closed (NOT_COORDINATOR).
package group
