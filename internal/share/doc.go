// Package share holds the share-partition state of KIP-932 share groups: for each
// (share group, topic partition) the window of offsets the group is working on — the
// share-partition start offset (SPSO) below which every record is done, the end offset
// (SPEO) from which no record was handed out yet — and, for every offset in between,
// its state (Available, Acquired by a member until its acquisition lock expires,
// Acknowledged, Archived) and delivery count.
//
// # Model
//
// Partition is a pure state machine (no clock, goroutine or I/O): Acquire hands a
// member the available offsets of the batches a fetch read, Acknowledge applies
// ACCEPT (done), RELEASE (available again), REJECT (archived, never delivered again)
// and RENEW (the lock restarts); a record released or whose lock expired at the
// delivery count limit (share.delivery.count.limit) is archived. ReleaseMember gives
// back what a member that left still holds with its delivery count lowered by one, as
// Kafka does (it was most likely never processed). The start moves past
// done records; no batch is started once the window holds
// group.share.partition.max.record.locks records, and the batch that reaches the
// limit is acquired to its end, as Kafka does (the window exceeds it by less than a
// batch; a strict, record-limit acquisition stops at it).
//
// A record of the window holds no pointer (its member is an index into the
// partition's member ids), so that a window of thousands is neither scanned by the
// garbage collector nor written with write barriers.
//
// Manager drives the partitions: it loads a partition from its last Snapshot (or at
// the offset share.auto.offset.reset gives), writes a snapshot through Store after
// every change the snapshot holds and before the change is answered, and expires
// locks on one timer per partition. A snapshot persists acquired records as
// available with their delivery count, so a restart delivers again exactly the
// records that were not acknowledged.
//
// The Store is the share coordinator (the broker's __share_group_state, possibly on
// another broker). Each read and write carries the topic partition's leader epoch,
// and each write the partition's state epoch, so that the coordinator can refuse a
// deposed leader (ErrFencedLeaderEpoch) and a state that was initialized again
// (ErrFencedStateEpoch); Manager then drops the partition and reads it again at its
// next use, as it does when the leader epoch it was loaded under changes. A write
// that fails otherwise — or whose outcome is unknown — is undone in memory: Partition
// records what a change touches between Begin and Commit, and Rollback restores it,
// so the records an acknowledgement named stay acquired by their member and the
// acknowledgement, refused, can be sent again. A later write of the partition's full
// window (laid over what is stored, Snapshot.Merge) supersedes a write that was
// durable after all.
//
// # Concurrency
//
// Partition is not safe for concurrent use. Manager is: one mutex guards its map,
// and each partition has its own mutex, held during fn and the snapshot write. Lock
// order: a partition's mu, then Manager.mu (an entry leaves the map under its own
// lock, so that no change is under way on a partition that leaves memory); never the
// reverse: the map lock is held only to look entries up, add or remove them.
//
// # Memory
//
// A partition stays in memory while it is used. Its owner drops it (DropGroup,
// Forget) when nothing needs it any more — the broker drops a group's partitions
// once no member of the group has a share session on it, as Kafka does — and the
// next use reads the durable state again. Entries that hold no partition and no
// waiter are not kept.
package share
