package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// produceOptions are the flags of `samsa produce`.
type produceOptions struct {
	key          string
	keySet       bool
	keySeparator string
	headers      string
	partition    int32
	acks         string
	compression  string
	verbose      bool
}

func newProduceCmd(g *globals) *cobra.Command {
	var opts produceOptions
	cmd := &cobra.Command{
		Use:   "produce TOPIC",
		Short: "Produce records read from stdin, one per line",
		Long: `Read stdin and produce one record per line (the newline is not part of the
value). Without --partition the partition is chosen like the Java client does: by
murmur2 hash of the key, or spread across partitions for records without a key.
Nothing is printed on success unless --verbose or -o json is given, which print the
partition and offset of each record as it is acknowledged.`,
		Example: `  echo 'hello' | samsa produce greetings
  printf 'user-1:login\nuser-2:logout\n' | samsa produce events --key-separator :
  samsa produce events --key user-1 --headers source=cli,trace=abc < events.txt
  seq 1000 | samsa produce numbers --acks 1 --compression zstd -o json`,
		Args: args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			opts.keySet = cmd.Flags().Changed("key")
			kopts, err := opts.clientOpts(a[0], g.timeout)
			if err != nil {
				return err
			}
			headers, err := parseHeaders(opts.headers)
			if err != nil {
				return err
			}
			if opts.keySet && opts.keySeparator != "" {
				return usagef("--key and --key-separator cannot be used together")
			}
			return runProduce(cmd, g, a[0], opts, headers, kopts)
		},
	}
	f := cmd.Flags()
	f.StringVarP(&opts.key, "key", "k", "", "key for every record")
	f.StringVarP(&opts.keySeparator, "key-separator", "K", "", "split each line at the first SEP into key and value")
	f.StringVarP(&opts.headers, "headers", "H", "", "headers for every record: k=v[,k=v...]")
	f.Int32VarP(&opts.partition, "partition", "p", -1, "produce to this partition (-1: by key hash)")
	f.StringVar(&opts.acks, "acks", "all", "acknowledgements to wait for: all, 1 or 0")
	f.StringVarP(&opts.compression, "compression", "z", "none", "batch compression: none, gzip, snappy, lz4 or zstd")
	f.BoolVarP(&opts.verbose, "verbose", "v", false, "print the partition and offset of each record")
	return cmd
}

// clientOpts turns the flags into franz-go options, rejecting bad values.
func (o produceOptions) clientOpts(topic string, timeout time.Duration) ([]kgo.Opt, error) {
	acks, err := ParseAcks(o.acks)
	if err != nil {
		return nil, err
	}
	codec, err := ParseCompression(o.compression)
	if err != nil {
		return nil, err
	}
	if o.partition < -1 {
		return nil, usagef("--partition must be a partition number or -1, not %d", o.partition)
	}
	opts := []kgo.Opt{
		kgo.DefaultProduceTopic(topic),
		kgo.RequiredAcks(acks),
		kgo.ProducerBatchCompression(codec),
		kgo.RecordDeliveryTimeout(timeout),
		kgo.UnknownTopicRetries(3),
	}
	if o.acks != "all" {
		opts = append(opts, kgo.DisableIdempotentWrite())
	}
	if o.partition >= 0 {
		opts = append(opts, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	}
	return opts, nil
}

// ParseAcks parses an --acks value (all, -1, 1, 0); a bad value is a usage error.
func ParseAcks(s string) (kgo.Acks, error) {
	switch s {
	case "all", "-1":
		return kgo.AllISRAcks(), nil
	case "1":
		return kgo.LeaderAck(), nil
	case "0":
		return kgo.NoAck(), nil
	}
	return kgo.Acks{}, usagef("--acks must be all, 1 or 0, not %q", s)
}

// ParseCompression parses a --compression value (none, gzip, snappy, lz4, zstd); a
// bad value is a usage error.
func ParseCompression(s string) (kgo.CompressionCodec, error) {
	switch s {
	case "none", "":
		return kgo.NoCompression(), nil
	case "gzip":
		return kgo.GzipCompression(), nil
	case "snappy":
		return kgo.SnappyCompression(), nil
	case "lz4":
		return kgo.Lz4Compression(), nil
	case "zstd":
		return kgo.ZstdCompression(), nil
	}
	return kgo.CompressionCodec{}, usagef("--compression must be none, gzip, snappy, lz4 or zstd, not %q", s)
}

// parseHeaders parses "k=v,k2=v2". A header without '=' has an empty value.
func parseHeaders(s string) ([]kgo.RecordHeader, error) {
	if s == "" {
		return nil, nil
	}
	var out []kgo.RecordHeader
	for part := range strings.SplitSeq(s, ",") {
		k, v, _ := strings.Cut(part, "=")
		if k == "" {
			return nil, usagef("--headers wants k=v[,k=v...], found an empty key in %q", s)
		}
		out = append(out, kgo.RecordHeader{Key: k, Value: []byte(v)})
	}
	return out, nil
}

// lineRecord builds the record for one input line.
func lineRecord(line string, opts produceOptions, headers []kgo.RecordHeader) *kgo.Record {
	r := &kgo.Record{Value: []byte(line), Headers: headers, Partition: opts.partition}
	switch {
	case opts.keySet:
		r.Key = []byte(opts.key)
	case opts.keySeparator != "":
		if k, v, ok := strings.Cut(line, opts.keySeparator); ok {
			r.Key, r.Value = []byte(k), []byte(v)
		}
	}
	return r
}

// produced is one acknowledged record in produce's JSON output.
type produced struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
}

// produceResults collects delivery outcomes from franz-go's callbacks.
type produceResults struct {
	mu       sync.Mutex
	failed   int
	firstErr error
	acked    int
}

func (r *produceResults) record(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil {
		r.failed++
		if r.firstErr == nil {
			r.firstErr = err
		}
		return
	}
	r.acked++
}

func runProduce(cmd *cobra.Command, g *globals, topic string, opts produceOptions,
	headers []kgo.RecordHeader, kopts []kgo.Opt) error {
	if err := checkTopicPartition(cmd, g, topic, opts.partition); err != nil {
		return err
	}
	cl, err := g.newClient(kopts...)
	if err != nil {
		return err
	}
	defer cl.Close()
	o := g.newOutput(cmd)
	results := &produceResults{}
	promise := func(r *kgo.Record, err error) {
		results.record(err)
		if err == nil && (opts.verbose || o.json) {
			p := produced{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset}
			_ = o.line(p, fmt.Sprintf("partition %d offset %d\n", p.Partition, p.Offset))
		}
	}
	lines, readErr := produceLines(cmd.Context(), cl, cmd.InOrStdin(), opts, headers, promise)
	if err := cl.Flush(context.WithoutCancel(cmd.Context())); err != nil && readErr == nil {
		readErr = err
	}
	if readErr != nil {
		return fmt.Errorf("reading stdin after %d lines: %w", lines, readErr)
	}
	if results.failed > 0 {
		return g.explain(fmt.Sprintf("%d of %d records were not produced", results.failed, lines), results.firstErr)
	}
	return nil
}

// produceLines produces one record per line of in and returns how many it read.
func produceLines(ctx context.Context, cl *kgo.Client, in io.Reader, opts produceOptions,
	headers []kgo.RecordHeader, promise func(*kgo.Record, error)) (int, error) {
	reader := bufio.NewReaderSize(in, 64*1024)
	n := 0
	for {
		line, err := reader.ReadString('\n')
		if len(line) > 0 {
			line = strings.TrimSuffix(strings.TrimSuffix(line, "\n"), "\r")
			n++
			cl.Produce(ctx, lineRecord(line, opts, headers), promise)
		}
		if errors.Is(err, io.EOF) {
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
}

// checkTopicPartition fails unless the topic exists and, when partition ≥ 0, has that
// partition: produce and consume say so up front instead of waiting on metadata.
func checkTopicPartition(cmd *cobra.Command, g *globals, topic string, partition int32) error {
	adm, ctx, done, err := g.admin(cmd.Context())
	if err != nil {
		return err
	}
	defer done()
	detail, err := topicExists(ctx, g, adm, topic)
	if err != nil {
		return err
	}
	if partition < 0 {
		return nil
	}
	return hasPartition(detail, partition)
}

// hasPartition fails unless the topic detail has that partition.
func hasPartition(detail kadm.TopicDetail, partition int32) error {
	if _, ok := detail.Partitions[partition]; !ok {
		return fmt.Errorf("topic %q has no partition %d (it has %d)", detail.Topic, partition, len(detail.Partitions))
	}
	return nil
}
