package bench

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-streaming/samsa/internal/record"
)

// consumeConfig is what `bench consume` runs.
type consumeConfig struct {
	brokers           []string
	security          []kgo.Opt // TLS and SASL of the target's listener
	topic             string
	records           int64         // stop after this many; 0 = up to the end offsets at start
	duration          time.Duration // stop after this long; 0 = no limit
	fetchMaxBytes     int32
	partitionMaxBytes int32
	maxWait           time.Duration
	// isolation is read_uncommitted or read_committed (the Fetch isolation level; the
	// end offsets are then the last stable offsets). Control batches are not counted
	// as records; the records of aborted transactions are (the loop does not filter
	// them as a consumer would).
	isolation string
}

func defaultConsumeConfig() consumeConfig {
	return consumeConfig{
		fetchMaxBytes:     50 << 20,
		partitionMaxBytes: 1 << 20,
		maxWait:           500 * time.Millisecond,
		isolation:         "read_uncommitted",
	}
}

func (c *consumeConfig) readCommitted() bool { return c.isolation == "read_committed" }

func (c *consumeConfig) validate() error {
	var errs []error
	if c.topic == "" {
		errs = append(errs, fmt.Errorf("%w: --topic is required", ErrBadFlag))
	}
	if c.records < 0 {
		errs = append(errs, fmt.Errorf("%w: --records must be ≥ 0", ErrBadFlag))
	}
	if c.fetchMaxBytes <= 0 || c.partitionMaxBytes <= 0 {
		errs = append(errs, fmt.Errorf("%w: fetch sizes must be > 0", ErrBadFlag))
	}
	if c.isolation != "read_uncommitted" && c.isolation != "read_committed" {
		errs = append(errs, fmt.Errorf("%w: --isolation %q: read_uncommitted or read_committed", ErrBadFlag, c.isolation))
	}
	return errors.Join(errs...)
}

// ConsumeResult is the summary of a consume run. Bytes counts whole record batches
// as fetched (headers and record framing included, compressed if they are).
type ConsumeResult struct {
	Target        string  `json:"target"`
	Topic         string  `json:"topic"`
	Partitions    int     `json:"partitions"`
	Records       int64   `json:"records"`
	Bytes         int64   `json:"bytes"`
	Batches       int64   `json:"batches"`
	Fetches       int64   `json:"fetches"`
	Seconds       float64 `json:"seconds"`
	RecordsPerSec float64 `json:"records_per_sec"`
	MBPerSec      float64 `json:"mb_per_sec"`
}

// fetchPartition is one partition a fetch loop reads.
type fetchPartition struct {
	partition int32
	offset    int64 // next offset to fetch
	end       int64 // stop here when reading to the end; -1 = no end
	maxBytes  int32
}

// consumeCounters are shared by the fetch loops.
type consumeCounters struct {
	records, bytes, batches, fetches atomic.Int64
	lastFetch                        atomic.Int64 // unix nanos
}

// runConsume reads cfg.topic from its earliest offsets with raw Fetch requests to
// each partition's leader, one request in flight per leader, counting records and
// bytes from batch headers without decoding a record.
func runConsume(ctx context.Context, cfg consumeConfig, target string, progress io.Writer) (ConsumeResult, error) {
	res := ConsumeResult{Target: target, Topic: cfg.topic}
	if err := cfg.validate(); err != nil {
		return res, err
	}
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(cfg.brokers...)}, cfg.security...)...)
	if err != nil {
		return res, fmt.Errorf("%w: %v", ErrConsumeFail, err)
	}
	defer cl.Close()

	leaders, topicID, err := partitionLeaders(ctx, cl, cfg.topic)
	if err != nil {
		return res, err
	}
	adm := kadm.NewClient(cl)
	starts, err := adm.ListStartOffsets(ctx, cfg.topic)
	if err == nil {
		err = starts.Error()
	}
	if err != nil {
		return res, fmt.Errorf("%w: list start offsets: %v", ErrConsumeFail, err)
	}
	var ends kadm.ListedOffsets
	if cfg.records == 0 {
		list := adm.ListEndOffsets
		if cfg.readCommitted() {
			list = adm.ListCommittedOffsets
		}
		if ends, err = list(ctx, cfg.topic); err == nil {
			err = ends.Error()
		}
		if err != nil {
			return res, fmt.Errorf("%w: list end offsets: %v", ErrConsumeFail, err)
		}
	}
	byLeader := make(map[int32][]*fetchPartition)
	for p, leader := range leaders {
		fp := &fetchPartition{partition: p, end: -1, maxBytes: cfg.partitionMaxBytes}
		if o, ok := starts.Lookup(cfg.topic, p); ok {
			fp.offset = o.Offset
		}
		if cfg.records == 0 {
			o, _ := ends.Lookup(cfg.topic, p)
			fp.end = o.Offset
			if fp.end <= fp.offset {
				continue
			}
		}
		byLeader[leader] = append(byLeader[leader], fp)
		res.Partitions++
	}

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	if cfg.duration > 0 {
		runCtx, cancel = context.WithTimeout(runCtx, cfg.duration)
		defer cancel()
	}
	var counters consumeCounters
	start := time.Now()
	counters.lastFetch.Store(start.UnixNano())
	stopProgress := startProgress(progress, "consume "+target, start, func() (int64, int64, *Histogram) {
		return counters.records.Load(), counters.bytes.Load(), nil
	})
	var (
		wg       sync.WaitGroup
		errOnce  sync.Once
		firstErr error
	)
	for leader, parts := range byLeader {
		wg.Add(1)
		go func() {
			defer wg.Done()
			loop := fetchLoop{
				broker: cl.Broker(int(leader)), topic: cfg.topic, topicID: topicID, parts: parts,
				limit: cfg.records, counters: &counters, cancel: cancel, cfg: &cfg,
			}
			if err := loop.run(runCtx); err != nil {
				errOnce.Do(func() { firstErr = err; cancel() })
			}
		}()
	}
	wg.Wait()
	stopProgress()
	elapsed := time.Unix(0, counters.lastFetch.Load()).Sub(start)
	res.Records = counters.records.Load()
	res.Bytes = counters.bytes.Load()
	res.Batches = counters.batches.Load()
	res.Fetches = counters.fetches.Load()
	res.Seconds = elapsed.Seconds()
	if res.Seconds > 0 {
		res.RecordsPerSec = float64(res.Records) / res.Seconds
		res.MBPerSec = float64(res.Bytes) / mebibyte / res.Seconds
	}
	if firstErr != nil {
		return res, firstErr
	}
	return res, ctx.Err()
}

// partitionLeaders returns each partition's leader and the topic id from a Metadata
// request.
func partitionLeaders(ctx context.Context, cl *kgo.Client, topic string) (map[int32]int32, [16]byte, error) {
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, [16]byte{}, fmt.Errorf("%w: metadata: %v", ErrConsumeFail, err)
	}
	for _, t := range resp.Topics {
		if t.Topic == nil || *t.Topic != topic {
			continue
		}
		if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
			return nil, [16]byte{}, fmt.Errorf("%w: topic %q: %v", ErrConsumeFail, topic, err)
		}
		leaders := make(map[int32]int32, len(t.Partitions))
		for _, p := range t.Partitions {
			if p.Leader < 0 {
				return nil, [16]byte{}, fmt.Errorf("%w: topic %q partition %d has no leader", ErrConsumeFail, topic, p.Partition)
			}
			leaders[p.Partition] = p.Leader
		}
		if len(leaders) == 0 {
			break
		}
		return leaders, t.TopicID, nil
	}
	return nil, [16]byte{}, fmt.Errorf("%w: topic %q not found", ErrConsumeFail, topic)
}

// fetchLoop fetches one leader's partitions, one request at a time.
type fetchLoop struct {
	broker      *kgo.Broker
	topic       string
	topicID     [16]byte
	parts       []*fetchPartition
	byPartition map[int32]*fetchPartition
	limit       int64 // total records over all loops; 0 = read to the end offsets
	counters    *consumeCounters
	cancel      context.CancelFunc
	cfg         *consumeConfig
}

func (l *fetchLoop) run(ctx context.Context) error {
	l.byPartition = make(map[int32]*fetchPartition, len(l.parts))
	for _, fp := range l.parts {
		l.byPartition[fp.partition] = fp
	}
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID = -1
	req.MaxWaitMillis = int32(l.cfg.maxWait / time.Millisecond)
	req.MinBytes = 1
	req.MaxBytes = l.cfg.fetchMaxBytes
	req.SessionID = 0
	req.SessionEpoch = -1 // no fetch session: every request is a full fetch
	if l.cfg.readCommitted() {
		req.IsolationLevel = 1
	}
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = l.topic
	rt.TopicID = l.topicID
	for {
		active := rt.Partitions[:0]
		for _, fp := range l.parts {
			if fp.end >= 0 && fp.offset >= fp.end {
				continue
			}
			p := kmsg.NewFetchRequestTopicPartition()
			p.Partition = fp.partition
			p.FetchOffset = fp.offset
			p.PartitionMaxBytes = fp.maxBytes
			active = append(active, p)
		}
		if len(active) == 0 {
			return nil
		}
		rt.Partitions = active
		req.Topics = append(req.Topics[:0], rt)
		kresp, err := l.broker.Request(ctx, req)
		if err != nil {
			if ctx.Err() != nil {
				return nil // stopped: enough records, duration over, or another loop failed
			}
			return fmt.Errorf("%w: fetch: %v", ErrConsumeFail, err)
		}
		resp := kresp.(*kmsg.FetchResponse)
		if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
			return fmt.Errorf("%w: fetch: %v", ErrConsumeFail, err)
		}
		for i := range resp.Topics {
			for j := range resp.Topics[i].Partitions {
				if err := l.account(&resp.Topics[i].Partitions[j]); err != nil {
					return err
				}
			}
		}
		l.counters.fetches.Add(1)
		l.counters.lastFetch.Store(time.Now().UnixNano())
		if l.limit > 0 && l.counters.records.Load() >= l.limit {
			l.cancel()
			return nil
		}
	}
}

// account counts one partition's fetched batches from their headers and advances its
// fetch offset past the last whole batch.
func (l *fetchLoop) account(rp *kmsg.FetchResponseTopicPartition) error {
	fp := l.byPartition[rp.Partition]
	if fp == nil {
		return nil
	}
	if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
		return fmt.Errorf("%w: partition %d at offset %d: %v", ErrConsumeFail, rp.Partition, fp.offset, err)
	}
	b := rp.RecordBatches
	var records, bytes, batches int64
	for len(b) >= record.HeaderSize {
		size := int64(int32(binary.BigEndian.Uint32(b[record.LengthOffset:]))) + record.LogOverhead
		if size < record.HeaderSize || size > int64(len(b)) {
			break // a partial batch at the end of the response
		}
		base := int64(binary.BigEndian.Uint64(b))
		last := base + int64(int32(binary.BigEndian.Uint32(b[lastOffsetDeltaOffset:])))
		if last >= fp.offset {
			if binary.BigEndian.Uint16(b[record.AttributesOffset:])&record.AttrControl == 0 {
				records += int64(int32(binary.BigEndian.Uint32(b[numRecordsOffset:])))
			}
			bytes += size
			batches++
			fp.offset = last + 1
		}
		b = b[size:]
	}
	if batches == 0 && len(rp.RecordBatches) > 0 && fp.maxBytes < 1<<30 {
		fp.maxBytes *= 2 // the next batch is larger than we asked for: ask for more
	}
	l.counters.records.Add(records)
	l.counters.bytes.Add(bytes)
	l.counters.batches.Add(batches)
	return nil
}
