// Package storage is the partition log: segment files of record batches, their sparse
// offset and time indexes, crash recovery, retention, DeleteRecords, follower
// truncation, the leader epoch cache and the idempotent-producer table; the Manager
// that owns a broker's log directories; and the Cleaner that compacts logs with
// cleanup.policy=compact. It knows nothing about the network or Kafka APIs; the broker
// and replica layers call it. Apache Kafka's log (LogSegment, OffsetIndex, TimeIndex,
// LogLoader, ProducerStateManager, LeaderEpochFileCache, LogCleaner) is the model.
//
// # On disk
//
//	<log.dir>/
//	  .lock                          flock(2)ed by the running broker (ErrDirLocked)
//	  .samsa_cleanshutdown           written by Manager.Close when every log closed
//	                                 cleanly; removed once meta.properties passed its
//	                                 checks (or before the first log changes)
//	  meta.properties                Kafka's format: version=1, node.id, cluster.id
//	  cleaner-offset-checkpoint      Kafka's format: "0\n<count>\n<topic> <partition> <offset>\n…",
//	                                 where the next cleaning of each compacted log starts
//	  <topic>-<partition>/
//	    00000000000000000000.log       batches, byte for byte as appended
//	    00000000000000000000.index     sparse offset index
//	    00000000000000000000.timeindex sparse time index
//	    00000000000000001234.log       next segment: base offset 1234 …
//	    00000000000000001234.snapshot  producer state as of offset 1234
//	    00000000000000000000.txnindex  aborted transactions whose marker the segment holds
//	    leader-epoch-checkpoint        Kafka's text format
//	    partition.metadata             Kafka's text format (version: 0, topic_id: …)
//	    log-state                      log start offset and recovery point
//	    00000000000000000000.log.cleaned  a cleaned segment being written (+ .index.cleaned,
//	                                      .timeindex.cleaned)
//	    00000000000000000000.log.swap     a cleaned segment committed, not yet swapped in
//	                                      (+ .index.swap, .timeindex.swap)
//	  <topic>-<partition>.<hex>-delete/  a deleted partition awaiting removal
//
// File names are the 20-digit base offset of the segment (or the snapshot's offset).
// All integers in binary files are big-endian.
//
//	.log        record batch v2 after record batch v2 …; nothing else
//	.index      { relativeOffset uint32, position uint32 }*  8 bytes an entry
//	            relativeOffset = batch base offset − segment base offset, of the
//	            batch starting at position; one entry each time more than
//	            index.interval.bytes were appended since the previous one; strictly
//	            increasing in both fields.
//	.timeindex  { timestamp int64, relativeOffset uint32 }*  12 bytes an entry
//	            "the largest timestamp of the segment up to here is timestamp, first
//	            reached in the batch at relativeOffset"; written beside an index entry
//	            when the largest timestamp grew, and once more when the segment stops
//	            being active so that its last entry is the segment's largest timestamp.
//	.snapshot   version uint16 (1), crc32c uint32 of the rest, count uint32,
//	            count × { producerID int64, epoch int16, coordinatorEpoch int32,
//	            txnStartOffset int64, lastTimestamp int64, n uint8,
//	            n × { firstSeq int32, lastSeq int32, baseOffset int64,
//	            lastOffset int64, timestamp int64 } }
//	.txnindex   { version int16 (0), producerID int64, firstOffset int64,
//	            lastOffset int64, lastStableOffset int64 }*  34 bytes an entry (Kafka's
//	            TransactionIndex): the transaction of producerID that started at
//	            firstOffset was aborted by the marker at lastOffset, the first unstable
//	            offset being lastStableOffset after it; ascending lastOffset.
//	log-state   "version 2\nlog_start_offset N\nrecovery_point N\nrecovery_segment N\n
//	            recovery_position N\n": where the recovery point lies, the base offset of
//	            the segment holding it and its byte position there (-1: not known).
//	            Version 1 (the first two fields only) is read.
//	leader-epoch-checkpoint  "0\n<count>\n<epoch> <startOffset>\n…"
//
// Index files are caches, checked when they are loaded (Kafka's sanity check, and
// more) and rebuilt from the segment, with a WARN naming the file and the reason, when
// missing, of a size that is not a multiple of the entry size, not increasing,
// pointing past the end, when an entry does not point at the start of the batch whose
// offset it names, when the offset index misses an entry the indexing rule would have
// written (cut short), or when the last time entry is not the batch's and the
// segment's largest timestamp (every segment that stopped being active ends its time
// index with that entry). Loading walks the batch headers from the index entry before
// the earlier of the last offset entry and the last time entry's batch: the last
// index.interval.bytes of the segment when timestamps grow. A lookup that lands on a
// position whose batch does not have the offset the index names rebuilds that
// segment's index and tries again.
// The active segment's index lives in memory only and its files are written whole when
// the segment stops being active (roll, clean close, truncation): a partition holds one
// file descriptor (its active .log), not three, and an append is one write.
// Metadata files are replaced atomically (write a .tmp, fsync, rename, fsync the
// directory). A deleted segment's files are renamed with a .deleted suffix and removed
// after file.delete.delay.ms; the open descriptor stays valid until then, so FileRanges
// already handed to readers keep working. Leftover .deleted and .tmp files are removed
// at open.
//
// # Compaction
//
// The Cleaner (cleaner*.go; Kafka's LogCleaner, Cleaner, SkimpyOffsetMap and
// LogCleanerManager) compacts logs whose Config.Compact is set. Each pass picks the log
// with the highest dirty ratio — bytes of the dirty section over bytes of clean plus
// dirty — above min.cleanable.dirty.ratio, or one whose dirty section holds a batch
// older than max.compaction.lag.ms, or one holding tombstones whose delete horizon has
// passed. The dirty section runs from the checkpointed first dirty offset to the first
// uncleanable offset: the active segment, the first segment with a record newer than
// min.compaction.lag.ms, the first offset of an open transaction and the optional
// CleanerOptions.MaxCleanableOffset bound (high watermark), aligned down to a segment
// start. A map key → latest offset is built over the dirty section (records of aborted
// transactions, as the transaction indexes name them, do not count), then every segment below the end
// of the map is rewritten, in groups that fit segment.bytes, keeping a record when no
// later offset of its key is in the map:
//
//   - offsets are preserved: batches keep their base offset and last offset delta,
//     records their offset deltas, so compacted logs have gaps;
//   - a batch that loses records is rebuilt with its codec, producer id, epoch, base
//     sequence, transactional flag and leader epoch; an untouched batch is copied as is;
//   - a batch that loses every record is dropped, unless it is the last data batch of a
//     producer in the producer table: it is then kept as a 61-byte header without
//     records (Kafka's empty batch), so the producer's sequence state survives;
//   - transactions, as Kafka's cleaner (cleaner_txn.go): the records of aborted
//     transactions go (they never enter the map either, so they never shadow committed
//     data); a marker stays while the pass met a batch of its transaction, then gets a
//     delete horizon (now + delete.retention.ms, as a tombstone's batch) and goes at the
//     first cleaning after it; an abort marker that stays keeps its .txnindex entry in
//     the cleaned segment (written .txnindex.cleaned, renamed with the others);
//   - records without a key are dropped, as Kafka's cleaner does;
//   - tombstones (null values) use KIP-534's delete horizon: the first cleaning that
//     keeps a tombstone stamps its batch with attribute bit 6 and baseTimestamp = now +
//     delete.retention.ms (record timestamp deltas re-based on it); a cleaning after
//     the horizon drops the tombstones. The earliest horizon of a log is remembered in
//     memory (found again from the batch headers after a restart) so the log is
//     cleaned again then, dirty or not.
//
// A cleaned group is written to <base>.log.cleaned (+ .index.cleaned,
// .timeindex.cleaned) and fsynced. Then, under Log.mu, the cleaner checks that the group
// is still in the segment list as it was (retention, truncation and close abort the
// swap), renames the files to .swap, index files first (the commit point), fsyncs the
// directory, renames the old segments' files .deleted (closed and removed after
// file.delete.delay.ms, so FileRanges handed to readers stay valid), strips .swap,
// fsyncs the directory and publishes the new list. At open, before segments are listed,
// the loader deletes *.cleaned files, completes every <base>.log.swap — the segments
// whose base offset lies in [base, the swap segment's last offset] (base itself always)
// are deleted and .swap stripped — and deletes .swap index files left without their
// segment. A kill at any step thus leaves every offset range either as it was or as
// cleaned; an old segment of a group left beside its cleaned segment (its base above
// the cleaned segment's last offset) holds only records the cleaning dropped, so no
// key's latest value is ever lost. The cleaned segment keeps the newest modification
// time of those it replaces (retention falls back on it).
//
// The first dirty offset of each log after a cleaning is written to the directory's
// cleaner-offset-checkpoint, so dirty ratios survive restarts. Reads and writes of all
// threads are throttled together to log.cleaner.io.max.bytes.per.second.
//
// # Transactions
//
// The producer table knows each producer's open transaction (the first offset of its
// first transactional batch here); a marker (a control batch: commit or abort, with the
// coordinator epoch) ends it, and an aborted one is added to the .txnindex of the
// segment holding its marker (in memory, AbortedTransactions; the file is written when
// the segment stops being active and before Close's producer snapshot). A finished
// transaction stays unstable until the high watermark passes its marker:
// FirstUnstableOffset(highWatermark) is the first offset of the oldest transaction
// open or not yet past, which bounds the last stable offset the replica layer serves.
// Appends check the coordinator epoch of markers (ErrTransactionCoordinatorFenced),
// refuse a non-transactional batch of a producer whose transaction is open
// (ErrInvalidTxnState), and with AppendOptions.TxnGuard refuse a batch whose
// verification with the coordinator (TxnVerification, KIP-890) a marker overtook.
// Coordinator writes (AppendOptions.Coordinator: markers, transactional offset
// commits) carry no sequence numbers. Loading the producer state (open, truncation)
// drops the aborted transactions whose marker is at or after the snapshot it starts
// from and finds them again by replaying the log, control records included, so that
// the indexes always agree with the log.
//
// # Recovery
//
// The recovery point is the offset below which data is known to be fsynced; it moves on
// every flush (flush.messages, flush.ms, segment roll, Close) and is written to
// log-state by Flush, Close and the Manager's periodic CheckpointState (a stale value on
// disk only makes recovery scan more). A roll does not fsync on the append path: as
// Kafka does, it starts a background Flush, and the recovery point moves when the
// rolled segment is on disk. A flush fsyncs the segments in order, then the partition
// directory when segment files were created or removed since the last one (a
// segment's data is not durable while its name is not, Kafka's LocalLog.flush).
//
// After a clean shutdown (Options.CleanShutdown, from the Manager's marker) the files
// are trusted only as far as they agree with log-state, which Close writes last: the
// active segment's index files are loaded and checked (see above), which walks the
// headers after them to the log end, and the log must end exactly at the recovery
// point, at the segment and byte log-state names (version 1: at the recovery point).
// Old segments' indexes load lazily on first use. Any disagreement — garbage or a torn
// batch after the last one, a segment cut or grown, an index that does not match, a
// log-state older than the files — is logged with its reason and the log is recovered
// from the recovery point instead. Without the marker, or with a missing or unreadable
// log-state (recovery from the first segment), every segment from the one holding the
// recovery point on is read batch by batch, as Kafka's LogLoader does: length, magic,
// CRC-32C and increasing offsets are checked and the indexes rebuilt; at the first bad
// or torn batch the segment is cut there and every later segment is deleted (a WARN
// names file, position, offset, bytes dropped and reason). In a log without compaction a
// segment starting above the end of the one before it also ends the log: a flush
// syncs segments in order, so what follows such a hole was never flushed (a roll's new
// segment reached the disk, its predecessor's unflushed tail did not). An INFO line
// per recovered partition reports the bytes scanned and dropped. The base offset and
// partition leader epoch fields are not covered by the CRC, as in Kafka.
//
// Damage found outside recovery, in a segment below the recovery point (a header walk
// that cannot parse a batch), cuts that segment in memory at the damage with a WARN:
// the batches before it are served, the file is left as it is (the cleaner or
// retention replace it), reads never fail on it forever.
//
// The leader epoch cache is rebuilt from the partition leader epoch field of the
// batch headers (a walk of the whole log, with a WARN) when leader-epoch-checkpoint is
// missing for a non-empty log or unreadable, when its latest epoch is not the last
// batch's, or when, after a crash, its epoch at the first batch recovery reads is not
// that batch's. Producer state is loaded from the newest valid snapshot not beyond the
// log end (a damaged one is deleted with a WARN and the next older tried), then the
// headers of the batches after it are replayed. Snapshots are written at each roll and
// on Close; the newest three are kept. A damaged partition.metadata is logged and
// written again once the topic id is known (Log.AdoptTopicID); the partition opens.
// DeleteRecords and retention write log-state before they truncate the epoch cache, so
// a crash between the two never leaves the cache starting above the log start. A
// follower's truncation (TruncateTo) writes log-state with the recovery point lowered
// to the truncation point, then the epoch cache without the epochs it removes, and
// only then removes the later segments (the last first) and cuts the one holding the
// point, whose index files it removes (an active segment's are written when it stops
// being active): a crash part way leaves checkpoints that are conservative, and
// recovery reads from the lowered recovery point. Nothing after the checkpoints needs
// space, so on a full disk a truncation fails with ErrNoSpace before it removes
// anything and is retried. Starting a log over (TruncateFullyAndStartAt) creates the
// new segment before it removes the old ones (the last first), so that the log always
// has a segment and a crash leaves a prefix of the old log or the new one.
//
// Every file operation goes through the FS interface (OSFS in production); tests
// substitute a file system that models durability (file data as of the last fsync,
// directory entries as of the last directory fsync) to crash at every step of an
// operation, and that injects I/O errors. A failed append leaves the log as it was (the
// partial write is cut); one that failed for lack of space returns ErrNoSpace and the
// directory stays online: appends succeed again once space is freed. A failed fsync is
// returned to the caller and every later append fails with it (the kernel may have
// dropped the dirty pages, so the log's bytes are no longer known to reach the disk;
// the broker takes the directory offline).
//
// # Log directories
//
// NewManager creates a missing log directory durably (its parent fsynced) and locks
// it; it changes nothing else. EnsureMetaProperties checks every meta.properties
// before it writes anything: another node.id, two cluster.ids or an unreadable file
// refuse the start with the file, the values and what to do. New partitions are placed
// one at a time in the online directory holding the fewest partitions, counting those
// being created concurrently (Kafka's rule). A directory named like a partition that
// holds no file of Samsa's is never opened, adopted (unless it is empty and the
// partition exists) or deleted; other entries Samsa did not create are logged at
// start-up and left alone; only <topic>-<partition>.<32 hex>-delete directories are
// removed as leftovers of deletes.
//
// # Concurrency
//
// *Log and *Manager are safe for concurrent use.
//
//   - Appends, rolls, truncation, retention, DeleteRecords, Flush's bookkeeping and Close
//     are serialized by Log.mu. Flush does its fsync without holding Log.mu (Log.flushMu
//     serializes flushes), so appends continue during it.
//   - Readers (Read, ReadBytes, OffsetForTimestamp, MaxTimestamp, LogStartOffset,
//     LogEndOffset, Size) never take Log.mu: they load the segment list from an atomic
//     pointer (replaced, never mutated, by writers) and the offsets from atomics. An
//     append writes the bytes, then publishes the segment's size, then the log end; a
//     reader loads the log end first and never returns data beyond it.
//   - All file reads use explicit offsets (pread); nothing uses a file's seek position.
//   - Each segment's in-memory indexes are guarded by segment.idx (an RWMutex), taken
//     only around memory operations, never across another caller's I/O.
//   - The leader epoch cache has its own RWMutex.
//   - The Cleaner reads segments like a reader, without Log.mu (a segment closed under
//     it aborts the pass), writes its .cleaned files alone and takes Log.mu only to
//     swap them in. Cleaner.mu guards its per-log state and is never held across I/O
//     or while a Log lock is taken; Cleaner.checkpointMu serializes checkpoint writes.
//
// Lock order: Log.flushMu → Log.mu → epochCache.mu → segment.idx. Manager.mu is never
// held while calling into a Log, except Manager.Close, which first empties the map.
// Cleaner.checkpointMu → Cleaner.mu → Manager.mu (through the logs function); no Log
// lock is taken while holding a Cleaner lock. Stop the Cleaner (cancel Run's context and
// wait for it) before Manager.Close.
//
// TruncateTo cuts files in place: a FileRange into the truncated tail of the active
// segment may read short afterwards (followers only truncate data above the high
// watermark, which readers are not given).
package storage
