package conformance

import (
	"fmt"
	"strings"
	"testing"
)

type recordingReporter struct{ errors []string }

func (r *recordingReporter) Helper() {}
func (r *recordingReporter) Errorf(format string, args ...any) {
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}

// goodRecords returns what a correct broker serves for keys × perKey generated
// records: key i in partition i%2, consecutive offsets per partition.
func goodRecords(tag string, keys, perKey int) ([]ack, []record) {
	var acks []ack
	var recs []record
	next := map[int32]int64{}
	for seq := 0; seq < perKey; seq++ {
		for i := 0; i < keys; i++ {
			key := fmt.Sprintf("k%d", i)
			value := recordValue(tag, key, seq)
			p := int32(i % 2)
			o := next[p]
			next[p]++
			acks = append(acks, ack{Key: key, Value: value, Partition: p, Offset: o})
			k, v := key, value
			recs = append(recs, record{Partition: p, Offset: o, Key: &k, Value: &v,
				Headers: map[string]string{"seq": fmt.Sprint(seq)}})
		}
	}
	// Consumers return partitions one after another.
	var ordered []record
	for p := int32(0); p < 2; p++ {
		for _, r := range recs {
			if r.Partition == p {
				ordered = append(ordered, r)
			}
		}
	}
	return acks, ordered
}

// TestVerifyRecords checks that the verifier accepts a correct read and catches
// each kind of broker misbehaviour it exists for.
func TestVerifyRecords(t *testing.T) {
	const tag, keys, perKey = "tag", 4, 5
	tests := []struct {
		name    string
		mutate  func(acks []ack, recs []record) ([]ack, []record)
		wantErr string
	}{
		{name: "correct", mutate: func(a []ack, r []record) ([]ack, []record) { return a, r }},
		{name: "lost record", wantErr: "never consumed",
			mutate: func(a []ack, r []record) ([]ack, []record) { return a, r[1:] }},
		{name: "duplicate", wantErr: "consumed twice",
			mutate: func(a []ack, r []record) ([]ack, []record) { return a, append(r, r[3]) }},
		{name: "reordered within partition", wantErr: "offset",
			mutate: func(a []ack, r []record) ([]ack, []record) {
				r[1], r[2] = r[2], r[1]
				return a, r
			}},
		{name: "corrupt value", wantErr: "corrupt value",
			mutate: func(a []ack, r []record) ([]ack, []record) {
				v := *r[0].Value + "x"
				r[0].Value = &v
				return a, r
			}},
		{name: "lost header", wantErr: "headers",
			mutate: func(a []ack, r []record) ([]ack, []record) {
				r[0].Headers = nil
				return a, r
			}},
		{name: "offset differs from ack", wantErr: "acknowledged at",
			mutate: func(a []ack, r []record) ([]ack, []record) {
				a[0].Offset += 100
				return a, r
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			acks, recs := tc.mutate(goodRecords(tag, keys, perKey))
			var rep recordingReporter
			verifyRecords(&rep, tag, keys, perKey, true, acks, recs)
			joined := strings.Join(rep.errors, "\n")
			switch {
			case tc.wantErr == "" && len(rep.errors) > 0:
				t.Errorf("correct records rejected:\n%s", joined)
			case tc.wantErr != "" && !strings.Contains(joined, tc.wantErr):
				t.Errorf("want an error containing %q, got:\n%s", tc.wantErr, joined)
			}
		})
	}
}
