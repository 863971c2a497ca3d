package cli

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"

	"github.com/spf13/cobra"
)

// output renders a command's result as text or JSON. Single results are one indented
// JSON document; streams (produce --verbose, consume) are one compact JSON object per
// line. It is safe for concurrent use.
type output struct {
	json   bool
	mu     sync.Mutex
	out    io.Writer
	errOut io.Writer
}

func (g *globals) newOutput(cmd *cobra.Command) *output {
	return &output{json: g.output == outputJSON, out: cmd.OutOrStdout(), errOut: cmd.ErrOrStderr()}
}

// render prints doc as JSON, or calls text to print it for people.
func (o *output) render(doc any, text func(w io.Writer)) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.json {
		enc := json.NewEncoder(o.out)
		enc.SetIndent("", "  ")
		return enc.Encode(doc)
	}
	text(o.out)
	return nil
}

// line prints one element of a stream: v as a JSON line, or text as given.
func (o *output) line(v any, text string) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.json {
		return json.NewEncoder(o.out).Encode(v)
	}
	_, err := io.WriteString(o.out, text)
	return err
}

// buffer makes writes to stdout buffered until flush is called; streams call flush
// after each batch so that output appears promptly without a write per record.
func (o *output) buffer() (flush func() error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	bw := bufio.NewWriterSize(o.out, 64*1024)
	o.out = bw
	return func() error {
		o.mu.Lock()
		defer o.mu.Unlock()
		return bw.Flush()
	}
}

// warnf prints a warning for people to stderr, whatever the output format.
func (o *output) warnf(format string, args ...any) {
	o.mu.Lock()
	defer o.mu.Unlock()
	fmt.Fprintf(o.errOut, "warning: "+format+"\n", args...)
}

// table is a tab-aligned table written on Flush.
type table struct{ tw *tabwriter.Writer }

func newTable(w io.Writer, header ...string) *table {
	t := &table{tw: tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)}
	t.row(toAny(header)...)
	return t
}

func (t *table) row(cells ...any) {
	parts := make([]string, len(cells))
	for i, c := range cells {
		parts[i] = fmt.Sprint(c)
	}
	fmt.Fprintln(t.tw, strings.Join(parts, "\t"))
}

func (t *table) flush() { t.tw.Flush() }

func toAny(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

// int32List renders replica lists as "1,2,3".
func int32List(ids []int32) string {
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = strconv.Itoa(int(id))
	}
	return strings.Join(parts, ",")
}

// optInt renders an optional number, "n/a" when absent.
func optInt(v *int64) string {
	if v == nil {
		return "n/a"
	}
	return strconv.FormatInt(*v, 10)
}

// humanBytes renders a byte count with a binary unit.
func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

func ptr[T any](v T) *T { return &v }
