// Package replica owns partition state above the log: the replica's role from the
// metadata (Apply), the leader's view of its followers, the high watermark, ISR change
// proposals, the follower's side of replication (appending the leader's batches,
// truncating a divergent tail), the fetchers that follow leaders, and the wake-ups that
// delayed operations (acks=all produce, fetches waiting for records) wait on. Kafka's
// Partition, ReplicaManager and ReplicaFetcherThread are the model; docs/replication.md
// describes the rules.
//
// The package encodes no request: a FetcherManager fetches through a LeaderClient (the
// broker implements it with the wire protocol), and the ISR changes it proposes are
// sent by the broker (AlterPartition) and applied only when the metadata brings them
// back through Apply.
//
// # Files
//
//	partition.go  state, Apply, appends as leader, the high watermark, waiters
//	leader.go     followers' positions (FollowerFetch, ServeFollower), ProposeISR,
//	              the followers a consumer may read from (ReadReplicas, KIP-392)
//	follower.go   AppendAsFollower, truncation, the follower's high watermark
//	fetcher.go    FetcherManager: one fetcher goroutine per leader
//
// # Concurrency
//
// Partition, Manager and FetcherManager are safe for concurrent use. A partition's
// state is under its own mutex (Partition.mu), never held across log I/O; appends to
// one partition are serialised by the log. There is no lock shared between partitions
// on the produce or fetch path. The last stable offset is recomputed (under
// Partition.lsoMu, never with Partition.mu held) each time the high watermark moves.
// Lock order: Manager.mu → Partition.mu → storage.Log's internal locks; Partition.lsoMu
// → storage.Log's; FetcherManager.mu → fetcher.mu, neither held while calling a
// Partition method that does I/O (a fetcher appends outside its lock).
package replica
