// Package txn is Samsa's transaction coordinator (Kafka's TransactionCoordinator and
// TransactionStateManager): the state of every transactional id, stored in the
// internal topic __transaction_state, and the requests that change it —
// InitProducerId with a transactional id, AddPartitionsToTxn (including the batched
// and verify-only forms partition leaders send, KIP-890), AddOffsetsToTxn, EndTxn
// (transactions v2 included: EndTxn v5 bumps the epoch) — and those that read it,
// DescribeTransactions and ListTransactions.
//
// # What it owns
//
// For every __transaction_state partition this node coordinates (LoadPartition, at the
// partition's leader epoch, the coordinator epoch markers carry), the transactional ids
// hashed to it (PartitionFor: Java's String.hashCode, Kafka's Utils.abs, modulo
// transaction.state.log.num.partitions) with their producer id, epoch, timeout, state
// and partitions.
//
// # Model
//
//	Empty ──add──▶ Ongoing ──end──▶ PrepareCommit/PrepareAbort ──markers──▶ CompleteCommit/CompleteAbort
//	  ▲              │ timeout or a new producer: epoch fenced, PrepareAbort   │
//	  └──────────────┴──────── InitProducerId (epoch bump) ◀───────────────────┘   (add starts the next)
//
// Durable state changes only when a record is replayed: a handler checks the request
// against the state, and either answers at once or hands the next state (a record,
// Kafka's TransactionLogValue) to the partition's writer goroutine, which appends it
// through Log and, once it is committed, replays it under the coordinator's mutex and
// answers. Until then the transactional id answers CONCURRENT_TRANSACTIONS (except a
// partition add, which may follow another add in flight). A failed append changes
// nothing. Loading a partition is the same replay from the log start; every
// transaction found prepared then has its markers written again, so a transaction
// prepared by a coordinator that failed is completed by the next one.
//
// Nothing inside reads the wall clock, does I/O or blocks on the network: time comes
// from the injected clock.Clock, appends and loads go through Log, markers through
// Markers (the broker sends WriteTxnMarkers to each partition's leader), new producer
// ids through Options.ProducerIDs; the calls that may wait (an append, a marker write,
// an id allocation) run on goroutines the coordinator owns, never with its mutex held.
// Two timers run the periodic work: aborting transactions older than their timeout
// (transaction.abort.timed.out.transaction.cleanup.interval.ms; the epoch is bumped
// first, fencing the producer) and forgetting transactional ids unused for
// transactional.id.expiration.ms (a tombstone).
//
// The records use Kafka's own __transaction_state schema (kmsg.TxnMetadataKey v0 and
// kmsg.TxnMetadataValue v1 with the transactions v2 tagged fields), so Kafka tools can
// read the topic.
//
// # Concurrency
//
// Coordinator is safe for concurrent use. All state is guarded by Coordinator.mu;
// Log.Append, Log.Load, Markers.Write and ProducerIDs are never called with it held.
// Lock order: Coordinator.mu, then a partition writer's mu (enqueueing); the clock's
// own lock only inside AfterFunc/Stop. Channels returned by the handlers are buffered
// and receive exactly one answer, also when the partition is unloaded or the
// coordinator closed (NOT_COORDINATOR).
package txn
