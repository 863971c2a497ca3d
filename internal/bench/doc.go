// Package bench is `samsa bench`: throughput and latency benchmarks for any
// Kafka-compatible cluster, with the limits that bound them measured in the same run.
//
// What it owns:
//
//   - produce (produce.go): kgo producers in the spirit of kafka-producer-perf-test.
//     Each record's latency runs from the Produce call to its promise; the call time
//     travels in the record's Timestamp so no closure is allocated per record, and
//     records are recycled through a sync.Pool once acknowledged.
//   - consume (consume.go): a raw fetch loop — kmsg FetchRequests sent to each
//     partition leader with kgo's Broker.Request, one in flight per leader — that
//     counts records and bytes from v2 batch headers (NumRecords at byte 57) and
//     advances the fetch offset past the last whole batch, never decoding a record.
//   - the null broker (nullbroker.go, nullfetch.go): a Kafka broker that stores
//     nothing. It acknowledges Produce with increasing offsets and answers every Fetch
//     from one canned batch, written with writev as [fields][base offset][canned batch
//     minus its base offset]… so that no record byte is copied; the CRC does not cover
//     the base offset, so every copy is a valid batch. It is the client's own ceiling.
//     The suite runs it in a child process (nullprocess.go: this binary's `bench
//     null-broker`), as the broker under test runs in its own process; the in-process
//     one is reported beside it.
//   - limits (limits.go): a loopback TCP sink appending to a file with read/write, and
//     a sendfile reader of that file.
//   - histogram.go: a log-linear latency histogram (≤ 1.6 % relative error, fixed
//     memory, lock-free Record).
//   - suite (suite.go): issue 4's scenarios in one run, rendered as a markdown table of
//     figures, limits and ratios against the targets.
//
// Benchmarks measure wall-clock time by design, so this package reads time.Now
// directly rather than an injected clock; nothing here is a timed test.
//
// Concurrency: Histogram.Record and the producer promise state are safe for
// concurrent use (atomics). NullBroker is safe for concurrent use: topics live in a
// map under an RWMutex (b.mu), each partition's next offset is an atomic, and each
// connection is served by one goroutine that reads a request, answers it and only then
// reads the next, so responses go back in request order and per-connection buffers
// need no lock. Everything else runs on the command's goroutine or in goroutines it
// waits for before returning.
package bench
