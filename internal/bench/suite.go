package bench

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

// Issue 4's targets.
const (
	targetProduceVsNull   = 0.80 // produce 1 KiB: Samsa MB/s ≥ 80 % of the null broker's
	targetConsumeVsNull   = 0.70 // consume loop: ≥ 70 % of the same loop against the null broker
	targetSmallVsNull     = 0.90 // 100-byte records: ≥ 90 % of the null broker's records/s
	targetLatencyVsNull   = 3.0  // p99 at half of Samsa's max: ≤ 3× the null broker's p99 at that rate
	targetProduceVsKfake  = 1.8  // ≥ 1.8× kfake, same tool, same run
	suiteDefaultLimitsMiB = 384
)

// suiteConfig is what `bench suite` runs.
type suiteConfig struct {
	against    string
	out        string
	dir        string
	quick      bool
	partitions int32
	scale      float64
	repeat     int
	noKfake    bool
	dropCaches bool
}

// suiteSizes are the data volumes of one repetition of the suite; a full repetition
// writes about 1.4 GB in all (dirty page cache above ~2 GB throttles writers here, and
// every run starts with the dirty pages written back).
type suiteSizes struct {
	limitsBytes     int64
	records1K       int64
	records100      int64
	latencyMaxRecs  int64
	latencySeconds  float64
	latencyMaxBytes int64
}

func (c *suiteConfig) sizes() suiteSizes {
	if c.quick {
		return suiteSizes{limitsBytes: 32 << 20, records1K: 20_000, records100: 100_000,
			latencyMaxRecs: 20_000, latencySeconds: 1, latencyMaxBytes: 20 << 20}
	}
	s := max(c.scale, 0.01)
	return suiteSizes{
		limitsBytes:     int64(float64(suiteDefaultLimitsMiB<<20) * s),
		records1K:       int64(400_000 * s),
		records100:      int64(2_000_000 * s),
		latencyMaxRecs:  int64(200_000 * s),
		latencySeconds:  5,
		latencyMaxBytes: int64(float64(200<<20) * s),
	}
}

// produceTriple holds one scenario's median runs against Samsa, the null broker and
// kfake.
type produceTriple struct {
	Samsa ProduceResult  `json:"samsa"`
	Null  ProduceResult  `json:"null"`
	Kfake *ProduceResult `json:"kfake,omitempty"`
}

type consumeTriple struct {
	Samsa ConsumeResult  `json:"samsa"`
	Null  ConsumeResult  `json:"null"`
	Kfake *ConsumeResult `json:"kfake,omitempty"`
}

// suiteRunRecord is one measured run of the suite, for the detail tables.
type suiteRunRecord struct {
	Scenario string         `json:"scenario"`
	Target   string         `json:"target"`
	Repeat   int            `json:"repeat"`
	Produce  *ProduceResult `json:"produce,omitempty"`
	Consume  *ConsumeResult `json:"consume,omitempty"`
}

// SuiteResult is everything one suite run measured. With --repeat N every figure is
// the median of N runs (the run with the median primary figure, so that its other
// figures belong to the same run); Runs holds them all.
type SuiteResult struct {
	Started        time.Time        `json:"started"`
	Against        string           `json:"against"`
	Quick          bool             `json:"quick"`
	Partitions     int32            `json:"partitions"`
	Repeat         int              `json:"repeat"`
	DropCaches     bool             `json:"drop_caches"`
	CPUs           int              `json:"cpus"`
	Limits         LimitsResult     `json:"limits"`
	LimitsRuns     []LimitsResult   `json:"limits_runs"`
	Produce1K      produceTriple    `json:"produce_1k"`
	Consume        consumeTriple    `json:"consume"`
	Produce100     produceTriple    `json:"produce_100b"`
	LatencyMax     ProduceResult    `json:"latency_samsa_max"`
	LatencyRate    float64          `json:"latency_rate"`
	Latency        produceTriple    `json:"latency_at_half"`
	Runs           []suiteRunRecord `json:"runs"`
	Notes          []string         `json:"notes,omitempty"`
	Commands       []string         `json:"commands"`
	ElapsedSeconds float64          `json:"elapsed_seconds"`
}

// suiteRun carries a suite's state between scenarios.
type suiteRun struct {
	ctx      context.Context
	cfg      suiteConfig
	sizes    suiteSizes
	progress io.Writer
	res      *SuiteResult
	samsa    []string
	runID    string
}

func (s *suiteRun) note(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	s.res.Notes = append(s.res.Notes, msg)
	if s.progress != nil {
		fmt.Fprintln(s.progress, "suite: "+msg)
	}
}

// flush writes dirty pages back before a measured run (not in --quick smoke runs,
// whose figures mean nothing and which run inside tests).
func (s *suiteRun) flush() {
	if !s.cfg.quick {
		flushDirtyPages()
	}
}

func (s *suiteRun) topic(name string, repeat int) string {
	return fmt.Sprintf("bench-%s-%s-%d", name, s.runID, repeat)
}

// command records the equivalent single command of a run, once per scenario.
func (s *suiteRun) command(repeat int, line string) {
	if repeat == 0 {
		s.res.Commands = append(s.res.Commands, line)
	}
}

func (s *suiteRun) recordProduce(scenario, target string, repeat int, r ProduceResult) ProduceResult {
	s.res.Runs = append(s.res.Runs, suiteRunRecord{Scenario: scenario, Target: target, Repeat: repeat, Produce: &r})
	return r
}

func (s *suiteRun) recordConsume(scenario, target string, repeat int, r ConsumeResult) ConsumeResult {
	s.res.Runs = append(s.res.Runs, suiteRunRecord{Scenario: scenario, Target: target, Repeat: repeat, Consume: &r})
	return r
}

// produceOn runs cfg against a target: "null" or "kfake" start one in-process for
// this run, anything else is Samsa.
func (s *suiteRun) produceOn(against string, cfg produceConfig, label string, repeat int) ProduceResult {
	nullOpts := nullOptions{partitions: cfg.partitions, recordSize: cfg.recordSize}
	tgt, err := startTarget(against, s.samsa, nullOpts)
	if err != nil {
		s.note("%s: %v", label, err)
		return ProduceResult{}
	}
	defer tgt.close()
	cfg.brokers = tgt.brokers
	s.command(repeat, label+": "+produceCommandLine(cfg, against))
	s.flush()
	res, err := runProduce(s.ctx, cfg, label, s.progress)
	if err != nil {
		s.note("%s: %v", label, err)
	}
	return res
}

// dropTopic deletes a scenario's topic on the broker under test and writes dirty
// pages back. Every measured run also starts with flushDirtyPages: on this machine
// page-cache writes slow down long before the ~2 GB dirty limit throttles them, so
// each run, the limits included, starts from a page cache without dirty pages.
func (s *suiteRun) dropTopic(topic string) {
	if err := deleteTopic(s.ctx, s.samsa, topic); err != nil {
		s.note("deleting %s on Samsa (to free page cache): %v", topic, err)
	}
	s.flush()
}

func (s *suiteRun) baseProduce(topic string, recordSize int, records int64) produceConfig {
	cfg := defaultProduceConfig()
	cfg.topic, cfg.recordSize, cfg.records = topic, recordSize, records
	cfg.partitions = s.cfg.partitions
	return cfg
}

// runSuite runs every scenario of issue 4, cfg.repeat times each, interleaving the
// targets so that a slow moment of the shared machine hits them alike.
func runSuite(ctx context.Context, cfg suiteConfig, progress io.Writer) (*SuiteResult, error) {
	if cfg.against == "" || cfg.against == againstNull || cfg.against == againstKfake {
		return nil, fmt.Errorf("%w: --against must be the address of the broker under test", ErrBadFlag)
	}
	cfg.repeat = max(cfg.repeat, 1)
	s := &suiteRun{
		ctx: ctx, cfg: cfg, sizes: cfg.sizes(), progress: progress, samsa: splitList(cfg.against),
		runID: fmt.Sprintf("%d", time.Now().UnixNano()%1_000_000_000),
		res: &SuiteResult{Started: time.Now().UTC(), Against: cfg.against, Quick: cfg.quick,
			Partitions: cfg.partitions, Repeat: cfg.repeat, DropCaches: cfg.dropCaches, CPUs: runtime.NumCPU()},
	}
	started := time.Now()
	if cfg.dropCaches {
		if err := dropPageCache(); err != nil {
			s.note("--drop-caches: %v", err)
		}
	}

	for range cfg.repeat {
		s.flush()
		lim, err := runLimits(ctx, cfg.dir, s.sizes.limitsBytes, progress)
		if err != nil {
			s.note("limits: %v", err)
		}
		s.res.LimitsRuns = append(s.res.LimitsRuns, lim)
	}
	s.res.Limits = LimitsResult{
		Bytes:            s.sizes.limitsBytes,
		SinkMBPerSec:     medianOf(s.res.LimitsRuns, func(l LimitsResult) float64 { return l.SinkMBPerSec }),
		SendfileMBPerSec: medianOf(s.res.LimitsRuns, func(l LimitsResult) float64 { return l.SendfileMBPerSec }),
	}
	s.res.Commands = append(s.res.Commands, fmt.Sprintf("limits: samsa bench limits --dir %s --size %s", cfg.dir, formatBytes(s.sizes.limitsBytes)))

	s.produceAndConsume1K()
	s.produce100()
	s.latency()
	s.res.ElapsedSeconds = time.Since(started).Seconds()
	return s.res, ctx.Err()
}

// medianOf returns the median of f over xs (the lower middle for an even count).
func medianOf[T any](xs []T, f func(T) float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	return f(medianRun(xs, f))
}

// medianRun returns the element of xs whose f is the median (lower middle).
func medianRun[T any](xs []T, f func(T) float64) T {
	if len(xs) == 0 {
		var zero T
		return zero
	}
	sorted := slices.Clone(xs)
	slices.SortStableFunc(sorted, func(a, b T) int { return cmp.Compare(f(a), f(b)) })
	return sorted[(len(sorted)-1)/2]
}

func produceMBs(p ProduceResult) float64     { return p.MBPerSec }
func produceRecords(p ProduceResult) float64 { return p.RecordsPerSec }
func produceP99(p ProduceResult) float64     { return p.Latency.P99Ms }
func consumeMBs(c ConsumeResult) float64     { return c.MBPerSec }
func medianPtr[T any](xs []T, f func(T) float64) *T {
	if len(xs) == 0 {
		return nil
	}
	m := medianRun(xs, f)
	return &m
}

// produceAndConsume1K: 1 KiB records, acks=all, idempotent, no compression, linger
// 5 ms, batches ≤ 1 MiB — then read the same data back with the raw fetch loop.
func (s *suiteRun) produceAndConsume1K() {
	const scenario = "produce 1 KiB"
	n := s.sizes.records1K
	var nulls, kfakes, samsas []ProduceResult
	var cNulls, cKfakes, cSamsas []ConsumeResult
	for i := range s.cfg.repeat {
		topic := s.topic("1k", i)
		nulls = append(nulls, s.recordProduce(scenario, "null", i, s.produceOn(againstNull, s.baseProduce(topic, 1024, n), "null", i)))

		if !s.cfg.noKfake {
			if p, c, ok := s.kfakeProduceConsume(s.baseProduce(topic, 1024, n), i); ok {
				kfakes = append(kfakes, s.recordProduce(scenario, "kfake", i, p))
				cKfakes = append(cKfakes, s.recordConsume("consume", "kfake", i, c))
			}
		}

		cfg := s.baseProduce(topic, 1024, n)
		cfg.brokers = s.samsa
		s.command(i, "samsa: "+produceCommandLine(cfg, s.cfg.against))
		s.flush()
		p, err := runProduce(s.ctx, cfg, "samsa", s.progress)
		if err != nil {
			s.note("samsa produce: %v", err)
		}
		samsas = append(samsas, s.recordProduce(scenario, "samsa", i, p))

		cc := defaultConsumeConfig()
		cc.brokers, cc.topic = s.samsa, cfg.topic
		s.command(i, "samsa: "+consumeCommandLine(cc, s.cfg.against, 0, 0))
		c, err := runConsume(s.ctx, cc, "samsa", s.progress)
		if err != nil {
			s.note("samsa consume: %v", err)
		}
		cSamsas = append(cSamsas, s.recordConsume("consume", "samsa", i, c))
		s.dropTopic(cfg.topic)

		if nc, ok := s.nullConsume(c, topic, i); ok {
			cNulls = append(cNulls, s.recordConsume("consume", "null", i, nc))
		}
	}
	s.res.Produce1K = produceTriple{Samsa: medianRun(samsas, produceMBs), Null: medianRun(nulls, produceMBs), Kfake: medianPtr(kfakes, produceMBs)}
	s.res.Consume = consumeTriple{Samsa: medianRun(cSamsas, consumeMBs), Null: medianRun(cNulls, consumeMBs), Kfake: medianPtr(cKfakes, consumeMBs)}
}

// kfakeProduceConsume produces cfg to a fresh in-process kfake and reads it back.
func (s *suiteRun) kfakeProduceConsume(cfg produceConfig, repeat int) (ProduceResult, ConsumeResult, bool) {
	tgt, err := startTarget(againstKfake, nil, nullOptions{partitions: s.cfg.partitions})
	if err != nil {
		s.note("kfake: %v", err)
		return ProduceResult{}, ConsumeResult{}, false
	}
	defer tgt.close()
	cfg.brokers = tgt.brokers
	s.command(repeat, "kfake: "+produceCommandLine(cfg, againstKfake))
	s.flush()
	p, err := runProduce(s.ctx, cfg, "kfake", s.progress)
	if err != nil {
		s.note("kfake produce: %v", err)
	}
	cc := defaultConsumeConfig()
	cc.brokers, cc.topic = tgt.brokers, cfg.topic
	c, err := runConsume(s.ctx, cc, "kfake", s.progress)
	if err != nil {
		s.note("kfake consume: %v", err)
	}
	return p, c, true
}

// nullConsume runs the fetch loop against a null broker serving batches of the size
// Samsa served, and as many records.
func (s *suiteRun) nullConsume(samsa ConsumeResult, topic string, repeat int) (ConsumeResult, bool) {
	batchBytes := 64 << 10
	if samsa.Batches > 0 {
		batchBytes = int(samsa.Bytes / samsa.Batches)
	}
	records := samsa.Records
	if records == 0 {
		records = s.sizes.records1K
	}
	tgt, err := startTarget(againstNull, nil, nullOptions{partitions: s.cfg.partitions, recordSize: 1024, batchBytes: batchBytes})
	if err != nil {
		s.note("null consume: %v", err)
		return ConsumeResult{}, false
	}
	defer tgt.close()
	if err := createTopic(s.ctx, tgt.brokers, topic, s.cfg.partitions); err != nil {
		s.note("null consume: %v", err)
		return ConsumeResult{}, false
	}
	cc := defaultConsumeConfig()
	cc.brokers, cc.topic, cc.records = tgt.brokers, topic, records
	s.command(repeat, "null: "+consumeCommandLine(cc, againstNull, batchBytes, s.cfg.partitions))
	nc, err := runConsume(s.ctx, cc, "null", s.progress)
	if err != nil {
		s.note("null consume: %v", err)
	}
	return nc, true
}

// produce100: the same settings with 100-byte records.
func (s *suiteRun) produce100() {
	const scenario = "produce 100 B"
	n := s.sizes.records100
	var nulls, kfakes, samsas []ProduceResult
	for i := range s.cfg.repeat {
		topic := s.topic("100b", i)
		nulls = append(nulls, s.recordProduce(scenario, "null", i, s.produceOn(againstNull, s.baseProduce(topic, 100, n), "null", i)))
		if !s.cfg.noKfake {
			kfakes = append(kfakes, s.recordProduce(scenario, "kfake", i, s.produceOn(againstKfake, s.baseProduce(topic, 100, n), "kfake", i)))
		}
		samsas = append(samsas, s.recordProduce(scenario, "samsa", i, s.produceOn(s.cfg.against, s.baseProduce(topic, 100, n), "samsa", i)))
		s.dropTopic(topic)
	}
	s.res.Produce100 = produceTriple{Samsa: medianRun(samsas, produceRecords), Null: medianRun(nulls, produceRecords), Kfake: medianPtr(kfakes, produceRecords)}
}

// latency: Samsa's maximum at linger 1 ms, then p99 at half that rate against Samsa,
// the null broker and kfake.
func (s *suiteRun) latency() {
	var maxes []ProduceResult
	for i := range s.cfg.repeat {
		topic := s.topic("lat-max", i)
		cfg := s.baseProduce(topic, 1024, s.sizes.latencyMaxRecs)
		cfg.linger = time.Millisecond
		maxes = append(maxes, s.recordProduce("max at linger 1 ms", "samsa", i, s.produceOn(s.cfg.against, cfg, "samsa max, linger 1ms", i)))
		s.dropTopic(topic)
	}
	s.res.LatencyMax = medianRun(maxes, produceRecords)
	if s.res.LatencyMax.RecordsPerSec <= 0 {
		s.note("latency: no maximum throughput measured; skipping the half-load runs")
		return
	}
	rate := s.res.LatencyMax.RecordsPerSec / 2
	s.res.LatencyRate = rate
	records := int64(rate * s.sizes.latencySeconds)
	records = max(min(records, s.sizes.latencyMaxBytes/1024), 1000)
	const scenario = "half load, linger 1 ms"
	var nulls, kfakes, samsas []ProduceResult
	for i := range s.cfg.repeat {
		topic := s.topic("lat", i)
		run := func(against, label string) ProduceResult {
			c := s.baseProduce(topic, 1024, records)
			c.linger = time.Millisecond
			c.rate = rate
			return s.recordProduce(scenario, strings.Fields(label)[0], i, s.produceOn(against, c, label, i))
		}
		nulls = append(nulls, run(againstNull, "null at half load"))
		if !s.cfg.noKfake {
			kfakes = append(kfakes, run(againstKfake, "kfake at half load"))
		}
		samsas = append(samsas, run(s.cfg.against, "samsa at half load"))
		s.dropTopic(topic)
	}
	s.res.Latency = produceTriple{Samsa: medianRun(samsas, produceP99), Null: medianRun(nulls, produceP99), Kfake: medianPtr(kfakes, produceP99)}
}

func produceCommandLine(c produceConfig, against string) string {
	line := fmt.Sprintf("samsa bench produce --against %s --topic %s --record-size %d --records %d --batch-max-bytes %s --linger %s --acks %s --idempotent=%t --compression %s --partitions %d --producers %d",
		against, c.topic, c.recordSize, c.records, formatBytes(int64(c.batchMaxBytes)), c.linger, c.acks, c.idempotent, c.compression, c.partitions, c.producers)
	if c.rate > 0 {
		line += fmt.Sprintf(" --rate %.0f", c.rate)
	}
	return line
}

func consumeCommandLine(c consumeConfig, against string, batchBytes int, partitions int32) string {
	line := fmt.Sprintf("samsa bench consume --against %s --topic %s --fetch-max-bytes %s --partition-max-bytes %s",
		against, c.topic, formatBytes(int64(c.fetchMaxBytes)), formatBytes(int64(c.partitionMaxBytes)))
	if c.records > 0 {
		line += fmt.Sprintf(" --records %d", c.records)
	}
	if batchBytes > 0 {
		line += fmt.Sprintf(" --record-size 1024 --batch-bytes %d --partitions %d", batchBytes, partitions)
	}
	return line
}

func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "**not met**"
}

// markdown renders r as the tables docs/performance.md quotes.
func (r *SuiteResult) markdown() string {
	var b strings.Builder
	mode := "full"
	if r.Quick {
		mode = "quick (smoke: figures are not meaningful)"
	}
	fmt.Fprintf(&b, "### Suite run %s against %s (%s)\n\n", r.Started.Format(time.RFC3339), r.Against, mode)
	fmt.Fprintf(&b, "%d CPUs, %s %s/%s, %d partition(s) per topic, %.0f s in all. MB = 2^20 bytes.",
		r.CPUs, runtime.Version(), runtime.GOOS, runtime.GOARCH, r.Partitions, r.ElapsedSeconds)
	if r.Repeat > 1 {
		fmt.Fprintf(&b, " Every figure is the median of %d interleaved runs (all runs are listed below).", r.Repeat)
	}
	if r.DropCaches {
		b.WriteString(" The page cache was dropped once before the runs (--drop-caches).")
	}
	b.WriteString("\n\n")

	spread := func(f func(LimitsResult) float64) string {
		if len(r.LimitsRuns) < 2 {
			return ""
		}
		lo, hi := f(r.LimitsRuns[0]), f(r.LimitsRuns[0])
		for _, l := range r.LimitsRuns[1:] {
			lo, hi = min(lo, f(l)), max(hi, f(l))
		}
		return fmt.Sprintf(" (%.0f–%.0f)", lo, hi)
	}
	b.WriteString("| machine limit (same run) | MB/s |\n|---|---:|\n")
	fmt.Fprintf(&b, "| loopback TCP → file (read/write sink), %s | %.0f%s |\n", formatBytes(r.Limits.Bytes), r.Limits.SinkMBPerSec,
		spread(func(l LimitsResult) float64 { return l.SinkMBPerSec }))
	fmt.Fprintf(&b, "| file → loopback TCP (sendfile), %s | %.0f%s |\n\n", formatBytes(r.Limits.Bytes), r.Limits.SendfileMBPerSec,
		spread(func(l LimitsResult) float64 { return l.SendfileMBPerSec }))

	b.WriteString("| scenario | Samsa | null broker (client ceiling) | kfake | Samsa / null | target | | Samsa / kfake |\n")
	b.WriteString("|---|---:|---:|---:|---:|---|---|---:|\n")
	kp := func(p *ProduceResult, f func(ProduceResult) float64) float64 {
		if p == nil {
			return 0
		}
		return f(*p)
	}
	mbs := func(p ProduceResult) float64 { return p.MBPerSec }
	recs := func(p ProduceResult) float64 { return p.RecordsPerSec }
	p99 := func(p ProduceResult) float64 { return p.Latency.P99Ms }

	p1 := r.Produce1K
	rr := ratio(p1.Samsa.MBPerSec, p1.Null.MBPerSec)
	fmt.Fprintf(&b, "| produce 1 KiB, acks=all, idempotent, none, linger 5 ms, batch ≤ 1 MiB (MB/s) | %.0f | %.0f | %.0f | %.2f | ≥ %.2f | %s | %.2f |\n",
		p1.Samsa.MBPerSec, p1.Null.MBPerSec, kp(p1.Kfake, mbs), rr, targetProduceVsNull, verdict(rr >= targetProduceVsNull),
		ratio(p1.Samsa.MBPerSec, kp(p1.Kfake, mbs)))
	c := r.Consume
	var kc float64
	if c.Kfake != nil {
		kc = c.Kfake.MBPerSec
	}
	rr = ratio(c.Samsa.MBPerSec, c.Null.MBPerSec)
	fmt.Fprintf(&b, "| consume, raw fetch loop, no decoding (MB/s of batches) | %.0f | %.0f | %.0f | %.2f | ≥ %.2f | %s | %.2f |\n",
		c.Samsa.MBPerSec, c.Null.MBPerSec, kc, rr, targetConsumeVsNull, verdict(rr >= targetConsumeVsNull), ratio(c.Samsa.MBPerSec, kc))
	p := r.Produce100
	rr = ratio(p.Samsa.RecordsPerSec, p.Null.RecordsPerSec)
	fmt.Fprintf(&b, "| produce 100 B, same settings (records/s) | %.0f | %.0f | %.0f | %.2f | ≥ %.2f | %s | %.2f |\n",
		p.Samsa.RecordsPerSec, p.Null.RecordsPerSec, kp(p.Kfake, recs), rr, targetSmallVsNull, verdict(rr >= targetSmallVsNull),
		ratio(p.Samsa.RecordsPerSec, kp(p.Kfake, recs)))
	l := r.Latency
	rr = ratio(l.Samsa.Latency.P99Ms, l.Null.Latency.P99Ms)
	fmt.Fprintf(&b, "| p99 produce latency at %.0f records/s = half of Samsa's max, 1 KiB, linger 1 ms (ms) | %.2f | %.2f | %.2f | %.2f | ≤ %.1f | %s | %.2f |\n\n",
		r.LatencyRate, l.Samsa.Latency.P99Ms, l.Null.Latency.P99Ms, kp(l.Kfake, p99), rr, targetLatencyVsNull,
		verdict(rr > 0 && rr <= targetLatencyVsNull), ratio(l.Samsa.Latency.P99Ms, kp(l.Kfake, p99)))
	kr := ratio(p1.Samsa.MBPerSec, kp(p1.Kfake, mbs))
	fmt.Fprintf(&b, "Samsa vs kfake (produce 1 KiB, same tool, same run): %.2f× — target ≥ %.1f×: %s. ", kr, targetProduceVsKfake, verdict(kr >= targetProduceVsKfake))
	fmt.Fprintf(&b, "Samsa's maximum at linger 1 ms: %.0f records/s (%.0f MB/s).\n\n", r.LatencyMax.RecordsPerSec, r.LatencyMax.MBPerSec)

	b.WriteString("| run | # | records | s | records/s | MB/s | p50 ms | p99 ms | p99.9 ms | errors |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, run := range r.Runs {
		if p := run.Produce; p != nil {
			fmt.Fprintf(&b, "| %s → %s | %d | %d | %.2f | %.0f | %.1f | %.2f | %.2f | %.2f | %d |\n", run.Scenario, run.Target, run.Repeat+1,
				p.Records, p.Seconds, p.RecordsPerSec, p.MBPerSec, p.Latency.P50Ms, p.Latency.P99Ms, p.Latency.P999Ms, p.Errors)
		}
	}
	b.WriteString("\n| consume run | # | records | batches | fetches | s | records/s | MB/s |\n|---|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, run := range r.Runs {
		if c := run.Consume; c != nil {
			fmt.Fprintf(&b, "| %s | %d | %d | %d | %d | %.2f | %.0f | %.1f |\n", run.Target, run.Repeat+1,
				c.Records, c.Batches, c.Fetches, c.Seconds, c.RecordsPerSec, c.MBPerSec)
		}
	}
	b.WriteString("\nCommands (equivalent single runs):\n\n```\n")
	for _, cmd := range r.Commands {
		b.WriteString(cmd + "\n")
	}
	b.WriteString("```\n")
	if len(r.Notes) > 0 {
		b.WriteString("\nNotes:\n\n")
		for _, n := range r.Notes {
			b.WriteString("- " + n + "\n")
		}
	}
	return b.String()
}

func newSuiteCommand(c *common) *cobra.Command {
	cfg := suiteConfig{dir: os.TempDir(), partitions: 1, scale: 1}
	cmd := &cobra.Command{
		Use:   "suite",
		Short: "Run issue 4's benchmark scenarios and write a markdown table with ratios to the limits",
		Long: `suite measures, in one run: the machine's limits (TCP sink, sendfile); produce of
1 KiB records (acks=all, idempotent, no compression, linger 5 ms, batches ≤ 1 MiB)
against the broker under test, the null broker and kfake; the raw consume loop
against the broker and the null broker; 100-byte records; and p99 produce latency at
half of the broker's own maximum (linger 1 ms) against the broker and the null broker
at the same rate. It writes a markdown report with every ratio next to its target.
The full run writes about 1.4 GB; --quick is a smoke run of a few seconds.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := signalContext(cmd)
			defer cancel()
			if cfg.against == "" {
				cfg.against = c.brokers
			}
			res, err := runSuite(ctx, cfg, cmd.ErrOrStderr())
			if res == nil {
				return err
			}
			md := res.markdown()
			if cfg.out != "" {
				if werr := os.WriteFile(cfg.out, []byte(md), 0o644); werr != nil {
					return werr
				}
			}
			if c.output == "json" {
				if jerr := writeJSON(cmd.OutOrStdout(), res); jerr != nil {
					return jerr
				}
			} else {
				fmt.Fprint(cmd.OutOrStdout(), md)
			}
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.against, "against", "", "address of the broker under test (default: -b)")
	f.StringVar(&cfg.out, "out", "", "write the markdown report to this file")
	f.StringVar(&cfg.dir, "dir", cfg.dir, "directory for the limits scratch file (the broker's disk)")
	f.BoolVar(&cfg.quick, "quick", false, "smoke run of a few seconds")
	f.Int32Var(&cfg.partitions, "partitions", cfg.partitions, "partitions per topic")
	f.Float64Var(&cfg.scale, "scale", cfg.scale, "multiply the data volumes of the full run")
	f.IntVar(&cfg.repeat, "repeat", 1, "run every scenario this many times, interleaved, and report medians")
	f.BoolVar(&cfg.noKfake, "no-kfake", false, "skip the kfake runs")
	f.BoolVar(&cfg.dropCaches, "drop-caches", false,
		"drop the machine's clean page cache once before the runs (Linux, root; affects every process): "+
			"where a full page cache makes every write reclaim first, this starts the broker and the limits from the same state")
	return cmd
}
