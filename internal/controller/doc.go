// Package controller is the metadata quorum member of a node: it keeps the cluster
// metadata log on Raft (go.etcd.io/raft/v3), applies committed entries to the
// metadata image (internal/metadata) and turns admin commands (create/delete topics,
// create partitions, alter configs, broker registration, producer-id blocks) into
// metadata records, KRaft-style.
//
// A single node is a quorum of one and runs exactly the same code as a cluster: its
// RawNode campaigns at start-up, wins at once, and commits each entry as soon as it
// is fsynced.
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
//     validates, two concurrent CreateTopics of one name cannot both succeed.
//   - the notifier calls Subscribe callbacks in apply order and then completes the
//     proposals of that apply, so a caller returns only after subscribers saw the
//     change. Callbacks must not call back into state-changing methods.
//
// Locks: Controller.lifecycle (Start/Close/tick scheduling; may call into the
// Clock while held) and notifier.mu (subscribers and queue; a leaf). Nothing else
// is shared: the loop state is confined to its goroutine, the image and the leader
// id are atomics.
//
// Only the active controller (the Raft leader) accepts writes; others answer
// ErrNotController. Forwarding is not implemented.
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
// Voters come from Options.Voters; Raft ids are node id + 1 (Raft reserves 0). A
// Transport sends messages; received ones enter through Controller.Step. No network
// Transport exists yet (see the TODO in transport.go), and membership changes,
// broker heartbeats/fencing, ISR changes and leader elections of partitions are not
// driven by the controller yet.
package controller
