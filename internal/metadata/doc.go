// Package metadata owns Samsa's cluster-metadata records and the immutable metadata
// image built by replaying them, KRaft-style.
//
// The cluster metadata is a log of Records (broker registrations, their changes —
// fenced, unfenced, in controlled shutdown — and their removal, topics, partitions, partition changes —
// leader, ISR, replicas, reassignment, leader recovery state —, configs, topic
// removals, producer-id blocks, the cluster id). The
// controller (internal/controller) replicates that log with Raft; every node applies
// the committed records, in log order, to an Image with Apply. Nothing else changes an
// image: a restart or a leadership move is just a replay.
//
// # Purity and concurrency
//
// The package does no I/O, starts no goroutines and reads no clock. An *Image is
// immutable once Apply has returned it, so it is safe for concurrent use by any number
// of goroutines without locks. Apply never modifies its input image: it copies the
// indexes it changes and only the topics a record touches (copy-on-write), sharing
// everything else with the previous image. The slices and maps reachable from an
// Image (Topic.Partitions, Partition.Replicas, Topic.Configs, Broker.Endpoints, …) are
// shared between images and MUST NOT be modified by callers.
//
// # Encoding
//
// Records are encoded as JSON with a type tag and a format version:
//
//	{"v":1,"type":"topic","record":{"name":"orders","id":"5f1c…"}}
//
// EncodeBatch writes a JSON array of such envelopes. Decoding rejects unknown versions
// and unknown type tags with ErrCorruptRecord. JSON was chosen over a binary layout
// for debuggability; the metadata log is small and not on the data path. A record
// type's JSON field names are part of the on-disk format: rename them only with a
// version bump.
//
// # Snapshots
//
// Image.Records returns records that, applied to EmptyImage, rebuild an equal image.
// The controller writes them as its snapshot, so a snapshot is itself a record list,
// as in KRaft.
package metadata
