// Package replica owns partition state above the log: leadership and leader epoch, the
// high watermark, the in-sync replica set, and the wake-ups that delayed operations
// (acks=all produce, fetch waiting for min.bytes) wait on.
//
// Every partition has one replica today (replication is a later issue), so the ISR is
// the leader alone and the high watermark follows the log end offset on every append.
// The types are shaped so that followers slot in: the high watermark is the minimum log
// end offset over the ISR, and waiters are woken whenever it moves.
//
// Concurrency: Partition and Manager are safe for concurrent use. Appends to one
// partition are serialised by the partition's own mutex (and the log's); there is no
// lock shared between partitions on the produce or fetch path. Lock order:
// Manager.mu → Partition.mu → storage.Log's internal locks.
package replica
