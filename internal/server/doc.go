// Package server owns Samsa's client-facing network layer: the listeners, one
// connection object per accepted socket, Kafka request framing and header decoding,
// and the in-order pipelined write-back of responses, including zero-copy file ranges
// written with sendfile(2).
//
// It knows nothing about what a request means: every decoded request is handed to a
// protocol.Handler, which returns a channel yielding exactly one protocol.Response.
//
// It owns the connection's security (security.go, listeners.go): each Listener has a
// name and optionally TLS (handshake in the reader, within connections.max.setup.ms;
// a verified client certificate names the principal) and SASL (the SaslHandshake and
// SaslAuthenticate exchange — or raw tokens after SaslHandshake v0 — run by the server
// itself with the mechanisms of internal/auth, re-authentication, the failed-login
// delay). Every request carries its principal and listener name to the handler. The
// server also enforces max.connections (per listener and broker-wide),
// max.connections.per.ip and the connection-rate quotas of KIP-612 (connrate.go), and
// mutes a connection a handler throttled (protocol.Response.Throttle).
//
// # Wire framing
//
// Every request is a frame:
//
//	int32  size            bytes that follow; < 0 or > MaxRequestSize closes the connection
//	int16  api key
//	int16  api version
//	int32  correlation id
//	int16  client id length (-1 = null), then the client id bytes (never compact)
//	[tagged fields]        only when the request version is flexible (KIP-482)
//	body                   decoded with kmsg at the request version
//
// A response is int32 size, int32 correlation id, an empty tag buffer when the response
// version is flexible (never for ApiVersions, KIP-511), then the body.
//
// A malformed frame, an api key Config.NewRequest does not know (kmsg's keys by
// default; the controller listener adds Samsa's internal ones), an unsupported version (except ApiVersions,
// which is answered with an ApiVersions v0 UNSUPPORTED_VERSION response carrying the
// full key list) or a panicking handler closes that one connection with a log line.
//
// # Concurrency
//
// Server methods are safe for concurrent use. Each connection runs two goroutines:
//
//   - the reader reads and decodes frames and calls Handler.Handle for each, in arrival
//     order; it reads the next frame once Handle has returned (as Kafka handles one
//     request of a connection at a time; the kernel keeps receiving meanwhile). When
//     the returned channel already holds the response and no earlier response waits
//     for the writer, the reader writes and flushes it itself, and no goroutine is
//     woken for the request at all;
//   - the writer takes the other responses in the same order and writes each when it
//     arrives, so responses leave strictly in request order. It buffers writes and
//     flushes whenever the next response is not ready yet. At most MaxInflightPerConn
//     responses wait for it; then the reader stops until one is written.
//
// A Handler must deliver its Response on a channel that does not block the sender
// after the connection is gone (a channel with capacity 1, as protocol.Ready makes):
// once a connection closes nobody receives from its pending channels. Each request
// carries its connection's id (protocol.Request.ConnID); Config.ConnClosed hears it
// again once the connection has closed and its reader has stopped calling Handle.
//
// The reader reads through a small buffer (several small requests arrive in one
// system call; a large frame is read past it, straight into its own buffer). Request
// frames are allocated per request and never reused, so a decoded body may alias the
// frame for as long as the handler needs it — except for the APIs that
// Config.ReusableFrames names, whose handlers promise to keep no reference to the
// request once Handle returns: their frames, whatever their size, are read into
// buffers of a pool of size classes and go back to it after Handle (frames.go; a size
// prefix alone never takes more than a megabyte, or the largest frame the connection
// has already delivered). The produce path thus allocates no frame memory per request,
// and the memory held for frames is bounded by the requests being read or handled.
//
// Produce requests are streamed when Config.Produce is set (produce_stream.go): their
// fields are decoded as they arrive and each partition's records are read into a pooled
// buffer and handed to the protocol.ProduceHandler at once, so that a request of many
// partitions is never held whole and every batch is checked and appended while its
// bytes are still in the CPU cache. The reader still handles one request at a time.
//
// File chunks are written with sendfile(2) at the chunk's explicit offset (the file's
// shared seek position is never used or moved), so any number of connections may send
// from one *os.File concurrently. Connections that are not plain TCP fall back to
// pread into a pooled buffer.
package server
