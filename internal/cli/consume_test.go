package cli

import (
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

func TestFormatter(t *testing.T) {
	rec := &kgo.Record{
		Topic: "orders", Partition: 2, Offset: 17,
		Timestamp: time.UnixMilli(1714564800123).In(time.FixedZone("X", 3600)),
		Key:       []byte("user-1"), Value: []byte("paid"),
		Headers: []kgo.RecordHeader{{Key: "trace", Value: []byte("abc")}, {Key: "src", Value: []byte("cli")}},
	}
	tests := []struct {
		format string
		want   string
	}{
		{"", "paid\n"},
		{"{{.Key}}={{.Value}}", "user-1=paid\n"},
		{"{{.Topic}}/{{.Partition}}@{{.Offset}}", "orders/2@17\n"},
		{"{{.Headers}}", "trace=abc,src=cli\n"},
		{`{{.Headers.Get "src"}}|{{.Headers.Get "missing"}}|`, "cli||\n"},
		{"{{.Timestamp.UnixMilli}} {{.Timestamp.Format \"15:04:05.000Z07:00\"}}", "1714564800123 12:00:00.123Z\n"},
		{"{{range .Headers}}{{.Key}};{{end}}", "trace;src;\n"},
	}
	for _, tt := range tests {
		t.Run(tt.format, func(t *testing.T) {
			f, err := newFormatter(tt.format)
			if err != nil {
				t.Fatal(err)
			}
			got, err := f.format(rec)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Fatalf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestFormatterRejectsBadTemplates(t *testing.T) {
	for _, format := range []string{"{{.Value", "{{.NoSuchField}}", "{{.Headers.Nope}}"} {
		_, err := newFormatter(format)
		if _, ok := errors.AsType[*usageError](err); !ok {
			t.Errorf("newFormatter(%q) = %v, want a usage error", format, err)
		}
	}
}

func TestStartOffset(t *testing.T) {
	tests := []struct {
		from    string
		want    kgo.Offset
		wantErr bool
	}{
		{from: "beginning", want: kgo.NewOffset().AtStart()},
		{from: "end", want: kgo.NewOffset().AtEnd()},
		{from: "42", want: kgo.NewOffset().At(42)},
		{from: "@1714564800000", want: kgo.NewOffset().AfterMilli(1714564800000)},
		{from: "2024-05-01T12:00:00Z", want: kgo.NewOffset().AfterMilli(1714564800000)},
		{from: "2024-05-01T14:00:00.5+02:00", want: kgo.NewOffset().AfterMilli(1714564800500)},
		{from: "-3", wantErr: true},
		{from: "yesterday", wantErr: true},
		{from: "@soon", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.from, func(t *testing.T) {
			got, err := startOffset(tt.from)
			if tt.wantErr {
				if _, ok := errors.AsType[*usageError](err); !ok {
					t.Fatalf("err = %v, want a usage error", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.String() != tt.want.String() {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
		})
	}
}

func TestConsumeFlagCombinations(t *testing.T) {
	ok := consumeOptions{from: "beginning", isolation: "read_uncommitted", partition: -1}
	tests := []struct {
		name    string
		mod     func(*consumeOptions)
		json    bool
		wantErr bool
	}{
		{name: "defaults", mod: func(*consumeOptions) {}},
		{name: "group", mod: func(o *consumeOptions) { o.group = "g" }},
		{name: "partition", mod: func(o *consumeOptions) { o.partition = 2 }},
		{name: "read committed", mod: func(o *consumeOptions) { o.isolation = "read_committed" }},
		{name: "partition with group", mod: func(o *consumeOptions) { o.partition, o.group = 1, "g" }, wantErr: true},
		{name: "bad isolation", mod: func(o *consumeOptions) { o.isolation = "dirty" }, wantErr: true},
		{name: "negative count", mod: func(o *consumeOptions) { o.count = -1 }, wantErr: true},
		{name: "format with json", mod: func(o *consumeOptions) { o.format = "{{.Value}}" }, json: true, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := ok
			tt.mod(&o)
			_, err := o.clientOpts("t", tt.json)
			if gotErr := err != nil; gotErr != tt.wantErr {
				t.Fatalf("err = %v, want error: %v", err, tt.wantErr)
			}
			if _, isUsage := errors.AsType[*usageError](err); err != nil && !isUsage {
				t.Fatalf("err = %v, want a usage error", err)
			}
		})
	}
}
