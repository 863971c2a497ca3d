package bench

import (
	"encoding/binary"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// fetch answers a Fetch request from the canned batch. The response is encoded by
// hand, field for field as kmsg's FetchResponse encodes it (a test checks that the
// bytes agree), so that the batch copies need not be copied into the response: the
// response is written with writev as [encoded fields][base offset][canned batch
// without its base offset]... Each copy's base offset is the fetch offset plus the
// records before it; the CRC does not cover the base offset, so the copies stay valid.
func (b *NullBroker) fetch(cs *connState, correlationID int32, req *kmsg.FetchRequest) error {
	version := req.Version
	flexible := version >= 12
	canned := b.canned.bytes
	batchLen := len(canned)

	out := append(cs.out[:0], 0, 0, 0, 0)
	out = binary.BigEndian.AppendUint32(out, uint32(correlationID))
	if flexible {
		out = append(out, 0) // response header tags
	}
	cs.offsets = cs.offsets[:0]
	cs.cuts = cs.cuts[:0]

	out = binary.BigEndian.AppendUint32(out, 0) // throttle (v1+; we serve v4+)
	if version >= 7 {
		out = binary.BigEndian.AppendUint16(out, uint16(errCodeNone))
		out = binary.BigEndian.AppendUint32(out, 0) // session id: no sessions
	}
	remaining := int(req.MaxBytes)
	if remaining <= 0 {
		remaining = int(^uint32(0) >> 1)
	}
	recordBytes := 0
	out = appendArrayLen(out, len(req.Topics), flexible)
	for i := range req.Topics {
		rt := &req.Topics[i]
		var t *nullTopic
		if version >= 13 {
			t = b.topicByID(rt.TopicID)
			out = append(out, rt.TopicID[:]...)
		} else {
			t, _ = b.topic(rt.Topic, false, 0)
			out = appendString(out, rt.Topic, flexible)
		}
		out = appendArrayLen(out, len(rt.Partitions), flexible)
		for j := range rt.Partitions {
			rp := &rt.Partitions[j]
			errCode := errCodeNone
			switch {
			case t == nil && version >= 13:
				errCode = errCodeUnknownTopicID
			case t == nil || rp.Partition < 0 || int(rp.Partition) >= len(t.next):
				errCode = errCodeUnknownTopicOrPartition
			}
			batches := 0
			if errCode == errCodeNone {
				budget := min(int(rp.PartitionMaxBytes), remaining)
				batches = budget / batchLen
				if batches == 0 && recordBytes == 0 {
					batches = 1 // like Kafka, at least one whole batch so the consumer progresses
				}
				remaining -= batches * batchLen
				recordBytes += batches * batchLen
			}
			highWatermark := rp.FetchOffset + int64(batches)*b.canned.records
			out = binary.BigEndian.AppendUint32(out, uint32(rp.Partition))
			out = binary.BigEndian.AppendUint16(out, uint16(errCode))
			out = binary.BigEndian.AppendUint64(out, uint64(highWatermark))
			out = binary.BigEndian.AppendUint64(out, uint64(highWatermark)) // last stable offset
			if version >= 5 {
				out = binary.BigEndian.AppendUint64(out, 0) // log start offset
			}
			// aborted transactions: null
			if flexible {
				out = append(out, 0)
			} else {
				out = binary.BigEndian.AppendUint32(out, ^uint32(0))
			}
			if version >= 11 {
				out = binary.BigEndian.AppendUint32(out, ^uint32(0)) // preferred read replica -1
			}
			size := batches * batchLen
			if flexible {
				out = binary.AppendUvarint(out, uint64(size)+1)
			} else {
				out = binary.BigEndian.AppendUint32(out, uint32(size))
			}
			if batches > 0 {
				cs.cuts = append(cs.cuts, recordCut{at: len(out), firstOffsetAt: len(cs.offsets), batches: batches})
				for k := range batches {
					cs.offsets = binary.BigEndian.AppendUint64(cs.offsets, uint64(rp.FetchOffset+int64(k)*b.canned.records))
				}
			}
			if flexible {
				out = append(out, 0) // partition tags
			}
		}
		if flexible {
			out = append(out, 0) // topic tags
		}
	}
	if flexible {
		out = append(out, 0) // response tags
	}
	binary.BigEndian.PutUint32(out, uint32(len(out)-4+recordBytes))
	cs.out = out

	if len(cs.cuts) == 0 {
		_, err := cs.conn.Write(out)
		return err
	}
	iov := cs.iov[:0]
	prev := 0
	for _, c := range cs.cuts {
		iov = append(iov, out[prev:c.at])
		for k := range c.batches {
			at := c.firstOffsetAt + 8*k
			iov = append(iov, cs.offsets[at:at+8], canned[8:])
		}
		prev = c.at
	}
	if prev < len(out) {
		iov = append(iov, out[prev:])
	}
	cs.iov = iov
	_, err := iov.WriteTo(cs.conn)
	return err
}

func appendArrayLen(dst []byte, n int, flexible bool) []byte {
	if flexible {
		return binary.AppendUvarint(dst, uint64(n)+1)
	}
	return binary.BigEndian.AppendUint32(dst, uint32(n))
}

func appendString(dst []byte, s string, flexible bool) []byte {
	if flexible {
		dst = binary.AppendUvarint(dst, uint64(len(s))+1)
	} else {
		dst = binary.BigEndian.AppendUint16(dst, uint16(len(s)))
	}
	return append(dst, s...)
}
