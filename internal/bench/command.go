package bench

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/samsa-streaming/samsa/internal/cli"
	"github.com/samsa-streaming/samsa/internal/record"
)

// Defaults for -b, shared with the other client commands.
const (
	defaultBrokers = "127.0.0.1:9092"
	brokersEnv     = "SAMSA_BROKERS"
)

// quick-run sizes (smoke runs of a few seconds).
const (
	quickRecords  = 20_000
	quickDuration = 3 * time.Second
)

// common holds the flags every bench subcommand shares.
type common struct {
	brokers string
	output  string
	sec     cli.ClientSecurity // TLS and SASL for -b / --against ADDR
}

// security returns the TLS and SASL options for a target: the null-tls target's
// own, else the security flags' for a real cluster.
func (c *common) security(tgt *target) ([]kgo.Opt, error) {
	if tgt.security != nil {
		return tgt.security, nil
	}
	switch tgt.name {
	case againstNull, againstNullProcess, againstKfake:
		return nil, nil
	}
	return c.sec.Opts()
}

func (c *common) validate() error {
	if c.output != "text" && c.output != "json" {
		return fmt.Errorf("%w: --output must be text or json, not %q", ErrBadFlag, c.output)
	}
	return nil
}

// NewCommand returns the `bench` command: produce, consume, null-broker, limits and
// suite.
func NewCommand() *cobra.Command {
	c := &common{}
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Benchmark a Kafka-compatible cluster against the machine's and the client's limits",
		Long: `bench measures produce and consume throughput and produce latency with the
franz-go client, in the spirit of kafka-producer-perf-test, and measures in the same
run what bounds them: the machine (a TCP-to-file sink and a sendfile reader) and the
client itself (the same client against a null broker that stores nothing).

MB is 2^20 bytes everywhere, as kafka-producer-perf-test counts it. A progress line is
printed to stderr every second; the summary goes to stdout (-o json for JSON).`,
		Example: `  samsa bench produce --against null --records 1000000
  samsa bench produce -b 127.0.0.1:9092 --topic t --record-size 1KiB --records 500000 --acks all
  samsa bench consume -b 127.0.0.1:9092 --topic t
  samsa bench limits --dir /var/lib/samsa --size 1GiB
  samsa bench suite --against 127.0.0.1:9092 --out docs/performance-run.md`,
		SilenceUsage: true,
		PersistentPreRunE: func(*cobra.Command, []string) error {
			return c.validate()
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return fmt.Errorf("%w: unknown command %q for %q", ErrBadFlag, args[0], cmd.CommandPath())
			}
			return cmd.Help()
		},
	}
	brokers := defaultBrokers
	if env := strings.TrimSpace(os.Getenv(brokersEnv)); env != "" {
		brokers = env
	}
	pf := cmd.PersistentFlags()
	pf.StringVarP(&c.brokers, "brokers", "b", brokers, "comma-separated bootstrap brokers host:port (env "+brokersEnv+")")
	pf.StringVarP(&c.output, "output", "o", "text", "summary format: text or json")
	c.sec.AddFlags(pf)
	cmd.AddCommand(
		newProduceCommand(c),
		newConsumeCommand(c),
		newNullBrokerCommand(),
		newLimitsCommand(c),
		newSuiteCommand(c),
	)
	return cmd
}

// signalContext is the command's context, cancelled on SIGINT or SIGTERM.
func signalContext(cmd *cobra.Command) (context.Context, context.CancelFunc) {
	ctx := cmd.Context()
	if ctx == nil {
		ctx = context.Background()
	}
	return signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func newProduceCommand(c *common) *cobra.Command {
	cfg := defaultProduceConfig()
	var (
		against    string
		recordSize = byteSize(cfg.recordSize)
		batchMax   = byteSize(cfg.batchMaxBytes)
		quick      bool
	)
	cmd := &cobra.Command{
		Use:   "produce",
		Short: "Produce records as fast as possible (or at --rate) and report throughput and latency",
		Long: `produce sends --records records of --record-size bytes (or runs for --duration)
with the given producer settings and reports records/s, MB/s and the p50/p99/p999
latency of each record from the Produce call to its acknowledgement.

--against null-process runs against a null broker in a child process (the client's
ceiling, paying the same cost of a second process as a real broker), --against null
against one inside the bench process, --against kfake against an in-process
franz-go kfake cluster, --against ADDR (or -b) against a real cluster.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := signalContext(cmd)
			defer cancel()
			cfg.recordSize = int(recordSize)
			cfg.batchMaxBytes = int32(batchMax)
			if !cmd.Flags().Changed("records") && cmd.Flags().Changed("duration") {
				cfg.records = 0
			}
			if quick {
				cfg.records, cfg.duration = min(cfg.records, quickRecords), 0
				if cfg.records == 0 {
					cfg.records = quickRecords
				}
			}
			tgt, err := startTarget(against, splitList(c.brokers), nullOptions{partitions: cfg.partitions, recordSize: cfg.recordSize})
			if err != nil {
				return err
			}
			defer tgt.close()
			cfg.brokers = tgt.brokers
			if cfg.security, err = c.security(tgt); err != nil {
				return err
			}
			res, err := runProduce(ctx, cfg, tgt.name, cmd.ErrOrStderr())
			if err != nil && res.Records == 0 {
				return err
			}
			if perr := printProduce(cmd.OutOrStdout(), c.output, res); perr != nil {
				return perr
			}
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&against, "against", "", "null | null-tls | null-process | kfake | host:port[,host:port]: what to run against (default: -b)")
	f.StringVar(&cfg.topic, "topic", "bench", "topic to produce to")
	f.Var(&recordSize, "record-size", "value size of each record")
	f.Int64Var(&cfg.records, "records", cfg.records, "records to produce (over all producers)")
	f.DurationVar(&cfg.duration, "duration", 0, "produce for this long instead of --records")
	f.Var(&batchMax, "batch-max-bytes", "largest batch the producer builds")
	f.DurationVar(&cfg.linger, "linger", cfg.linger, "how long a batch waits to fill")
	f.StringVar(&cfg.acks, "acks", cfg.acks, "all, 1 or 0")
	f.BoolVar(&cfg.idempotent, "idempotent", cfg.idempotent, "idempotent producer (needs --acks all)")
	f.StringVar(&cfg.compression, "compression", cfg.compression, "none, gzip, snappy, lz4 or zstd")
	f.Int32Var(&cfg.partitions, "partitions", cfg.partitions, "partitions of the topic (with --create-topic)")
	f.IntVar(&cfg.producers, "producers", cfg.producers, "producer clients, each with its own connections")
	f.BoolVar(&cfg.createTopic, "create-topic", cfg.createTopic, "create the topic first (an existing topic is fine)")
	f.Float64Var(&cfg.rate, "rate", 0, "target records/s over all producers (0: as fast as possible)")
	f.IntVar(&cfg.maxBuffered, "max-buffered-records", cfg.maxBuffered, "records each producer buffers before Produce blocks")
	f.BoolVar(&quick, "quick", false, "smoke run: a few thousand records")
	f.StringVar(&cfg.brokerMetrics, "broker-metrics", "",
		"the broker's Prometheus URL (metrics.listener, e.g. http://127.0.0.1:9644/metrics): report its CPU per MB, GC share and peak memory during the run")
	f.BoolVar(&cfg.transactional, "transactional", false, "produce in transactions, one transactional id per producer")
	f.Int64Var(&cfg.commitEvery, "commit-every", 0, "with --transactional: commit after this many records per producer")
	f.DurationVar(&cfg.commitInterval, "commit-interval", 0, "with --transactional: commit this often (default 100ms when --commit-every is not given)")
	return cmd
}

func printProduce(w io.Writer, format string, r ProduceResult) error {
	if format == "json" {
		return writeJSON(w, r)
	}
	_, err := fmt.Fprintf(w, `produce against %s, topic %s: %d records of %d bytes, %d partition(s), %d producer(s), acks=%s idempotent=%t compression=%s linger=%gms batch<=%s
%d records in %.2f s: %.0f records/s, %.1f MB/s
latency ms: mean %.2f  p50 %.2f  p99 %.2f  p99.9 %.2f  max %.2f
`, r.Target, r.Topic, r.Records, r.RecordSize, r.Partitions, r.Producers, r.Acks, r.Idempotent, r.Compression,
		r.LingerMs, formatBytes(int64(r.BatchMaxBytes)), r.Records, r.Seconds, r.RecordsPerSec, r.MBPerSec,
		r.Latency.MeanMs, r.Latency.P50Ms, r.Latency.P99Ms, r.Latency.P999Ms, r.Latency.MaxMs)
	if err == nil && r.Broker != nil {
		_, err = fmt.Fprintf(w, "broker: %.2f CPU s, %.2f CPU ms per MB, GC %.1f %% of its CPU, peak RSS %.0f MB\n",
			r.Broker.CPUSeconds, r.Broker.CPUMsPerMB, 100*r.Broker.GCShare, r.Broker.PeakRSSMB)
	}
	if err == nil && r.Transactions != nil {
		t := r.Transactions
		_, err = fmt.Fprintf(w, "transactions: %d commits (every %d records / %gms); commit latency ms: p50 %.2f  p99 %.2f  max %.2f\n",
			t.Commits, t.CommitEvery, t.CommitIntervalMs, t.CommitLatency.P50Ms, t.CommitLatency.P99Ms, t.CommitLatency.MaxMs)
	}
	if err == nil && r.Errors > 0 {
		_, err = fmt.Fprintf(w, "%d records failed\n", r.Errors)
	}
	return err
}

func newConsumeCommand(c *common) *cobra.Command {
	cfg := defaultConsumeConfig()
	var (
		against      string
		recordSize   = byteSize(1024)
		batchBytes   = byteSize(64 << 10)
		fetchMax     = byteSize(cfg.fetchMaxBytes)
		partitionMax = byteSize(cfg.partitionMaxBytes)
		partitions   int32
		prefill      bool
		quick        bool
	)
	cmd := &cobra.Command{
		Use:   "consume",
		Short: "Read a topic with a raw fetch loop that does not decode records",
		Long: `consume reads --topic from its earliest offsets with raw Fetch requests to each
partition's leader (one in flight per leader), counting records and bytes from the
record batch headers only, and reports records/s and MB/s (bytes of whole batches).
Without --records it reads up to the end offsets the topic had at the start.

--against null-process (a child process) or null (in-process) answers every fetch
from one canned batch (the loop's ceiling); --against kfake starts an in-process kfake cluster and, like --prefill, first
produces --records records of --record-size to read back.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := signalContext(cmd)
			defer cancel()
			cfg.fetchMaxBytes = int32(fetchMax)
			cfg.partitionMaxBytes = int32(partitionMax)
			if quick {
				cfg.records = min(max(cfg.records, 1), quickRecords)
				if cfg.records <= 1 {
					cfg.records = quickRecords
				}
				if cfg.duration == 0 || cfg.duration > quickDuration {
					cfg.duration = quickDuration
				}
			}
			if (against == againstNull || against == againstNullProcess) && cfg.records == 0 && cfg.duration == 0 {
				return fmt.Errorf("%w: against the null broker give --records or --duration (it never ends)", ErrBadFlag)
			}
			tgt, err := startTarget(against, splitList(c.brokers), nullOptions{
				partitions: max(partitions, 1), recordSize: int(recordSize), batchBytes: int(batchBytes),
			})
			if err != nil {
				return err
			}
			defer tgt.close()
			cfg.brokers = tgt.brokers
			if cfg.security, err = c.security(tgt); err != nil {
				return err
			}
			if !cmd.Flags().Changed("prefill") {
				prefill = against == againstKfake
			}
			if prefill {
				if cfg.records == 0 {
					return fmt.Errorf("%w: --prefill needs --records", ErrBadFlag)
				}
				pc := defaultProduceConfig()
				pc.brokers, pc.topic, pc.recordSize, pc.records = tgt.brokers, cfg.topic, int(recordSize), cfg.records
				pc.security = cfg.security
				pc.partitions = max(partitions, 1)
				if _, err := runProduce(ctx, pc, tgt.name, nil); err != nil {
					return fmt.Errorf("prefill: %w", err)
				}
			}
			res, err := runConsume(ctx, cfg, tgt.name, cmd.ErrOrStderr())
			if err != nil && res.Records == 0 {
				return err
			}
			if perr := printConsume(cmd.OutOrStdout(), c.output, res); perr != nil {
				return perr
			}
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&against, "against", "", "null | null-tls | null-process | kfake | host:port[,host:port]: what to run against (default: -b)")
	f.StringVar(&cfg.topic, "topic", "bench", "topic to read")
	f.Int64Var(&cfg.records, "records", 0, "stop after this many records (0: up to the end offsets at start)")
	f.DurationVar(&cfg.duration, "duration", 0, "stop after this long (0: no limit)")
	f.Var(&fetchMax, "fetch-max-bytes", "Fetch MaxBytes")
	f.Var(&partitionMax, "partition-max-bytes", "Fetch PartitionMaxBytes")
	f.DurationVar(&cfg.maxWait, "max-wait", cfg.maxWait, "Fetch MaxWaitMillis")
	f.StringVar(&cfg.isolation, "isolation", "read_uncommitted", "read_uncommitted, or read_committed: up to the last stable offset")
	f.Var(&recordSize, "record-size", "record value size of the null broker's canned batch and of --prefill")
	f.Var(&batchBytes, "batch-bytes", "size of the null broker's canned batch")
	f.Int32Var(&partitions, "partitions", 1, "partitions of the null/kfake/prefilled topic")
	f.BoolVar(&prefill, "prefill", false, "produce --records records before reading (default true with --against kfake)")
	f.BoolVar(&quick, "quick", false, "smoke run: a few thousand records, at most a few seconds")
	return cmd
}

func printConsume(w io.Writer, format string, r ConsumeResult) error {
	if format == "json" {
		return writeJSON(w, r)
	}
	_, err := fmt.Fprintf(w, `consume against %s, topic %s, %d partition(s)
%d records (%d batches, %d fetches) in %.2f s: %.0f records/s, %.1f MB/s
`, r.Target, r.Topic, r.Partitions, r.Records, r.Batches, r.Fetches, r.Seconds, r.RecordsPerSec, r.MBPerSec)
	return err
}

func newNullBrokerCommand() *cobra.Command {
	cfg := NullBrokerConfig{Listen: "127.0.0.1:9099"}
	var keystore string
	recordSize := byteSize(1024)
	batchBytes := byteSize(64 << 10)
	compression := "none"
	cmd := &cobra.Command{
		Use:   "null-broker",
		Short: "Run a Kafka broker that stores nothing: the client's own ceiling",
		Long: `null-broker answers ApiVersions, Metadata (one broker, itself, leading every
partition of every topic asked for), CreateTopics, DeleteTopics, InitProducerId,
ListOffsets, Produce (acknowledged with increasing offsets, nothing stored) and Fetch
(every fetch answered from one canned batch with its offsets rewritten, so consumers
can read forever). Share consumers (KIP-932) run against it too: FindCoordinator
names itself, ShareGroupHeartbeat assigns every member every partition of its topics,
ShareFetch acquires copies of the canned batch from each partition's next offset (so
members get disjoint records) and acknowledgements are accepted unchecked. It runs
until interrupted.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := signalContext(cmd)
			defer cancel()
			cfg.RecordSize, cfg.BatchBytes = int(recordSize), int(batchBytes)
			codec, ok := record.ParseCompression(compression)
			if !ok {
				return fmt.Errorf("%w: --compression %q: use none, gzip, snappy, lz4 or zstd", ErrBadFlag, compression)
			}
			cfg.Compression = codec
			if keystore != "" {
				cert, err := tls.LoadX509KeyPair(keystore, keystore)
				if err != nil {
					return fmt.Errorf("%w: --tls-keystore: %v", ErrBadFlag, err)
				}
				cfg.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
			}
			nb, err := StartNullBroker(cfg)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "null broker listening on %s\n", nb.Addr())
			<-ctx.Done()
			return nb.Close()
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.Listen, "listen", cfg.Listen, "address to listen on")
	f.Int32Var(&cfg.Partitions, "partitions", 1, "partitions of topics created by Metadata or CreateTopics(-1)")
	f.Var(&recordSize, "record-size", "record value size in the canned fetch batch")
	f.Var(&batchBytes, "batch-bytes", "size of the canned fetch batch (before compression)")
	f.StringVar(&compression, "compression", compression, "codec of the canned fetch batch: none, gzip, snappy, lz4 or zstd")
	f.StringVar(&keystore, "tls-keystore", "", "PEM file with a private key and certificate: listen with TLS (the client's TLS ceiling)")
	return cmd
}

func newLimitsCommand(c *common) *cobra.Command {
	dir := os.TempDir()
	size := byteSize(1 << 30)
	cmd := &cobra.Command{
		Use:   "limits",
		Short: "Measure the machine's limits: TCP into a file, and sendfile out of it",
		Long: `limits streams --size bytes over loopback TCP into a server that appends them
to a file in --dir (read/write, as a broker that checks the bytes must), then
sendfiles that file to a loopback client that discards it, then sends it again in
rounds of 1 MiB, each asked for by a one-byte request as a consumer's fetch loop
asks: with sendfile, and read and written through a buffer. All in MB/s. The file
is removed afterwards. Keep --size below the dirty page cache limit (about 2 GB
here) or the sink measures the disk instead.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := signalContext(cmd)
			defer cancel()
			res, err := runLimits(ctx, dir, int64(size), cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			if c.output == "json" {
				return writeJSON(cmd.OutOrStdout(), res)
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "limits over %s: tcp sink to file %.1f MB/s, sendfile to socket %.1f MB/s; "+
				"%s a request: sendfile %.1f MB/s, read and write %.1f MB/s\n",
				formatBytes(res.Bytes), res.SinkMBPerSec, res.SendfileMBPerSec, formatBytes(limitsBuffer), res.SendfileRoundsMBPerSec, res.CopyRoundsMBPerSec)
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&dir, "dir", dir, "directory for the scratch file (use the broker's log.dirs disk)")
	f.Var(&size, "size", "bytes to stream")
	return cmd
}
