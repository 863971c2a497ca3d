package bench

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
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
	noPrime    bool
	// shapes are the produce shapes measured against the null broker of the same
	// shape (--shapes); brokerMetrics is the broker's Prometheus URL, for its CPU,
	// GC share and memory in those runs (--broker-metrics).
	shapes        []produceShape
	brokerMetrics string
}

// suiteSizes are the data volumes of one repetition of the suite; a full repetition
// writes about 2.3 GB to the broker's disk, at most 1 GB between two write-backs
// (dirty page cache above ~2 GB throttles writers here, and every run starts with the
// dirty pages written back).
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
		return suiteSizes{limitsBytes: 32 << 20, records1K: 5_000, records100: 20_000,
			latencyMaxRecs: 5_000, latencySeconds: 1, latencyMaxBytes: 5 << 20}
	}
	s := max(c.scale, 0.01)
	return suiteSizes{
		limitsBytes:     int64(float64(suiteDefaultLimitsMiB<<20) * s),
		records1K:       int64(1_000_000 * s),
		records100:      int64(5_000_000 * s),
		latencyMaxRecs:  int64(200_000 * s),
		latencySeconds:  5,
		latencyMaxBytes: int64(float64(200<<20) * s),
	}
}

// produceMedians holds one scenario's median runs against Samsa, the null broker (in a
// process of its own, as Samsa runs: the client's ceiling the targets are judged
// against), the null broker inside the bench process (for reference) and kfake.
type produceMedians struct {
	Samsa         ProduceResult  `json:"samsa"`
	Null          ProduceResult  `json:"null"`
	NullInProcess *ProduceResult `json:"null_in_process,omitempty"`
	Kfake         *ProduceResult `json:"kfake,omitempty"`
}

type consumeMedians struct {
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
	Primed         bool             `json:"primed"`
	CPUs           int              `json:"cpus"`
	Limits         LimitsResult     `json:"limits"`
	LimitsRuns     []LimitsResult   `json:"limits_runs"`
	Produce1K      produceMedians   `json:"produce_1k"`
	Consume        consumeMedians   `json:"consume"`
	Produce100     produceMedians   `json:"produce_100b"`
	LatencyMax     ProduceResult    `json:"latency_samsa_max"`
	LatencyRate    float64          `json:"latency_rate"`
	Latency        produceMedians   `json:"latency_at_half"`
	Shapes         []shapeResult    `json:"shapes"`
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
	// deferredDeletes: the broker was seen keeping deleted topics' files (noted once).
	deferredDeletes bool
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

// prepare readies the machine for a measured run that moves about n bytes: dirty
// pages are written back (flush), then the page cache is primed unless --no-prime,
// and what the priming left to the file system is written back too.
//
// Priming writes a scratch file of n bytes (plus a tenth) into --dir and deletes it.
// This VM hands freed memory back to its host (virtio-balloon free page reporting),
// and the first write to such a page costs a host fault: writing 400 MB into them
// runs at ~430 MB/s, into recently freed pages at 2.2–6.5 GB/s. Which pages a run
// gets depends on what ran before it, not on the program measured; after priming,
// every run — the file sink, Samsa, kfake and the null broker alike — writes into
// pages the host backs, as on a machine without a balloon.
func (s *suiteRun) prepare(n int64) {
	s.flush()
	if s.cfg.quick || s.cfg.noPrime {
		return
	}
	if err := primePageCache(s.cfg.dir, n+n/10); err != nil {
		s.note("priming the page cache: %v", err)
	}
	// Once more after the scratch file is gone: its writeback, started while it was
	// written, and the release of its blocks are the file system's work too, and left
	// to run they stalled every broker's writes for 0.3–1 s a second or two into the
	// run that followed.
	s.flush()
}

// primePageCache writes n bytes to a scratch file in dir and removes it.
func primePageCache(dir string, n int64) error {
	f, err := os.CreateTemp(dir, ".samsa-bench-prime-*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	buf := make([]byte, 1<<20)
	for n > 0 {
		w, err := f.Write(buf[:min(int64(len(buf)), n)])
		if err != nil {
			return err
		}
		n -= int64(w)
	}
	return nil
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

// produceOn runs cfg against a target ("null-process", "null", "kfake" or Samsa's
// address) as a child process; see runChild.
func (s *suiteRun) produceOn(against string, cfg produceConfig, label string, repeat int) ProduceResult {
	line := produceCommandLine(cfg, against)
	s.command(repeat, label+": "+line)
	s.prepare(cfg.records * int64(cfg.recordSize))
	var res ProduceResult
	if err := s.runChild(line, &res); err != nil {
		s.note("%s: %v", label, err)
	}
	return res
}

// consumeOn runs a consume command line as a child process.
func (s *suiteRun) consumeOn(line, label string, repeat int) ConsumeResult {
	s.command(repeat, label+": "+line)
	s.flush()
	var res ConsumeResult
	if err := s.runChild(line, &res); err != nil {
		s.note("%s: %v", label, err)
	}
	return res
}

// runChild runs one measured run — line is the printed `samsa bench …` command — in
// a fresh process of this binary, and decodes its JSON summary into out. Every run
// thus starts from the same state: runs inside one long-lived process slowed each
// other (a kfake run left the process with a gigabyte of heap, and the next clients
// measured 40 % less), and the figures are exactly what the printed command gives.
func (s *suiteRun) runChild(line string, out any) error {
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	args := append(strings.Fields(strings.TrimPrefix(line, "samsa ")), "-o", "json")
	cmd := exec.CommandContext(s.ctx, exe, args...)
	cmd.Env = append(os.Environ(), childEnv+"=1")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if s.progress != nil {
		cmd.Stderr = io.MultiWriter(&stderr, s.progress)
	}
	stdout, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("%w: %s", err, strings.TrimSpace(lastLine(stderr.String())))
	}
	return json.Unmarshal(stdout, out)
}

// lastLine returns the last non-empty line of text.
func lastLine(text string) string {
	lines := strings.Split(strings.TrimSpace(text), "\n")
	return lines[len(lines)-1]
}

// dropTopic deletes a scenario's topic on the broker under test and writes dirty
// pages back. Every measured run also starts with flushDirtyPages: on this machine
// page-cache writes slow down long before the ~2 GB dirty limit throttles them, so
// each run, the limits included, starts from a page cache without dirty pages.
//
// The broker removes a deleted topic's files after log.segment.delete.delay.ms; left
// to happen in a later run, that removal (with ext4's discard, seconds of block
// freeing) stalled the later run's writes for hundreds of milliseconds. So, when
// --dir is the broker's log directory, dropTopic waits for the files to be gone, and
// says once that the broker should run with log.segment.delete.delay.ms=0 when they
// are still there after a few seconds.
func (s *suiteRun) dropTopic(topic string) {
	if err := deleteTopic(s.ctx, s.samsa, topic); err != nil {
		s.note("deleting %s on Samsa (to free page cache): %v", topic, err)
	}
	if left := waitTopicFilesGone(s.cfg.dir, topic, 5*time.Second); left != "" && !s.deferredDeletes {
		s.deferredDeletes = true
		s.note("the files of deleted topics stay in %s for a while (%s): their removal will fall into later runs; "+
			"start the broker with --override log.segment.delete.delay.ms=0", s.cfg.dir, left)
	}
	s.flush()
}

// waitTopicFilesGone waits up to d until dir holds no partition directory of topic
// (<topic>-<n>, or renamed for removal: <topic>-<n>.<id>-delete), and returns one
// still there ("" when none).
func waitTopicFilesGone(dir, topic string, d time.Duration) string {
	deadline := time.Now().Add(d)
	for {
		left := ""
		ents, _ := os.ReadDir(dir)
		for _, e := range ents {
			rest, ok := strings.CutPrefix(e.Name(), topic+"-")
			if !ok {
				continue
			}
			n, _, _ := strings.Cut(rest, ".")
			if _, err := strconv.Atoi(n); err == nil {
				left = e.Name()
				break
			}
		}
		if left == "" || time.Now().After(deadline) {
			return left
		}
		time.Sleep(50 * time.Millisecond)
	}
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
			Partitions: cfg.partitions, Repeat: cfg.repeat, DropCaches: cfg.dropCaches, CPUs: runtime.NumCPU(),
			Primed: !cfg.quick && !cfg.noPrime},
	}
	started := time.Now()
	if cfg.dropCaches {
		if err := dropPageCache(); err != nil {
			s.note("--drop-caches: %v", err)
		}
	}

	for range cfg.repeat {
		s.prepare(s.sizes.limitsBytes)
		lim, err := runLimits(ctx, cfg.dir, s.sizes.limitsBytes, progress)
		if err != nil {
			s.note("limits: %v", err)
		}
		s.res.LimitsRuns = append(s.res.LimitsRuns, lim)
	}
	s.res.Limits = LimitsResult{
		Bytes:                  s.sizes.limitsBytes,
		SinkMBPerSec:           medianOf(s.res.LimitsRuns, func(l LimitsResult) float64 { return l.SinkMBPerSec }),
		SendfileMBPerSec:       medianOf(s.res.LimitsRuns, func(l LimitsResult) float64 { return l.SendfileMBPerSec }),
		SendfileRoundsMBPerSec: medianOf(s.res.LimitsRuns, func(l LimitsResult) float64 { return l.SendfileRoundsMBPerSec }),
		CopyRoundsMBPerSec:     medianOf(s.res.LimitsRuns, func(l LimitsResult) float64 { return l.CopyRoundsMBPerSec }),
	}
	s.res.Commands = append(s.res.Commands, fmt.Sprintf("limits: samsa bench limits --dir %s --size %s", cfg.dir, formatBytes(s.sizes.limitsBytes)))

	s.produceAndConsume1K()
	s.produce100()
	s.latency()
	s.shapes()
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
	var nulls, inProcs, kfakes, samsas []ProduceResult
	var cNulls, cKfakes, cSamsas []ConsumeResult
	for i := range s.cfg.repeat {
		topic := s.topic("1k", i)
		nulls = append(nulls, s.recordProduce(scenario, "null", i, s.produceOn(againstNullProcess, s.baseProduce(topic, 1024, n), "null", i)))
		inProcs = append(inProcs, s.recordProduce(scenario, "null in-process", i, s.produceOn(againstNull, s.baseProduce(topic, 1024, n), "null in-process", i)))

		if !s.cfg.noKfake {
			p, c := s.kfakeProduceConsume(s.baseProduce(topic, 1024, n), i)
			kfakes = append(kfakes, s.recordProduce(scenario, "kfake", i, p))
			cKfakes = append(cKfakes, s.recordConsume("consume", "kfake", i, c))
		}

		cfg := s.baseProduce(topic, 1024, n)
		samsas = append(samsas, s.recordProduce(scenario, "samsa", i, s.produceOn(s.cfg.against, cfg, "samsa", i)))

		cc := defaultConsumeConfig()
		cc.topic = cfg.topic
		c := s.consumeOn(consumeCommandLine(cc, s.cfg.against, 0, 0), "samsa", i)
		cSamsas = append(cSamsas, s.recordConsume("consume", "samsa", i, c))
		s.dropTopic(cfg.topic)

		cNulls = append(cNulls, s.recordConsume("consume", "null", i, s.nullConsume(c, topic, i)))
	}
	s.res.Produce1K = produceMedians{Samsa: medianRun(samsas, produceMBs), Null: medianRun(nulls, produceMBs),
		NullInProcess: medianPtr(inProcs, produceMBs), Kfake: medianPtr(kfakes, produceMBs)}
	s.res.Consume = consumeMedians{Samsa: medianRun(cSamsas, consumeMBs), Null: medianRun(cNulls, consumeMBs), Kfake: medianPtr(cKfakes, consumeMBs)}
}

// kfakeProduceConsume produces cfg to a fresh kfake, then reads as many records
// back from another (the consume command fills it first).
func (s *suiteRun) kfakeProduceConsume(cfg produceConfig, repeat int) (ProduceResult, ConsumeResult) {
	p := s.produceOn(againstKfake, cfg, "kfake", repeat)
	cc := defaultConsumeConfig()
	cc.topic, cc.records = cfg.topic, cfg.records
	line := consumeCommandLine(cc, againstKfake, 0, 0) + fmt.Sprintf(" --record-size %d --partitions %d", cfg.recordSize, cfg.partitions)
	return p, s.consumeOn(line, "kfake", repeat)
}

// nullConsume runs the fetch loop against a null broker serving batches of the size
// Samsa served, and as many records.
func (s *suiteRun) nullConsume(samsa ConsumeResult, topic string, repeat int) ConsumeResult {
	batchBytes := 64 << 10
	if samsa.Batches > 0 {
		batchBytes = int(samsa.Bytes / samsa.Batches)
	}
	records := samsa.Records
	if records == 0 {
		records = s.sizes.records1K
	}
	cc := defaultConsumeConfig()
	cc.topic, cc.records = topic, records
	return s.consumeOn(consumeCommandLine(cc, againstNullProcess, batchBytes, s.cfg.partitions), "null", repeat)
}

// produce100: the same settings with 100-byte records.
func (s *suiteRun) produce100() {
	const scenario = "produce 100 B"
	n := s.sizes.records100
	var nulls, inProcs, kfakes, samsas []ProduceResult
	for i := range s.cfg.repeat {
		topic := s.topic("100b", i)
		nulls = append(nulls, s.recordProduce(scenario, "null", i, s.produceOn(againstNullProcess, s.baseProduce(topic, 100, n), "null", i)))
		inProcs = append(inProcs, s.recordProduce(scenario, "null in-process", i, s.produceOn(againstNull, s.baseProduce(topic, 100, n), "null in-process", i)))
		if !s.cfg.noKfake {
			kfakes = append(kfakes, s.recordProduce(scenario, "kfake", i, s.produceOn(againstKfake, s.baseProduce(topic, 100, n), "kfake", i)))
		}
		samsas = append(samsas, s.recordProduce(scenario, "samsa", i, s.produceOn(s.cfg.against, s.baseProduce(topic, 100, n), "samsa", i)))
		s.dropTopic(topic)
	}
	s.res.Produce100 = produceMedians{Samsa: medianRun(samsas, produceRecords), Null: medianRun(nulls, produceRecords),
		NullInProcess: medianPtr(inProcs, produceRecords), Kfake: medianPtr(kfakes, produceRecords)}
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
	var nulls, inProcs, kfakes, samsas []ProduceResult
	for i := range s.cfg.repeat {
		topic := s.topic("lat", i)
		run := func(against, target string) ProduceResult {
			c := s.baseProduce(topic, 1024, records)
			c.linger = time.Millisecond
			c.rate = rate
			return s.recordProduce(scenario, target, i, s.produceOn(against, c, target+" at half load", i))
		}
		nulls = append(nulls, run(againstNullProcess, "null"))
		inProcs = append(inProcs, run(againstNull, "null in-process"))
		if !s.cfg.noKfake {
			kfakes = append(kfakes, run(againstKfake, "kfake"))
		}
		samsas = append(samsas, run(s.cfg.against, "samsa"))
		s.dropTopic(topic)
	}
	s.res.Latency = produceMedians{Samsa: medianRun(samsas, produceP99), Null: medianRun(nulls, produceP99),
		NullInProcess: medianPtr(inProcs, produceP99), Kfake: medianPtr(kfakes, produceP99)}
}

func produceCommandLine(c produceConfig, against string) string {
	line := fmt.Sprintf("samsa bench produce --against %s --topic %s --record-size %d --records %d --batch-max-bytes %s --linger %s --acks %s --idempotent=%t --compression %s --partitions %d --producers %d",
		against, c.topic, c.recordSize, c.records, formatBytes(int64(c.batchMaxBytes)), c.linger, c.acks, c.idempotent, c.compression, c.partitions, c.producers)
	if c.rate > 0 {
		line += fmt.Sprintf(" --rate %.0f", c.rate)
	}
	if c.brokerMetrics != "" {
		line += " --broker-metrics " + c.brokerMetrics
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

// unsteadyWrites is the ratio between the fastest and the slowest repetition of the
// TCP → file limit past which the report warns that the machine's writes changed
// speed during the run (a VM handing page-cache memory back to its host does that).
const unsteadyWrites = 1.5

// limitsRange returns the lowest and highest of f over the repetitions of the limits.
func (r *SuiteResult) limitsRange(f func(LimitsResult) float64) (lo, hi float64) {
	for i, l := range r.LimitsRuns {
		if v := f(l); i == 0 {
			lo, hi = v, v
		} else {
			lo, hi = min(lo, v), max(hi, v)
		}
	}
	return lo, hi
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
	if r.Primed {
		b.WriteString(" Before every run the page cache was primed with a scratch file of the run's size (see `prepare`).")
	}
	if r.DropCaches {
		b.WriteString(" The page cache was dropped once before the runs (--drop-caches).")
	}
	b.WriteString("\n\n")

	sink := func(l LimitsResult) float64 { return l.SinkMBPerSec }
	spread := func(f func(LimitsResult) float64) string {
		if len(r.LimitsRuns) < 2 {
			return ""
		}
		lo, hi := r.limitsRange(f)
		return fmt.Sprintf(" (%.0f–%.0f)", lo, hi)
	}
	b.WriteString("| machine limit (same run) | MB/s |\n|---|---:|\n")
	fmt.Fprintf(&b, "| loopback TCP → file (read/write sink), %s | %.0f%s |\n", formatBytes(r.Limits.Bytes), r.Limits.SinkMBPerSec,
		spread(sink))
	fmt.Fprintf(&b, "| file → loopback TCP (sendfile), %s | %.0f%s |\n", formatBytes(r.Limits.Bytes), r.Limits.SendfileMBPerSec,
		spread(func(l LimitsResult) float64 { return l.SendfileMBPerSec }))
	fmt.Fprintf(&b, "| file → loopback TCP, %s a request (sendfile, as the consume loop's fetches) | %.0f%s |\n", formatBytes(limitsBuffer),
		r.Limits.SendfileRoundsMBPerSec, spread(func(l LimitsResult) float64 { return l.SendfileRoundsMBPerSec }))
	fmt.Fprintf(&b, "| file → loopback TCP, %s a request (read and write: copied) | %.0f%s |\n\n", formatBytes(limitsBuffer),
		r.Limits.CopyRoundsMBPerSec, spread(func(l LimitsResult) float64 { return l.CopyRoundsMBPerSec }))
	if lo, hi := r.limitsRange(sink); len(r.LimitsRuns) > 1 && lo > 0 && hi > unsteadyWrites*lo {
		fmt.Fprintf(&b, "**The machine's writes changed speed during this run**: TCP → file %.0f–%.0f MB/s between repetitions. "+
			"Every figure that writes to the page cache (Samsa's, not the null broker's) depends on which state a run met; "+
			"compare builds in alternating runs rather than across suite runs.\n\n", lo, hi)
	}

	b.WriteString("| scenario | Samsa | null broker, own process (client ceiling) | Samsa / null | target | | null broker in the bench process | Samsa / in-process null | kfake | Samsa / kfake |\n")
	b.WriteString("|---|---:|---:|---:|---|---|---:|---:|---:|---:|\n")
	kp := func(p *ProduceResult, f func(ProduceResult) float64) float64 {
		if p == nil {
			return 0
		}
		return f(*p)
	}
	mbs := func(p ProduceResult) float64 { return p.MBPerSec }
	recs := func(p ProduceResult) float64 { return p.RecordsPerSec }
	p99 := func(p ProduceResult) float64 { return p.Latency.P99Ms }
	// row writes one scenario: Samsa, the ceiling and the target's verdict, then the
	// reference figures (0 when not measured).
	row := func(name, format string, samsa, null float64, target string, ok bool, inProc, kfake float64) {
		opt := func(v float64) (string, string) {
			if v == 0 {
				return "–", "–"
			}
			return fmt.Sprintf(format, v), fmt.Sprintf("%.2f", ratio(samsa, v))
		}
		ip, ipr := opt(inProc)
		kf, kfr := opt(kfake)
		fmt.Fprintf(&b, "| %s | "+format+" | "+format+" | %.2f | %s | %s | %s | %s | %s | %s |\n",
			name, samsa, null, ratio(samsa, null), target, verdict(ok), ip, ipr, kf, kfr)
	}

	p1 := r.Produce1K
	rr := ratio(p1.Samsa.MBPerSec, p1.Null.MBPerSec)
	row("produce 1 KiB, acks=all, idempotent, none, linger 5 ms, batch ≤ 1 MiB (MB/s)", "%.0f", p1.Samsa.MBPerSec, p1.Null.MBPerSec,
		fmt.Sprintf("≥ %.2f", targetProduceVsNull), rr >= targetProduceVsNull, kp(p1.NullInProcess, mbs), kp(p1.Kfake, mbs))
	c := r.Consume
	var kc float64
	if c.Kfake != nil {
		kc = c.Kfake.MBPerSec
	}
	rr = ratio(c.Samsa.MBPerSec, c.Null.MBPerSec)
	row("consume, raw fetch loop, no decoding (MB/s of batches)", "%.0f", c.Samsa.MBPerSec, c.Null.MBPerSec,
		fmt.Sprintf("≥ %.2f", targetConsumeVsNull), rr >= targetConsumeVsNull, 0, kc)
	p := r.Produce100
	rr = ratio(p.Samsa.RecordsPerSec, p.Null.RecordsPerSec)
	row("produce 100 B, same settings (records/s)", "%.0f", p.Samsa.RecordsPerSec, p.Null.RecordsPerSec,
		fmt.Sprintf("≥ %.2f", targetSmallVsNull), rr >= targetSmallVsNull, kp(p.NullInProcess, recs), kp(p.Kfake, recs))
	l := r.Latency
	rr = ratio(l.Samsa.Latency.P99Ms, l.Null.Latency.P99Ms)
	row(fmt.Sprintf("p99 produce latency at %.0f records/s = half of Samsa's max, 1 KiB, linger 1 ms (ms)", r.LatencyRate), "%.2f",
		l.Samsa.Latency.P99Ms, l.Null.Latency.P99Ms, fmt.Sprintf("≤ %.1f", targetLatencyVsNull), rr > 0 && rr <= targetLatencyVsNull,
		kp(l.NullInProcess, p99), kp(l.Kfake, p99))
	b.WriteString("\n")
	r.shapesMarkdown(&b)
	kr := ratio(p1.Samsa.MBPerSec, kp(p1.Kfake, mbs))
	if p1.Kfake != nil {
		fmt.Fprintf(&b, "Samsa vs kfake (produce 1 KiB, same tool, same run): %.2f× — target ≥ %.1f×: %s. ", kr, targetProduceVsKfake, verdict(kr >= targetProduceVsKfake))
	}
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
	shapes := defaultShapes
	cmd := &cobra.Command{
		Use:   "suite",
		Short: "Run issue 4's benchmark scenarios and write a markdown table with ratios to the limits",
		Long: `suite measures, in one run: the machine's limits (TCP sink, sendfile); produce of
1 KiB records (acks=all, idempotent, no compression, linger 5 ms, batches ≤ 1 MiB)
against the broker under test, the null broker (the client's ceiling, in a process of
its own as the broker is; also inside the bench process, for reference) and kfake;
the raw consume loop
against the broker and the null broker; 100-byte records; and p99 produce latency at
half of the broker's own maximum (linger 1 ms) against the broker and the null broker
at the same rate; then the produce shapes users run (--shapes: 1, 6, 64 and 1,000
partitions, 4 producers on 6 partitions, 100-byte records on 6 partitions), each
against a null broker of the same shape, with the broker's CPU per MB, GC share and
peak memory when --broker-metrics names its metrics.listener. It writes a markdown
report with every ratio next to its target.
One repetition writes about 2.3 GB (and primes the page cache with as much again);
--quick is a smoke run of a few seconds. Give --dir the broker's log directory and
start the broker with log.segment.delete.delay.ms=0: the suite then waits for each
deleted topic's files to go, instead of letting their removal stall a later run.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := signalContext(cmd)
			defer cancel()
			if cfg.against == "" {
				cfg.against = c.brokers
			}
			var err error
			if cfg.shapes, err = parseShapes(shapes); err != nil {
				return err
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
	f.StringVar(&shapes, "shapes", shapes,
		"produce shapes measured against the null broker of the same shape: P partitions, PxN with N producers, "+
			"a size prefix for other records than 1 KiB (100b:6)")
	f.StringVar(&cfg.brokerMetrics, "broker-metrics", "",
		"the broker's Prometheus URL (metrics.listener): report its CPU per MB, GC share and peak memory in the shape runs")
	f.BoolVar(&cfg.noPrime, "no-prime", false,
		"do not prime the page cache before each run (see performance.md: on a VM that hands freed memory to its host, "+
			"the first write to a page costs a host fault)")
	f.BoolVar(&cfg.dropCaches, "drop-caches", false,
		"drop the machine's clean page cache once before the runs (Linux, root; affects every process): "+
			"where a full page cache makes every write reclaim first, this starts the broker and the limits from the same state")
	return cmd
}
