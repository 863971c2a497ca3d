// Package record owns Kafka's record batch format v2 (magic 2): parsing and validating
// batches as producers send them, the record encoding inside a batch, control records
// (transaction markers), building batches, and the compression codecs (gzip, snappy,
// lz4, zstd). It knows nothing about files, partitions or the network; storage and the
// broker hand it byte slices.
//
// # Format
//
// A batch is a 61-byte header followed by its records, compressed as a whole when the
// codec bits of attributes are set; batch.go documents the header layout and records.go
// the record layout. The CRC-32C covers everything from attributes to the end, so
// baseOffset and partitionLeaderEpoch can be stamped without recomputing it.
//
// # Paths
//
//   - Produce: Validate checks one batch and walks its records, a compressed one's
//     as its codec streams them through a small pooled buffer (validate_stream.go),
//     so its memory is bounded by that buffer and the codec's window, not by what
//     the batch expands to; it allocates nothing for an uncompressed batch and, in
//     the steady state, nothing for a compressed one. Split and NextBatchSize frame
//     a concatenation of batches.
//   - Reading records (log cleaner, internal topics): Records or Iterator decompress and
//     decode; ParseControlRecord decodes transaction markers.
//   - Writing (internal topics, cleaner, transaction markers): Build or BatchBuilder.
//
// # Errors
//
// ErrCorrupt (Kafka's CORRUPT_MESSAGE) marks bytes failing the checksum, the framing or
// decompression; ErrInvalid (INVALID_RECORD) a well-framed batch breaking a rule;
// ErrUnsupportedMagic a pre-v2 batch; ErrTooLarge (MESSAGE_TOO_LARGE) a batch over the
// size limit. Errors wrap these sentinels with detail; test with errors.Is.
//
// # Concurrency
//
// Every function is safe for concurrent use; codec state is pooled or shared internally.
// An Iterator or a BatchBuilder belongs to one goroutine at a time. Decoded records alias
// the input (or its decompressed copy): callers must not modify a batch while records
// decoded from it are in use.
package record
