package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/samsa-streaming/samsa/internal/cli"
)

// produceConfig is what `bench produce` runs.
type produceConfig struct {
	brokers       []string
	security      []kgo.Opt // TLS and SASL of the target's listener
	topic         string
	recordSize    int
	records       int64         // total records; 0 = run for duration
	duration      time.Duration // used when records is 0
	batchMaxBytes int32
	linger        time.Duration
	acks          string // all, 1, 0
	idempotent    bool
	compression   string
	partitions    int32
	producers     int
	createTopic   bool
	rate          float64 // records/s over all producers; 0 = as fast as possible
	maxBuffered   int     // records buffered per producer client
	// brokerMetrics is the broker's Prometheus URL (--broker-metrics): its CPU, GC
	// share and peak memory during the run are reported when set.
	brokerMetrics string
	// transactional: each producer writes in transactions, committed every
	// commitEvery records or commitInterval, whichever comes first (produce_txn.go).
	transactional  bool
	commitEvery    int64
	commitInterval time.Duration
}

func defaultProduceConfig() produceConfig {
	return produceConfig{
		recordSize:    1024,
		records:       1_000_000,
		batchMaxBytes: 1 << 20,
		linger:        5 * time.Millisecond,
		acks:          "all",
		idempotent:    true,
		compression:   "none",
		partitions:    1,
		producers:     1,
		createTopic:   true,
		maxBuffered:   50_000, // franz-go's own default
	}
}

// badFlagError is ErrBadFlag: a usage error, so that samsa exits with code 2.
type badFlagError struct{}

func (badFlagError) Error() string        { return "bench: invalid flag" }
func (badFlagError) Is(target error) bool { return target == cli.ErrUsage }

// Errors of the bench commands.
var (
	ErrBadFlag     error = badFlagError{}
	ErrProduceFail       = errors.New("bench: produce failed")
	ErrConsumeFail       = errors.New("bench: consume failed")
)

func (c *produceConfig) validate() error {
	var errs []error
	if c.topic == "" {
		errs = append(errs, fmt.Errorf("%w: --topic is required", ErrBadFlag))
	}
	if c.recordSize < 0 {
		errs = append(errs, fmt.Errorf("%w: --record-size must be ≥ 0", ErrBadFlag))
	}
	if c.records <= 0 && c.duration <= 0 {
		errs = append(errs, fmt.Errorf("%w: give --records or --duration", ErrBadFlag))
	}
	if c.producers <= 0 {
		errs = append(errs, fmt.Errorf("%w: --producers must be ≥ 1", ErrBadFlag))
	}
	if c.partitions <= 0 {
		errs = append(errs, fmt.Errorf("%w: --partitions must be ≥ 1", ErrBadFlag))
	}
	if c.batchMaxBytes <= 0 {
		errs = append(errs, fmt.Errorf("%w: --batch-max-bytes must be > 0", ErrBadFlag))
	}
	if c.rate < 0 {
		errs = append(errs, fmt.Errorf("%w: --rate must be ≥ 0", ErrBadFlag))
	}
	if _, err := cli.ParseAcks(c.acks); err != nil {
		errs = append(errs, err)
	}
	if c.acks != "all" && c.idempotent {
		errs = append(errs, fmt.Errorf("%w: --idempotent needs --acks all", ErrBadFlag))
	}
	if _, err := cli.ParseCompression(c.compression); err != nil {
		errs = append(errs, err)
	}
	if c.transactional && !c.idempotent {
		errs = append(errs, fmt.Errorf("%w: --transactional needs --idempotent", ErrBadFlag))
	}
	if c.commitEvery < 0 || c.commitInterval < 0 {
		errs = append(errs, fmt.Errorf("%w: --commit-every and --commit-interval must be ≥ 0", ErrBadFlag))
	}
	return errors.Join(errs...)
}

// ProduceResult is the summary of a produce run.
type ProduceResult struct {
	Target        string    `json:"target"`
	Topic         string    `json:"topic"`
	RecordSize    int       `json:"record_size"`
	Partitions    int32     `json:"partitions"`
	Producers     int       `json:"producers"`
	Acks          string    `json:"acks"`
	Idempotent    bool      `json:"idempotent"`
	Compression   string    `json:"compression"`
	LingerMs      float64   `json:"linger_ms"`
	BatchMaxBytes int32     `json:"batch_max_bytes"`
	TargetRate    float64   `json:"target_rate,omitempty"`
	Records       int64     `json:"records"`
	Errors        int64     `json:"errors"`
	Seconds       float64   `json:"seconds"`
	RecordsPerSec float64   `json:"records_per_sec"`
	MBPerSec      float64   `json:"mb_per_sec"`
	Latency       Latencies `json:"latency"`
	// Broker is what the broker spent (with --broker-metrics).
	Broker *BrokerUsage `json:"broker,omitempty"`
	// Transactions: how often the producers committed and how long each commit
	// (EndTxn, after the transaction's records were flushed) took.
	Transactions *TransactionResult `json:"transactions,omitempty"`
}

// mebibyte is the MB of every MB/s figure, as kafka-producer-perf-test counts it.
const mebibyte = 1 << 20

// producerState is what every record's promise reads; promises run concurrently.
type producerState struct {
	hist     *Histogram
	acked    atomic.Int64
	errors   atomic.Int64
	firstErr atomic.Pointer[error]
	lastAck  atomic.Int64 // unix nanos of the latest acknowledgement
	pool     sync.Pool
	cancel   context.CancelFunc
}

// promise records one acknowledgement. The record's Timestamp holds the moment
// Produce was called (set before the call; the client keeps a set timestamp), so no
// closure is allocated per record.
func (s *producerState) promise(r *kgo.Record, err error) {
	now := time.Now()
	if err != nil {
		s.errors.Add(1)
		e := err
		if s.firstErr.CompareAndSwap(nil, &e) {
			s.cancel()
		}
	} else {
		s.hist.Record(now.Sub(r.Timestamp))
		s.acked.Add(1)
	}
	s.lastAck.Store(now.UnixNano())
	*r = kgo.Record{Value: r.Value}
	s.pool.Put(r)
}

func (c *produceConfig) clientOpts() ([]kgo.Opt, error) {
	acks, err := cli.ParseAcks(c.acks)
	if err != nil {
		return nil, err
	}
	codec, err := cli.ParseCompression(c.compression)
	if err != nil {
		return nil, err
	}
	opts := []kgo.Opt{
		kgo.SeedBrokers(c.brokers...),
		kgo.DefaultProduceTopic(c.topic),
		kgo.ProducerBatchMaxBytes(c.batchMaxBytes),
		kgo.ProducerLinger(c.linger),
		kgo.RequiredAcks(acks),
		kgo.ProducerBatchCompression(codec),
		kgo.MaxBufferedRecords(max(c.maxBuffered, 1)),
		kgo.AllowAutoTopicCreation(),
	}
	opts = append(opts, c.security...)
	if !c.idempotent {
		opts = append(opts, kgo.DisableIdempotentWrite())
	}
	return opts, nil
}

// runProduce runs the produce benchmark against cfg.brokers, printing a progress line
// every second to progress (if not nil).
func runProduce(ctx context.Context, cfg produceConfig, target string, progress io.Writer) (ProduceResult, error) {
	if err := cfg.validate(); err != nil {
		return ProduceResult{}, err
	}
	res := ProduceResult{
		Target: target, Topic: cfg.topic, RecordSize: cfg.recordSize, Partitions: cfg.partitions,
		Producers: cfg.producers, Acks: cfg.acks, Idempotent: cfg.idempotent, Compression: cfg.compression,
		LingerMs: ms(cfg.linger), BatchMaxBytes: cfg.batchMaxBytes, TargetRate: cfg.rate,
	}
	if cfg.createTopic {
		if err := createTopic(ctx, cfg.brokers, cfg.topic, cfg.partitions, cfg.security...); err != nil {
			return res, err
		}
	}
	opts, err := cfg.clientOpts()
	if err != nil {
		return res, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	state := &producerState{hist: NewHistogram(), cancel: cancel}
	value := make([]byte, cfg.recordSize)
	for i := range value {
		value[i] = byte('A' + i%26)
	}
	state.pool.New = func() any { return &kgo.Record{Value: value} }

	clients := make([]*kgo.Client, cfg.producers)
	defer func() {
		for _, cl := range clients {
			if cl != nil {
				cl.Close()
			}
		}
	}()
	for i := range clients {
		cl, err := kgo.NewClient(append(opts, cfg.txnOpts(i)...)...)
		if err != nil {
			return res, fmt.Errorf("%w: %v", ErrProduceFail, err)
		}
		clients[i] = cl
		// Warm up: metadata, producer id and connections are not part of the run.
		if err := warmUp(ctx, cl, cfg.transactional, value); err != nil {
			return res, fmt.Errorf("%w: warm-up record: %v", ErrProduceFail, err)
		}
	}
	txns := newTxnState(cfg)

	if !cfg.createTopic { // report the topic's real partition count, not the flag's
		if leaders, _, err := partitionLeaders(ctx, clients[0], cfg.topic); err == nil {
			res.Partitions = int32(len(leaders))
		}
	}

	usage, err := startUsage(ctx, cfg.brokerMetrics)
	if err != nil {
		return res, err
	}
	start := time.Now()
	var deadline time.Time
	if cfg.records <= 0 {
		deadline = start.Add(cfg.duration)
	}
	stopProgress := startProgress(progress, "produce "+target, start, func() (int64, int64, *Histogram) {
		n := state.acked.Load()
		return n, n * int64(cfg.recordSize), state.hist
	})
	var wg sync.WaitGroup
	for i, cl := range clients {
		quota := int64(0)
		if cfg.records > 0 {
			quota = cfg.records / int64(cfg.producers)
			if int64(i) < cfg.records%int64(cfg.producers) {
				quota++
			}
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if txns != nil {
				txns.loop(ctx, cl, state, quota, deadline, cfg.rate/float64(cfg.producers))
				return
			}
			produceLoop(ctx, cl, state, quota, deadline, cfg.rate/float64(cfg.producers))
		}()
	}
	wg.Wait()
	for _, cl := range clients {
		if err := cl.Flush(ctx); err != nil && state.firstErr.Load() == nil {
			if ctx.Err() == nil {
				return res, fmt.Errorf("%w: flush: %v", ErrProduceFail, err)
			}
		}
	}
	stopProgress()
	end := time.Unix(0, state.lastAck.Load())
	if end.Before(start) {
		end = time.Now()
	}
	fillProduceResult(&res, state, end.Sub(start))
	res.Transactions = txns.result(cfg)
	if res.Broker, err = usage.finish(ctx, float64(res.Records)*float64(res.RecordSize)/mebibyte); err != nil {
		return res, err
	}
	if p := state.firstErr.Load(); p != nil {
		return res, fmt.Errorf("%w: %d records failed, first: %v", ErrProduceFail, res.Errors, *p)
	}
	if err := ctx.Err(); err != nil {
		return res, err
	}
	return res, nil
}

func fillProduceResult(res *ProduceResult, state *producerState, elapsed time.Duration) {
	res.Records = state.acked.Load()
	res.Errors = state.errors.Load()
	res.Seconds = elapsed.Seconds()
	if res.Seconds > 0 {
		res.RecordsPerSec = float64(res.Records) / res.Seconds
		res.MBPerSec = float64(res.Records) * float64(res.RecordSize) / mebibyte / res.Seconds
	}
	res.Latency = state.hist.Summary()
}

// produceLoop produces quota records (or until deadline when quota is 0), paced to
// rate records/s when rate > 0.
func produceLoop(ctx context.Context, cl *kgo.Client, state *producerState, quota int64, deadline time.Time, rate float64) {
	p := newPacer(rate)
	for i := int64(0); quota == 0 || i < quota; i++ {
		if !p.produceOne(ctx, cl, state, i, quota, deadline) {
			return
		}
	}
}

// pacer paces one producer's records.
type pacer struct {
	start    time.Time
	interval time.Duration
}

func newPacer(rate float64) pacer {
	p := pacer{start: time.Now()}
	if rate > 0 {
		p.interval = time.Duration(float64(time.Second) / rate)
	}
	return p
}

// produceOne produces record i unless the run is over (false).
func (p pacer) produceOne(ctx context.Context, cl *kgo.Client, state *producerState, i, quota int64, deadline time.Time) bool {
	if ctx.Err() != nil {
		return false
	}
	now := time.Now()
	if quota == 0 && i%64 == 0 && !now.Before(deadline) {
		return false
	}
	if p.interval > 0 {
		due := p.start.Add(time.Duration(i) * p.interval)
		if ahead := due.Sub(now); ahead > 200*time.Microsecond {
			time.Sleep(ahead)
			now = time.Now()
		}
	}
	r := state.pool.Get().(*kgo.Record)
	r.Timestamp = now
	cl.Produce(ctx, r, state.promise)
	return true
}
