// Package group is Samsa's consumer group coordinator: the classic group membership
// protocol (JoinGroup, SyncGroup, Heartbeat, LeaveGroup), committed offsets
// (OffsetCommit, OffsetFetch, OffsetDelete, and TxnOffsetCommit, whose offsets stay
// pending until their transaction's marker: txn_offsets.go) and group administration
// (DescribeGroups, ListGroups, DeleteGroups), stored in the internal topic
// __consumer_offsets.
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
// receives exactly one response) on the member or on a pending log write. Nothing inside
// the state machine reads the wall clock, starts a goroutine or does I/O: the time is
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
// Loading a partition is the same replay, from the log start. Transient membership (who
// waits in a JoinGroup, heartbeat deadlines, the generation of a rebalance in progress)
// is memory only, as in Kafka: after a restart, groups come back with their last
// persisted generation, members and assignment (Stable, or Empty), and members that do
// not heartbeat within their session timeout are removed.
//
// The records use Kafka's own __consumer_offsets schema (kmsg.OffsetCommitKey/Value,
// kmsg.GroupMetadataKey/Value; key versions 1 and 2, value versions 3), so Kafka tools
// can read the topic.
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
