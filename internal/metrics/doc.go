// Package metrics owns Samsa's Prometheus metrics: the broker's counters and
// histograms, the gauges computed from broker state at scrape time, and the HTTP
// listener (metrics.listener) that serves them at /metrics in the Prometheus text
// exposition format. docs/metrics.md lists every metric with its type, labels and
// meaning.
//
// Every Metrics value has its own prometheus.Registry; the process-wide default
// registry is never used, so several brokers can live in one process (as tests do).
//
// # Two kinds of metrics
//
//   - Event counters and the request latency histogram are fed by the hot-path
//     recorders (RequestDone, ProducedBatch, FetchedBytes, ProduceError, FetchError,
//     ISRShrink, ISRExpand, Rebalance, TransactionEnded, and the share groups'
//     ShareAcquired, ShareAcknowledged, ShareLocksExpired, ShareFetchWaited). A
//     recorder resolves its labelled series once (per topic, per group, per API key
//     and version, per error code) and caches it, so after the first call for a
//     label value a call is a few atomic additions and allocates nothing.
//   - State gauges (partitions, under-replicated and offline partitions, log sizes and
//     offsets, groups by state, members, committed offsets and consumer lag, share
//     partitions' records in flight) are not maintained on the hot path at all: at
//     each scrape the collector asks the broker's Source for a snapshot and turns it
//     into constant metrics. Lag is computed then, as high watermark − committed
//     offset.
//
// # Concurrency
//
// All methods are safe for concurrent use. A nil *Metrics is a valid, disabled
// Metrics: every method is a no-op, so callers need no nil checks. Source methods are
// called from the HTTP handler's goroutine, once per scrape each, and must be safe for
// concurrent use with the rest of the broker and with each other (scrapes may
// overlap). Start succeeds at most once; Close is idempotent and waits for the HTTP
// server to stop. Recorders keep working after Close.
package metrics
