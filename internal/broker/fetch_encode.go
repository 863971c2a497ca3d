package broker

import (
	"encoding/binary"

	"github.com/samsa-streaming/samsa/internal/protocol"
	"github.com/samsa-streaming/samsa/internal/storage"
)

// The Fetch response is written by hand around the record bytes so that they can go
// out with sendfile straight from the segment files instead of being copied into the
// response. Everything else in the response follows Kafka's FetchResponse schema for
// versions 4–16 (flexible encoding from v12); the tests decode these responses with
// kmsg and real clients to keep the two in step.

// fetchPartitionResult is one partition's part of a Fetch response.
type fetchPartitionResult struct {
	partition        int32
	errorCode        int16
	highWatermark    int64
	lastStableOffset int64
	logStartOffset   int64
	ranges           []storage.FileRange
	size             int64
	// aborted are the aborted transactions overlapping the records returned
	// (read_committed only).
	aborted []storage.AbortedTxn
	// preferredReadReplica (v11+) is the replica a consumer should fetch from instead
	// (KIP-392), -1 for none.
	preferredReadReplica int32
	// diverging (v12+): the fetching follower's or consumer's last fetched epoch diverged;
	// divergingEpoch and divergingEnd say where it ends here (tagged field 0).
	diverging      bool
	divergingEpoch int32
	divergingEnd   int64
}

type fetchTopicResult struct {
	name       string
	id         [16]byte
	partitions []fetchPartitionResult
}

// chunkWriter builds a response body out of byte runs and file ranges. The runs are
// parts of one buffer (mark is where the current run starts), so a response of many
// partitions takes one buffer, not one per partition.
type chunkWriter struct {
	chunks []protocol.Chunk
	buf    []byte
	mark   int
}

// reset empties the writer, keeping its capacity.
func (w *chunkWriter) reset() {
	clear(w.chunks) // they hold *os.File
	w.chunks, w.buf, w.mark = w.chunks[:0], w.buf[:0], 0
}

func (w *chunkWriter) int8(v int8)   { w.buf = append(w.buf, byte(v)) }
func (w *chunkWriter) int16(v int16) { w.buf = binary.BigEndian.AppendUint16(w.buf, uint16(v)) }
func (w *chunkWriter) int32(v int32) { w.buf = binary.BigEndian.AppendUint32(w.buf, uint32(v)) }
func (w *chunkWriter) int64(v int64) { w.buf = binary.BigEndian.AppendUint64(w.buf, uint64(v)) }
func (w *chunkWriter) uvarint(v uint64) {
	w.buf = binary.AppendUvarint(w.buf, v)
}

// arrayLen writes an array length in the classic or compact form.
func (w *chunkWriter) arrayLen(n int, flexible bool) {
	if flexible {
		w.uvarint(uint64(n + 1))
	} else {
		w.int32(int32(n))
	}
}

func (w *chunkWriter) nullArray(flexible bool) {
	if flexible {
		w.uvarint(0)
	} else {
		w.int32(-1)
	}
}

func (w *chunkWriter) string(s string, flexible bool) {
	if flexible {
		w.uvarint(uint64(len(s) + 1))
	} else {
		w.int16(int16(len(s)))
	}
	w.buf = append(w.buf, s...)
}

func (w *chunkWriter) emptyTags() { w.uvarint(0) }

// records writes a (nullable) bytes field whose contents are file ranges.
func (w *chunkWriter) records(ranges []storage.FileRange, size int64, flexible bool) {
	if flexible {
		w.uvarint(uint64(size + 1))
	} else {
		w.int32(int32(size))
	}
	if size == 0 {
		return
	}
	w.flush()
	for _, r := range ranges {
		w.chunks = append(w.chunks, protocol.Chunk{File: r.File, Offset: r.Pos, Length: r.Len})
	}
}

// flush ends the current run of bytes. A later run may grow buf into a new array; the
// earlier runs keep pointing into the old one, whose bytes stay as they were.
func (w *chunkWriter) flush() {
	if len(w.buf) > w.mark {
		w.chunks = append(w.chunks, protocol.Chunk{Bytes: w.buf[w.mark:len(w.buf):len(w.buf)]})
		w.mark = len(w.buf)
	}
}

// encodeFetchResponse writes a Fetch response body of the given version.
func encodeFetchResponse(version int16, errorCode int16, sessionID int32, readCommitted bool, topics []fetchTopicResult) []protocol.Chunk {
	var w chunkWriter
	return w.fetchResponse(version, errorCode, sessionID, readCommitted, topics)
}

// fetchResponse writes a Fetch response body of the given version into w.
func (w *chunkWriter) fetchResponse(version int16, errorCode int16, sessionID int32, readCommitted bool, topics []fetchTopicResult) []protocol.Chunk {
	flexible := version >= 12
	size := 64
	for _, t := range topics {
		size += 24 + len(t.name) + 64*len(t.partitions)
		for _, p := range t.partitions {
			size += 17 * len(p.aborted)
		}
	}
	if cap(w.buf) < size {
		w.buf = make([]byte, 0, size)
	}
	w.int32(0) // throttle_time_ms
	if version >= 7 {
		w.int16(errorCode)
		w.int32(sessionID) // 0: no fetch session (fetch_session.go)
	}
	w.arrayLen(len(topics), flexible)
	for _, t := range topics {
		if version >= 13 {
			w.buf = append(w.buf, t.id[:]...)
		} else {
			w.string(t.name, flexible)
		}
		w.arrayLen(len(t.partitions), flexible)
		for _, p := range t.partitions {
			w.int32(p.partition)
			w.int16(p.errorCode)
			w.int64(p.highWatermark)
			w.int64(p.lastStableOffset)
			if version >= 5 {
				w.int64(p.logStartOffset)
			}
			if readCommitted {
				w.arrayLen(len(p.aborted), flexible)
				for _, a := range p.aborted {
					w.int64(a.ProducerID)
					w.int64(a.FirstOffset)
					if flexible {
						w.emptyTags()
					}
				}
			} else {
				w.nullArray(flexible)
			}
			if version >= 11 {
				w.int32(p.preferredReadReplica)
			}
			w.records(p.ranges, p.size, flexible)
			if flexible && p.diverging && version >= 12 {
				w.uvarint(1)  // one tagged field:
				w.uvarint(0)  // DivergingEpoch,
				w.uvarint(13) // of 13 bytes: epoch, end offset, no tags
				w.int32(p.divergingEpoch)
				w.int64(p.divergingEnd)
				w.emptyTags()
			} else if flexible {
				w.emptyTags()
			}
		}
		if flexible {
			w.emptyTags()
		}
	}
	if flexible {
		w.emptyTags()
	}
	w.flush()
	return w.chunks
}
