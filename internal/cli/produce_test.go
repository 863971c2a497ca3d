package cli

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

func TestParseHeaders(t *testing.T) {
	tests := []struct {
		in      string
		want    []kgo.RecordHeader
		wantErr bool
	}{
		{in: "", want: nil},
		{in: "a=1", want: []kgo.RecordHeader{{Key: "a", Value: []byte("1")}}},
		{in: "a=1,b=x=y,c", want: []kgo.RecordHeader{{Key: "a", Value: []byte("1")}, {Key: "b", Value: []byte("x=y")}, {Key: "c", Value: []byte("")}}},
		{in: "=1", wantErr: true},
		{in: "a=1,,b=2", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := parseHeaders(tt.in)
			if tt.wantErr {
				if _, ok := errors.AsType[*usageError](err); !ok {
					t.Fatalf("err = %v, want a usage error", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.EqualFunc(got, tt.want, func(a, b kgo.RecordHeader) bool { return a.Key == b.Key && string(a.Value) == string(b.Value) }) {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
		})
	}
}

func TestLineRecord(t *testing.T) {
	tests := []struct {
		name      string
		opts      produceOptions
		line      string
		wantKey   []byte
		wantValue string
	}{
		{name: "no key", opts: produceOptions{partition: -1}, line: "v", wantKey: nil, wantValue: "v"},
		{name: "fixed key", opts: produceOptions{key: "k", keySet: true, partition: -1}, line: "v", wantKey: []byte("k"), wantValue: "v"},
		{name: "empty fixed key", opts: produceOptions{keySet: true, partition: -1}, line: "v", wantKey: []byte{}, wantValue: "v"},
		{name: "separator", opts: produceOptions{keySeparator: "::", partition: -1}, line: "k::v::w", wantKey: []byte("k"), wantValue: "v::w"},
		{name: "separator missing", opts: produceOptions{keySeparator: ":", partition: -1}, line: "v", wantKey: nil, wantValue: "v"},
		{name: "empty key before separator", opts: produceOptions{keySeparator: ":", partition: -1}, line: ":v", wantKey: []byte{}, wantValue: "v"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := lineRecord(tt.line, tt.opts, nil)
			if (r.Key == nil) != (tt.wantKey == nil) || string(r.Key) != string(tt.wantKey) || string(r.Value) != tt.wantValue {
				t.Fatalf("key %q (nil %v) value %q, want key %q (nil %v) value %q",
					r.Key, r.Key == nil, r.Value, tt.wantKey, tt.wantKey == nil, tt.wantValue)
			}
		})
	}
}

func TestProduceFlagValues(t *testing.T) {
	tests := []struct {
		name    string
		opts    produceOptions
		wantErr bool
	}{
		{name: "defaults", opts: produceOptions{acks: "all", compression: "none", partition: -1}},
		{name: "leader acks zstd", opts: produceOptions{acks: "1", compression: "zstd", partition: -1}},
		{name: "no acks lz4 partition", opts: produceOptions{acks: "0", compression: "lz4", partition: 3}},
		{name: "gzip snappy", opts: produceOptions{acks: "all", compression: "snappy", partition: -1}},
		{name: "bad acks", opts: produceOptions{acks: "2", compression: "none", partition: -1}, wantErr: true},
		{name: "bad codec", opts: produceOptions{acks: "all", compression: "brotli", partition: -1}, wantErr: true},
		{name: "bad partition", opts: produceOptions{acks: "all", compression: "none", partition: -2}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tt.opts.clientOpts("t", time.Second)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, want error: %v", err, tt.wantErr)
			}
			if _, ok := errors.AsType[*usageError](err); err != nil && !ok {
				t.Fatalf("err = %v, want a usage error", err)
			}
		})
	}
}
