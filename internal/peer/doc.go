// Package peer is the client side of the connections between Samsa nodes: Kafka
// request framing (request header v1, or v2 for flexible versions; response header
// v0 or v1), one TCP connection per Conn, requests pipelined and answered in order,
// and reconnection with exponential backoff.
//
// The controller's Raft transport, the broker's channel to the active controller
// (forwarded admin requests, broker registration and heartbeats, AlterPartition) and
// metadata observers use it. Bodies are kmsg requests, or Samsa's internal ones
// (internal/protocol), which implement the same interface.
//
// # Failure handling
//
// A Conn dials lazily, on the first request after it has no connection. A write or
// read error, a malformed response, or a request whose context ends before its
// response arrives breaks the connection: every request in flight on it fails, and
// the next request dials again — but not before the backoff (starting at
// Options.BackoffMin, doubling per consecutive failure up to BackoffMax) has passed;
// until then requests fail at once with ErrBackingOff, so callers never pile up on
// a dead peer. A response resets the backoff.
//
// # Concurrency
//
// Conn is safe for concurrent use. Each live connection has one reader goroutine;
// writers take the connection's write lock in turn, which fixes the order of
// requests on the wire (and so of their responses). Lock order: Conn.mu, then
// link.writeMu.
package peer
