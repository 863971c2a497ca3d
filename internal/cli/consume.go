package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"text/template"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kgo"
)

// consumeOptions are the flags of `samsa consume`.
type consumeOptions struct {
	group     string
	from      string
	count     int
	format    string
	isolation string
	partition int32
}

func newConsumeCmd(g *globals) *cobra.Command {
	var opts consumeOptions
	cmd := &cobra.Command{
		Use:   "consume TOPIC",
		Short: "Print records from a topic",
		Long: `Print the records of a topic, one per line: the value by default, or what
--format makes of each record. It runs until interrupted (Ctrl-C or SIGTERM, a clean
stop that exits 0), or until --count records have been printed.

With --group the records are consumed as a member of that consumer group: it starts
from the group's committed offsets (--from applies only to partitions without one)
and commits the offsets of the records it printed, periodically and on exit.

--from takes beginning, end, an offset (applied to every partition), or a timestamp:
RFC3339 (2024-05-01T12:00:00Z) or @ followed by Unix milliseconds (@1714564800000).

--format is a Go text/template executed for each record and followed by a newline.
Fields: .Topic .Partition .Offset .Timestamp (a time.Time, UTC) .Key .Value (strings)
and .Headers (prints as k=v,k=v; .Headers.Get "name" returns one value).`,
		Example: `  samsa consume orders --from beginning --count 10
  samsa consume orders --group billing
  samsa consume orders --from @1714564800000 --format '{{.Partition}}/{{.Offset}} {{.Key}}={{.Value}}'
  samsa consume orders --format '{{.Timestamp.Format "15:04:05"}} {{.Headers.Get "trace"}} {{.Value}}'
  samsa consume orders --partition 2 --from 1500 -o json`,
		Args: args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			kopts, err := opts.clientOpts(a[0], g.output == outputJSON)
			if err != nil {
				return err
			}
			var f *formatter
			if g.output != outputJSON {
				if f, err = newFormatter(opts.format); err != nil {
					return err
				}
			}
			return runConsume(cmd, g, a[0], opts, f, kopts)
		},
	}
	fl := cmd.Flags()
	fl.StringVarP(&opts.group, "group", "g", "", "consume as a member of this consumer group, committing offsets")
	fl.StringVarP(&opts.from, "from", "f", "beginning", "where to start: beginning, end, OFFSET, RFC3339 time or @unixms")
	fl.IntVarP(&opts.count, "count", "n", 0, "exit after printing N records (0: run until interrupted)")
	fl.StringVar(&opts.format, "format", "", "Go template for each record (default: the value)")
	fl.StringVar(&opts.isolation, "isolation", "read_uncommitted", "read_committed or read_uncommitted")
	fl.Int32VarP(&opts.partition, "partition", "p", -1, "consume only this partition (not with --group)")
	return cmd
}

// startOffset parses --from into the offset franz-go starts (or resets) at.
func startOffset(from string) (kgo.Offset, error) {
	switch from {
	case "beginning", "earliest", "start":
		return kgo.NewOffset().AtStart(), nil
	case "end", "latest":
		return kgo.NewOffset().AtEnd(), nil
	}
	if n, err := strconv.ParseInt(from, 10, 64); err == nil {
		if n < 0 {
			return kgo.Offset{}, usagef("--from offset must not be negative, got %d", n)
		}
		return kgo.NewOffset().At(n), nil
	}
	ms, err := parseTimestamp(from)
	if err != nil {
		return kgo.Offset{}, usagef("--from wants beginning, end, an offset, an RFC3339 time or @unixms, not %q", from)
	}
	return kgo.NewOffset().AfterMilli(ms), nil
}

// parseTimestamp accepts RFC3339 (with or without fractional seconds) or @unixms.
func parseTimestamp(s string) (int64, error) {
	if rest, ok := strings.CutPrefix(s, "@"); ok {
		return strconv.ParseInt(rest, 10, 64)
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return 0, err
	}
	return t.UnixMilli(), nil
}

func parseIsolation(s string) (kgo.IsolationLevel, error) {
	switch s {
	case "read_uncommitted":
		return kgo.ReadUncommitted(), nil
	case "read_committed":
		return kgo.ReadCommitted(), nil
	}
	return kgo.IsolationLevel{}, usagef("--isolation must be read_committed or read_uncommitted, not %q", s)
}

// clientOpts turns the flags into franz-go options, rejecting bad combinations.
func (o consumeOptions) clientOpts(topic string, jsonOut bool) ([]kgo.Opt, error) {
	start, err := startOffset(o.from)
	if err != nil {
		return nil, err
	}
	iso, err := parseIsolation(o.isolation)
	if err != nil {
		return nil, err
	}
	switch {
	case o.count < 0:
		return nil, usagef("--count must not be negative, not %d", o.count)
	case o.partition < -1:
		return nil, usagef("--partition must be a partition number, not %d", o.partition)
	case o.partition >= 0 && o.group != "":
		return nil, usagef("--partition cannot be used with --group: the group assigns partitions")
	case jsonOut && o.format != "":
		return nil, usagef("--format and -o json are alternatives; pick one")
	}
	opts := []kgo.Opt{kgo.FetchIsolationLevel(iso), kgo.FetchMaxWait(time.Second)}
	switch {
	case o.partition >= 0:
		opts = append(opts, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {o.partition: start}}))
	case o.group != "":
		opts = append(opts, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(start),
			kgo.ConsumerGroup(o.group), kgo.AutoCommitMarks())
	default:
		opts = append(opts, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(start))
	}
	return opts, nil
}

func runConsume(cmd *cobra.Command, g *globals, topic string, opts consumeOptions, f *formatter, kopts []kgo.Opt) error {
	if err := checkTopicPartition(cmd, g, topic, opts.partition); err != nil {
		return err
	}
	cl, err := g.newClient(kopts...)
	if err != nil {
		return err
	}
	defer cl.Close()
	sigCtx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	pollErr := consumeLoop(sigCtx, g, cl, g.newOutput(cmd), opts, f)
	stop() // a second Ctrl-C during the final commit kills the process
	if opts.group != "" {
		commitCtx, cancel := g.withTimeout(context.WithoutCancel(cmd.Context()))
		defer cancel()
		if err := cl.CommitMarkedOffsets(commitCtx); err != nil && pollErr == nil {
			pollErr = g.explain(fmt.Sprintf("commit offsets of group %q", opts.group), err)
		}
	}
	return pollErr
}

// consumeLoop prints records until ctx ends or opts.count records are printed.
func consumeLoop(ctx context.Context, g *globals, cl *kgo.Client, o *output, opts consumeOptions, f *formatter) error {
	flush := o.buffer()
	defer flush()
	printed := 0
	for opts.count == 0 || printed < opts.count {
		max := -1
		if opts.count > 0 {
			max = opts.count - printed
		}
		fetches := cl.PollRecords(ctx, max)
		if ctx.Err() != nil || fetches.IsClientClosed() {
			return nil
		}
		if err := fetchError(fetches, o); err != nil {
			return g.explain("consume", err)
		}
		for iter := fetches.RecordIter(); !iter.Done(); {
			r := iter.Next()
			if err := printRecord(o, f, r); err != nil {
				return err
			}
			if opts.group != "" {
				cl.MarkCommitRecords(r)
			}
			printed++
		}
		if err := flush(); err != nil {
			return err
		}
	}
	return nil
}

// fetchError returns the first error that stops consuming; data loss is a warning.
func fetchError(fetches kgo.Fetches, o *output) error {
	var first error
	fetches.EachError(func(topic string, p int32, err error) {
		switch {
		case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		case isDataLoss(err):
			o.warnf("%v", err)
		case first == nil && topic == "":
			first = err
		case first == nil:
			first = fmt.Errorf("%s partition %d: %w", topic, p, err)
		}
	})
	return first
}

func isDataLoss(err error) bool {
	_, ok := errors.AsType[*kgo.ErrDataLoss](err)
	return ok
}

func printRecord(o *output, f *formatter, r *kgo.Record) error {
	if o.json {
		return o.line(newConsumedRecord(r), "")
	}
	text, err := f.format(r)
	if err != nil {
		return err
	}
	return o.line(nil, text)
}

// consumedRecord is one record in consume's JSON output (one object per line). Key
// and value are null when the record has none; bytes that are not UTF-8 are replaced.
type consumedRecord struct {
	Topic       string       `json:"topic"`
	Partition   int32        `json:"partition"`
	Offset      int64        `json:"offset"`
	Timestamp   string       `json:"timestamp"`
	TimestampMs int64        `json:"timestamp_ms"`
	Key         *string      `json:"key"`
	Value       *string      `json:"value"`
	Headers     []jsonHeader `json:"headers"`
}

type jsonHeader struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

func newConsumedRecord(r *kgo.Record) consumedRecord {
	c := consumedRecord{
		Topic:       r.Topic,
		Partition:   r.Partition,
		Offset:      r.Offset,
		Timestamp:   r.Timestamp.UTC().Format(time.RFC3339Nano),
		TimestampMs: r.Timestamp.UnixMilli(),
		Headers:     []jsonHeader{},
	}
	if r.Key != nil {
		c.Key = ptr(string(r.Key))
	}
	if r.Value != nil {
		c.Value = ptr(string(r.Value))
	}
	for _, h := range r.Headers {
		c.Headers = append(c.Headers, jsonHeader{Key: h.Key, Value: string(h.Value)})
	}
	return c
}

// RecordView is what a --format template sees for each record.
type RecordView struct {
	Topic     string
	Partition int32
	Offset    int64
	Timestamp time.Time
	Key       string
	Value     string
	Headers   Headers
}

// Header is one record header as a --format template sees it.
type Header struct{ Key, Value string }

// Headers are a record's headers in order.
type Headers []Header

// Get returns the value of the first header named key, or "".
func (h Headers) Get(key string) string {
	for _, x := range h {
		if x.Key == key {
			return x.Value
		}
	}
	return ""
}

// String renders headers as k=v,k=v.
func (h Headers) String() string {
	parts := make([]string, len(h))
	for i, x := range h {
		parts[i] = x.Key + "=" + x.Value
	}
	return strings.Join(parts, ",")
}

// formatter renders records with a --format template.
type formatter struct{ tmpl *template.Template }

// defaultFormat prints the value alone.
const defaultFormat = "{{.Value}}"

func newFormatter(text string) (*formatter, error) {
	if text == "" {
		text = defaultFormat
	}
	t, err := template.New("format").Option("missingkey=error").Parse(text)
	if err != nil {
		return nil, usagef("--format: %v", err)
	}
	// Catch references to fields that do not exist before the first record arrives.
	if err := t.Execute(io.Discard, RecordView{}); err != nil {
		return nil, usagef("--format: %v", err)
	}
	return &formatter{tmpl: t}, nil
}

// format renders one record followed by a newline.
func (f *formatter) format(r *kgo.Record) (string, error) {
	view := RecordView{
		Topic:     r.Topic,
		Partition: r.Partition,
		Offset:    r.Offset,
		Timestamp: r.Timestamp.UTC(),
		Key:       string(r.Key),
		Value:     string(r.Value),
	}
	for _, h := range r.Headers {
		view.Headers = append(view.Headers, Header{Key: h.Key, Value: string(h.Value)})
	}
	var b strings.Builder
	if err := f.tmpl.Execute(&b, view); err != nil {
		return "", fmt.Errorf("--format: %w", err)
	}
	b.WriteByte('\n')
	return b.String(), nil
}
