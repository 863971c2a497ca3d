package server

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/samsa-streaming/samsa/internal/protocol"
)

// Produce requests are read as a stream when the handler is a protocol.ProduceHandler
// (Config.Produce): the fields are decoded as they arrive and each partition's records
// are read into a pooled buffer and handed over at once, so that a request carrying
// the batches of a thousand partitions — tens of megabytes from a producer that kept
// up with a slow moment — is never held whole, and every batch is checksummed and
// written to its log while its bytes are still in the CPU cache (a whole 50 MB frame
// is not: checking and appending its batches cost two to three times as much per byte
// as those of a 1 MiB frame).
//
// The decoder covers ProduceRequest versions 3 to 12, Kafka's schema: transactional_id
// (nullable string), acks int16, timeout_ms int32, topics [name string, partitions
// [index int32, records nullable bytes]], with compact lengths and tagged fields from
// version 9 (flexible); version 12 (KIP-890) has version 11's schema; version 13
// (KIP-516) names each topic by its id (16 bytes) instead of its name.
// The tests hold it to kmsg's encoding of the same requests.
//
// Unlike a request read whole, a streamed request that turns out malformed (or is cut
// off) part way has had its earlier partitions appended; the connection is closed
// without a response, so the client retries them, as after any lost response
// (idempotent producers are deduplicated).
const (
	produceKey        int16 = 0
	minStreamProduce  int16 = 3
	maxStreamProduce  int16 = 13
	topicIDProduceAt  int16 = 13
	flexibleProduceAt int16 = 9
)

// errMalformedProduce marks a streamed Produce request that does not follow the schema.
var errMalformedProduce = fmt.Errorf("%w: produce request", errMalformedBody)

// streamable reports whether a Produce request of version v is streamed.
func (c *conn) streamable(v int16) bool {
	if c.srv.cfg.Produce == nil || v < minStreamProduce || v > maxStreamProduce {
		return false
	}
	lo, hi, ok := c.srv.cfg.Versions(produceKey)
	return ok && v >= lo && v <= hi
}

// frameReader reads the fields of one request frame through a window: a pooled
// buffer of up to streamWindow bytes, filled with as much of the frame as the socket
// has (never past the frame's end), so that a request of many partitions costs a read
// per window rather than several per partition, and records that fit the window are
// handed over where they lie, without a copy.
type frameReader struct {
	c        *conn
	left     int // bytes of the frame not pulled into the window yet
	flexible bool
	win      *[]byte
	r, w     int // (*win)[r:w] pulled and not consumed
}

// streamWindow is the largest window a streamed request reads through.
const streamWindow = 1 << 20

// newFrameReader starts reading a frame of size bytes (after its size prefix).
func (c *conn) newFrameReader(size int) *frameReader {
	r := &c.frame
	*r = frameReader{c: c, left: size, win: c.srv.frames.Get(min(size, streamWindow))}
	*r.win = (*r.win)[:cap(*r.win)]
	return r
}

// release gives the window back.
func (r *frameReader) release() {
	if r.win != nil {
		r.c.srv.frames.Put(r.win)
		r.win = nil
	}
}

// ensure makes n ≤ len(window) bytes of the frame available at (*win)[r:].
func (r *frameReader) ensure(n int) error {
	if r.w-r.r >= n {
		return nil
	}
	buf := *r.win
	if n > r.w-r.r+r.left || n > len(buf) {
		return errMalformedProduce
	}
	if r.r+n > len(buf) {
		r.w = copy(buf, buf[r.r:r.w])
		r.r = 0
	}
	for r.w-r.r < n {
		m, err := r.c.br.Read(buf[r.w : r.w+min(len(buf)-r.w, r.left)])
		r.w += m
		r.left -= m
		if err != nil {
			if err = r.c.retryableReadError(err); err != nil {
				if errors.Is(err, io.EOF) {
					return io.ErrUnexpectedEOF
				}
				return err
			}
		}
	}
	return nil
}

// take consumes n bytes (n ≤ len(window)).
func (r *frameReader) take(n int) ([]byte, error) {
	if err := r.ensure(n); err != nil {
		return nil, err
	}
	b := (*r.win)[r.r : r.r+n]
	r.r += n
	return b, nil
}

// remaining is the frame's bytes not consumed yet.
func (r *frameReader) remaining() int { return r.w - r.r + r.left }

func (r *frameReader) int16() (int16, error) {
	b, err := r.take(2)
	if err != nil {
		return 0, err
	}
	return int16(binary.BigEndian.Uint16(b)), nil
}

func (r *frameReader) int32() (int32, error) {
	b, err := r.take(4)
	if err != nil {
		return 0, err
	}
	return int32(binary.BigEndian.Uint32(b)), nil
}

// uvarint reads an unsigned varint of at most 5 bytes (a 32-bit value). A fifth byte
// above 0x0f would carry bits past the 32nd: refused, as kmsg refuses it in every
// other request.
func (r *frameReader) uvarint() (uint32, error) {
	var v uint32
	for shift := 0; shift < 35; shift += 7 {
		b, err := r.take(1)
		if err != nil {
			return 0, err
		}
		if shift == 28 && b[0] > 0x0f {
			return 0, errMalformedProduce
		}
		v |= uint32(b[0]&0x7f) << shift
		if b[0] < 0x80 {
			return v, nil
		}
	}
	return 0, errMalformedProduce
}

// length reads a length prefix: classic (int16 for strings, int32 for arrays and
// bytes, -1 for null) or compact (uvarint length+1, 0 for null). It returns -1 for
// null and checks the value against the bytes left, each element taking at least
// minElem bytes.
func (r *frameReader) length(classic16 bool, minElem int) (int, error) {
	var n int
	if r.flexible {
		v, err := r.uvarint()
		if err != nil {
			return 0, err
		}
		n = int(v) - 1
	} else if classic16 {
		v, err := r.int16()
		if err != nil {
			return 0, err
		}
		n = int(v)
	} else {
		v, err := r.int32()
		if err != nil {
			return 0, err
		}
		n = int(v)
	}
	if n < -1 || n > r.remaining()/max(minElem, 1) {
		return 0, errMalformedProduce
	}
	return n, nil
}

// skip discards n bytes of the frame.
func (r *frameReader) skip(n int) error {
	if n > r.remaining() {
		return errMalformedProduce
	}
	for n > 0 {
		chunk := min(n, len(*r.win))
		if _, err := r.take(chunk); err != nil {
			return err
		}
		n -= chunk
	}
	return nil
}

// skipTags skips a tagged-field buffer (flexible versions only).
func (r *frameReader) skipTags() error {
	if !r.flexible {
		return nil
	}
	count, err := r.uvarint()
	if err != nil {
		return err
	}
	for range count {
		if _, err := r.uvarint(); err != nil { // tag
			return err
		}
		size, err := r.uvarint()
		if err != nil {
			return err
		}
		if err := r.skip(int(size)); err != nil {
			return err
		}
	}
	return nil
}

// str reads a string field: classic int16 or compact length. Strings seen recently on
// the connection (topic names, the client id) are reused rather than allocated.
func (r *frameReader) str(nullable bool) (*string, error) {
	n, err := r.length(true, 1)
	if err != nil {
		return nil, err
	}
	if n < 0 {
		if !nullable {
			return nil, errMalformedProduce
		}
		return nil, nil
	}
	b, err := r.take(n)
	if err != nil {
		return nil, err
	}
	return r.c.names.intern(b), nil
}

// records reads a records field of n bytes and hands it to fn: where it lies in the
// window when it fits, otherwise in a pooled buffer of its own.
func (r *frameReader) records(n int, fn func([]byte)) error {
	if n <= len(*r.win) {
		b, err := r.take(n)
		if err != nil {
			return err
		}
		fn(b)
		return nil
	}
	if n > r.remaining() {
		return errMalformedProduce
	}
	have := (*r.win)[r.r:r.w]
	r.r = r.w
	p, err := r.c.readPooled(have, n)
	if err != nil {
		return err
	}
	r.left -= n - len(have)
	fn(*p)
	r.c.srv.frames.Put(p)
	return nil
}

// nameCache keeps the last few strings read on a connection.
type nameCache struct {
	buf    []byte
	recent [8]*string
	next   int
}

func (nc *nameCache) intern(b []byte) *string {
	for _, s := range nc.recent {
		if s != nil && *s == string(b) {
			return s
		}
	}
	s := string(b)
	nc.recent[nc.next] = &s
	nc.next = (nc.next + 1) % len(nc.recent)
	return &s
}

// streamProduce reads a Produce request of size bytes (the size prefix read, the api
// key and version peeked) and hands it to the ProduceHandler partition by partition.
// It reports false when reading must stop.
func (c *conn) streamProduce(size int, version int16) bool {
	start := time.Now()
	r := c.newFrameReader(size)
	stream, req, err := c.readProduce(r, version)
	r.release()
	if err != nil {
		if stream != nil {
			stream.Abort()
		}
		if errors.Is(err, errMalformedBody) {
			c.log.Info("bad request; closing connection", "remote", c.remote, "api_key", produceKey,
				"version", version, "client_id", req.ClientID, "err", err)
			c.closeAfterPending()
			return false
		}
		c.logReadError(err, true)
		c.close()
		return false
	}
	c.touch()
	resp, later := stream.Finish()
	p := pending{
		key: produceKey, version: version, respVersion: version, correlationID: req.CorrelationID,
		flexibleHeader: r.flexible, start: start, bytesIn: 4 + size,
	}
	if later == nil {
		p.now, p.ready = resp, true
	} else {
		p.ch = later
	}
	return c.pass(p)
}

// readProduce reads the request through its last field, handing each partition to the
// stream it starts. On error the stream, if started, is returned for Abort.
func (c *conn) readProduce(r *frameReader, version int16) (protocol.ProduceStream, *protocol.Request, error) {
	req, err := c.readStreamHeader(r, version)
	if err != nil {
		return nil, req, err
	}
	var h protocol.ProduceHeader
	if h.TransactionalID, err = r.str(true); err != nil {
		return nil, req, err
	}
	if h.Acks, err = r.int16(); err != nil {
		return nil, req, err
	}
	if h.TimeoutMillis, err = r.int32(); err != nil {
		return nil, req, err
	}
	// A topic takes at least 2 bytes (name length, partition count), a partition 5.
	if h.Topics, err = r.length(false, 2); err != nil {
		return nil, req, err
	}
	stream := c.srv.cfg.Produce.StartProduce(req, h)
	for range max(h.Topics, 0) {
		var name string
		var id [16]byte
		if version >= topicIDProduceAt {
			b, err := r.take(len(id))
			if err != nil {
				return stream, req, err
			}
			copy(id[:], b)
		} else {
			s, err := r.str(false)
			if err != nil {
				return stream, req, err
			}
			name = *s
		}
		partitions, err := r.length(false, 5)
		if err != nil {
			return stream, req, err
		}
		stream.Topic(name, id, max(partitions, 0))
		for range max(partitions, 0) {
			if err := c.streamPartition(r, stream); err != nil {
				return stream, req, err
			}
		}
		if err := r.skipTags(); err != nil {
			return stream, req, err
		}
	}
	if err := r.skipTags(); err != nil {
		return stream, req, err
	}
	// Kafka ignores bytes after the last field; so does kmsg.
	return stream, req, r.skip(r.remaining())
}

// readStreamHeader reads the request header (key, version, correlation id, client id,
// tags) into the connection's request for streamed Produce requests.
func (c *conn) readStreamHeader(r *frameReader, version int16) (*protocol.Request, error) {
	req := &c.produceReq
	*req = protocol.Request{Key: produceKey, Version: version, ClientAddr: c.remote, Principal: c.principal, Listener: c.listener.Name, Size: 4 + r.left, ConnID: c.id}
	if err := r.skip(4); err != nil { // key and version, peeked already
		return req, err
	}
	corr, err := r.int32()
	if err != nil {
		return req, err
	}
	req.CorrelationID = corr
	clientID, err := r.str(true) // the header's client id is never compact
	if err != nil {
		return req, err
	}
	if clientID != nil {
		req.ClientID = *clientID
	}
	r.flexible = version >= flexibleProduceAt
	if err := r.skipTags(); err != nil {
		return req, err
	}
	return req, nil
}

// streamPartition reads one partition (index, records, tags) and hands it over.
func (c *conn) streamPartition(r *frameReader, stream protocol.ProduceStream) error {
	index, err := r.int32()
	if err != nil {
		return err
	}
	n, err := r.length(false, 1)
	if err != nil {
		return err
	}
	switch {
	case n < 0:
		stream.Partition(index, nil)
	case n == 0:
		stream.Partition(index, []byte{})
	default:
		if err := r.records(n, func(b []byte) { stream.Partition(index, b) }); err != nil {
			return err
		}
	}
	return r.skipTags()
}
