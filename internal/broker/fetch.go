package broker

// Fetch (key 1), versions 4–16.
//
// Reads whole batches from each partition's log up to the high watermark (the last
// stable offset for read_committed, which equals it until transactions exist), within
// partition max bytes and the response's max bytes; the first batch of the first
// non-empty partition is returned whole even when larger (KIP-74). Topics are named by
// ID from v13. Record bytes are not copied: the response carries file ranges that the
// server writes with sendfile.
//
// min.bytes / max.wait.ms make a delayed operation: when less than min.bytes is
// available the request waits, woken whenever a requested partition's high watermark
// moves, until enough data arrives or max.wait.ms passes.
//
// Fetch sessions (KIP-227) are declined: the response's session id is always 0, so
// clients send full fetch requests, which Kafka permits.

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-streaming/samsa/internal/metadata"
	"github.com/samsa-streaming/samsa/internal/protocol"
	"github.com/samsa-streaming/samsa/internal/replica"
)

func init() { register(kmsg.Fetch, 4, 16, (*Broker).handleFetch) }

func (b *Broker) handleFetch(req *protocol.Request) <-chan protocol.Response {
	r := req.Body.(*kmsg.FetchRequest)
	topics, total, parts, failed := b.readFetch(r)
	if failed || total >= int64(r.MinBytes) || r.MaxWaitMillis <= 0 || len(parts) == 0 {
		return protocol.Ready(b.fetchResponse(r, topics))
	}
	out := make(chan protocol.Response, 1)
	go func() {
		wake := make(chan struct{}, 1)
		expired, stop := b.after(time.Duration(r.MaxWaitMillis) * time.Millisecond)
		defer stop()
		for {
			for _, p := range parts {
				p.Wait(wake)
			}
			topics, total, _, failed = b.readFetch(r)
			if failed || total >= int64(r.MinBytes) {
				break
			}
			select {
			case <-wake:
				continue
			case <-expired:
			}
			topics, _, _, _ = b.readFetch(r)
			break
		}
		out <- b.fetchResponse(r, topics)
	}()
	return out
}

// fetchResponse encodes the final response and records its metrics.
func (b *Broker) fetchResponse(r *kmsg.FetchRequest, topics []fetchTopicResult) protocol.Response {
	for _, t := range topics {
		for _, p := range t.partitions {
			if p.errorCode != 0 {
				b.metrics.FetchError(p.errorCode)
			} else if p.size > 0 {
				b.metrics.FetchedBytes(t.name, 0, int(p.size))
			}
		}
	}
	return protocol.Response{Chunks: encodeFetchResponse(r.Version, 0, r.IsolationLevel == 1, topics)}
}

// readFetch reads every requested partition once. It returns the response topics, the
// number of record bytes found, the partitions read (for waiting) and whether any
// partition failed (an error answers at once).
func (b *Broker) readFetch(r *kmsg.FetchRequest) ([]fetchTopicResult, int64, []*replica.Partition, bool) {
	img := b.image()
	readCommitted := r.IsolationLevel == 1
	remaining := int64(r.MaxBytes)
	if r.MaxBytes <= 0 {
		remaining = 1<<31 - 1
	}
	var (
		total  int64
		parts  []*replica.Partition
		failed bool
	)
	topics := make([]fetchTopicResult, 0, len(r.Topics))
	for _, rt := range r.Topics {
		tr := fetchTopicResult{name: rt.Topic, id: rt.TopicID}
		var topicErr int16
		if r.Version >= 13 {
			if t, ok := img.TopicByID(metadata.TopicID(rt.TopicID)); ok {
				tr.name = t.Name
			} else {
				topicErr = kerr.UnknownTopicID.Code
			}
		}
		for _, rp := range rt.Partitions {
			pr := fetchPartitionResult{partition: rp.Partition, highWatermark: -1, lastStableOffset: -1, logStartOffset: -1}
			if topicErr != 0 {
				pr.errorCode = topicErr
				failed = true
				tr.partitions = append(tr.partitions, pr)
				continue
			}
			p := b.replicas.Get(tr.name, rp.Partition)
			if err := fetchablePartition(p, rp.CurrentLeaderEpoch); err != nil {
				pr.errorCode = errorCode(err)
				failed = true
				tr.partitions = append(tr.partitions, pr)
				continue
			}
			parts = append(parts, p)
			pr.highWatermark = p.HighWatermark()
			pr.lastStableOffset = p.LastStableOffset()
			pr.logStartOffset = p.Log.LogStartOffset()
			limit := pr.highWatermark
			if readCommitted {
				limit = pr.lastStableOffset
			}
			maxBytes := min(int64(rp.PartitionMaxBytes), remaining)
			if maxBytes < 0 {
				maxBytes = 0
			}
			res, err := p.Log.Read(rp.FetchOffset, int(maxBytes), limit, total == 0)
			if err != nil {
				b.storageFailed(p, err)
				pr.errorCode = errorCode(err)
				failed = true
				tr.partitions = append(tr.partitions, pr)
				continue
			}
			pr.ranges, pr.size = res.Ranges, res.Size
			total += res.Size
			remaining -= res.Size
			tr.partitions = append(tr.partitions, pr)
		}
		topics = append(topics, tr)
	}
	return topics, total, parts, failed
}

// fetchablePartition checks that a partition exists here, is led by this node and that
// the client's leader epoch matches.
func fetchablePartition(p *replica.Partition, currentLeaderEpoch int32) error {
	if p == nil {
		return kerr.UnknownTopicOrPartition
	}
	if p.Offline() {
		return replica.ErrOffline
	}
	if err := p.CheckLeaderEpoch(currentLeaderEpoch); err != nil {
		return err
	}
	if !p.IsLeader() {
		return kerr.NotLeaderForPartition
	}
	return nil
}
