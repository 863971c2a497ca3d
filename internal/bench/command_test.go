package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// runCommand runs `bench args...` and returns its stdout and stderr.
func runCommand(t *testing.T, args ...string) (stdout, stderr string) {
	t.Helper()
	return runCommandCtx(t, testContext(t), args...)
}

// longTestContext is testContext for the suite, whose runs are child processes.
func longTestContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func runCommandCtx(t *testing.T, ctx context.Context, args ...string) (stdout, stderr string) {
	t.Helper()
	cmd := NewCommand()
	var out, errOut bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SetArgs(args)
	cmd.SetContext(ctx)
	if err := cmd.Execute(); err != nil {
		t.Fatalf("bench %s: %v\nstderr:\n%s", strings.Join(args, " "), err, errOut.String())
	}
	return out.String(), errOut.String()
}

func TestProduceQuickAgainstNull(t *testing.T) {
	out, _ := runCommand(t, "produce", "--against", "null", "--quick", "--record-size", "512", "--partitions", "2", "-o", "json")
	var res ProduceResult
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("summary is not JSON: %v\n%s", err, out)
	}
	if res.Records != quickRecords || res.Errors != 0 {
		t.Fatalf("records %d errors %d, want %d and 0", res.Records, res.Errors, quickRecords)
	}
	if res.RecordSize != 512 || res.Partitions != 2 || res.Acks != "all" || !res.Idempotent {
		t.Fatalf("summary does not echo the settings: %+v", res)
	}
	if res.RecordsPerSec <= 0 || res.MBPerSec <= 0 || res.Latency.Count != quickRecords || res.Latency.P99Ms < res.Latency.P50Ms {
		t.Fatalf("figures missing or inconsistent: %+v", res)
	}
}

func TestProduceTextSummary(t *testing.T) {
	out, _ := runCommand(t, "produce", "--against", "null", "--records", "2000", "--acks", "1", "--idempotent=false", "--compression", "lz4")
	for _, want := range []string{"2000 records", "records/s", "MB/s", "p99", "acks=1", "compression=lz4"} {
		if !strings.Contains(out, want) {
			t.Fatalf("summary lacks %q:\n%s", want, out)
		}
	}
}

func TestConsumeQuickAgainstNull(t *testing.T) {
	out, _ := runCommand(t, "consume", "--against", "null", "--quick", "--partitions", "3", "-o", "json")
	var res ConsumeResult
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("summary is not JSON: %v\n%s", err, out)
	}
	if res.Records < quickRecords || res.Partitions != 3 || res.Bytes <= 0 || res.Batches <= 0 || res.Fetches <= 0 {
		t.Fatalf("consumed too little: %+v", res)
	}
}

// TestProduceThenConsumeKfake reads back exactly what was produced: the fetch loop
// counts records from batch headers and stops at the end offsets.
func TestProduceThenConsumeKfake(t *testing.T) {
	out, _ := runCommand(t, "consume", "--against", "kfake", "--records", "3000", "--record-size", "100", "--partitions", "2", "-o", "json")
	var res ConsumeResult
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("summary is not JSON: %v\n%s", err, out)
	}
	// kfake holds the 3000 prefilled records plus the producer's warm-up record.
	if res.Records != 3001 {
		t.Fatalf("read %d records, want 3001", res.Records)
	}
}

func TestLimitsSmall(t *testing.T) {
	dir := t.TempDir()
	out, _ := runCommand(t, "limits", "--dir", dir, "--size", "4MiB", "-o", "json")
	var res LimitsResult
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("summary is not JSON: %v\n%s", err, out)
	}
	if res.Bytes != 4<<20 || res.SinkMBPerSec <= 0 || res.SendfileMBPerSec <= 0 || res.SendfileRoundsMBPerSec <= 0 || res.CopyRoundsMBPerSec <= 0 {
		t.Fatalf("limits = %+v", res)
	}
	left, _ := filepath.Glob(filepath.Join(dir, "*"))
	if len(left) != 0 {
		t.Fatalf("scratch file not removed: %v", left)
	}
}

func TestBadFlags(t *testing.T) {
	tests := [][]string{
		{"produce", "--against", "null", "--acks", "2"},
		{"produce", "--against", "null", "--acks", "1"}, // idempotent needs acks=all
		{"produce", "--against", "null", "--compression", "brotli"},
		{"produce", "--against", "null", "--record-size", "lots"},
		{"consume", "--against", "null"}, // would never end
		{"limits", "--size", "0"},
		{"produce", "-o", "yaml"},
		{"null-broker", "--listen", "127.0.0.1:0", "--compression", "brotli"},
	}
	for _, args := range tests {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			cmd := NewCommand()
			cmd.SetOut(&bytes.Buffer{})
			cmd.SetErr(&bytes.Buffer{})
			cmd.SetArgs(args)
			if err := cmd.Execute(); err == nil {
				t.Fatal("expected an error")
			}
		})
	}
}

// TestSuiteQuick runs the whole suite with the null broker standing in for the broker
// under test and checks the report has every scenario and ratio.
func TestSuiteQuick(t *testing.T) {
	nb := startNull(t, NullBrokerConfig{})
	report := filepath.Join(t.TempDir(), "perf.md")
	// Every run is a child process (a race-built test binary under -race, a second or
	// more each): one repetition keeps this test short; TestMedianRun covers medians.
	out, _ := runCommandCtx(t, longTestContext(t), "suite", "--against", nb.Addr(), "--quick", "--repeat", "1", "--dir", t.TempDir(), "--out", report, "-o", "json",
		"--shapes", "3,2x2,100b:2")
	var res SuiteResult
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("summary is not JSON: %v\n%s", err, out)
	}
	if len(res.Notes) != 0 {
		t.Fatalf("suite had problems: %v", res.Notes)
	}
	if res.Produce1K.Samsa.Records == 0 || res.Produce1K.Null.Records == 0 || res.Produce1K.Kfake == nil ||
		res.Produce1K.NullInProcess == nil || res.Produce100.NullInProcess == nil || res.Latency.NullInProcess == nil ||
		res.Consume.Samsa.Records == 0 || res.Consume.Null.Records == 0 || res.Produce100.Samsa.Records == 0 ||
		res.LatencyRate <= 0 || res.Latency.Samsa.Latency.Count == 0 || res.Latency.Null.Latency.Count == 0 {
		t.Fatalf("a scenario is missing: %+v", res)
	}
	want := []produceShape{{3, 1, 1024}, {2, 2, 1024}, {2, 1, 100}}
	if len(res.Shapes) != len(want) {
		t.Fatalf("%d shapes measured, want %d", len(res.Shapes), len(want))
	}
	for i, sh := range res.Shapes {
		if sh.Shape != want[i] || sh.Samsa.Records == 0 || sh.Null.Records == 0 ||
			sh.Samsa.Partitions != want[i].Partitions || sh.Null.Producers != want[i].Producers || sh.Samsa.RecordSize != want[i].RecordSize {
			t.Fatalf("shape %d: %+v, want %+v measured on both", i, sh, want[i])
		}
	}
	// Per repetition: 1 KiB produce ×4 (Samsa, null process, null in-process, kfake)
	// and consume ×3, 100 B ×4, the maximum, half load ×4 and 2 per shape — all kept,
	// interleaved, for the detail tables.
	if len(res.Runs) != 22 || len(res.LimitsRuns) != 1 || res.Repeat != 1 {
		t.Fatalf("runs %d, limits runs %d, repeat %d; want 22, 1, 1", len(res.Runs), len(res.LimitsRuns), res.Repeat)
	}
	md, err := os.ReadFile(report)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"TCP → file", "sendfile", "produce 1 KiB", "consume, raw fetch loop", "produce 100 B", "p99 produce latency", "Samsa vs kfake", "samsa bench produce --against", "--against null-process", "in-process null",
		"1KiB, 3 partitions", "1KiB, 2 partitions, 2 producers", "100 B, 2 partitions", "null broker MB/s (same shape)"} {
		if !strings.Contains(string(md), want) {
			t.Fatalf("report lacks %q:\n%s", want, md)
		}
	}
}

func TestMedianRun(t *testing.T) {
	tests := []struct {
		in   []float64
		want float64
	}{
		{nil, 0},
		{[]float64{5}, 5},
		{[]float64{3, 1}, 1}, // the lower middle of an even count
		{[]float64{9, 1, 5}, 5},
		{[]float64{4, 8, 1, 7}, 4},
	}
	for _, tc := range tests {
		if got := medianOf(tc.in, func(f float64) float64 { return f }); got != tc.want {
			t.Fatalf("median of %v = %v, want %v", tc.in, got, tc.want)
		}
	}
	runs := []ProduceResult{{MBPerSec: 10, Records: 1}, {MBPerSec: 30, Records: 3}, {MBPerSec: 20, Records: 2}}
	if m := medianRun(runs, produceMBs); m.Records != 2 {
		t.Fatalf("median run is %+v, want the 20 MB/s one", m)
	}
}

// The null broker in a process of its own serves the same runs as the in-process one.
func TestProduceAndConsumeAgainstNullProcess(t *testing.T) {
	out, _ := runCommand(t, "produce", "--against", "null-process", "--records", "5000", "--record-size", "200", "-o", "json")
	var res ProduceResult
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if res.Records != 5000 || res.Errors != 0 || res.Target != "null-process" {
		t.Fatalf("produce against null-process: %+v", res)
	}
	out, _ = runCommand(t, "consume", "--against", "null-process", "--records", "3000", "-o", "json")
	var cres ConsumeResult
	if err := json.Unmarshal([]byte(out), &cres); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if cres.Records < 3000 {
		t.Fatalf("consume against null-process read %d records, want ≥ 3000", cres.Records)
	}
}

func TestParseShapes(t *testing.T) {
	got, err := parseShapes("1, 6,64x2,100b:6,4KiB:3x3")
	if err != nil {
		t.Fatal(err)
	}
	want := []produceShape{{1, 1, 1024}, {6, 1, 1024}, {64, 2, 1024}, {6, 1, 100}, {3, 3, 4096}}
	if !slices.Equal(got, want) {
		t.Fatalf("parseShapes = %+v, want %+v", got, want)
	}
	for _, bad := range []string{"", "0", "x2", "6x0", "6x", "abc:6", "-1", "6x2x2"} {
		if _, err := parseShapes(bad); !errors.Is(err, ErrBadFlag) {
			t.Errorf("parseShapes(%q) = %v, want ErrBadFlag", bad, err)
		}
	}
}

// TestBrokerUsage: the sampler reads the broker's CPU, GC share and peak memory from
// its Prometheus text between the first and the last scrape.
func TestBrokerUsage(t *testing.T) {
	var scrapes atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		n := float64(scrapes.Add(1) - 1) // 0 at the first scrape
		rss := 100 << 20
		if n == 1 {
			rss = 300 << 20 // the peak, seen by a sample in between
		}
		fmt.Fprintf(w, "# HELP process_cpu_seconds_total x\nprocess_cpu_seconds_total %g\nprocess_resident_memory_bytes %d\n", 10+2*n, rss)
		fmt.Fprintf(w, "go_cpu_classes_gc_total_cpu_seconds_total %g\ngo_cpu_classes_total_cpu_seconds_total %g\ngo_cpu_classes_idle_cpu_seconds_total %g\n",
			1+0.1*n, 100+4*n, 50+2*n)
	}))
	defer srv.Close()
	ctx := testContext(t)
	u, err := startUsage(ctx, srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "a sample between the first and the last", func() bool { return scrapes.Load() >= 2 })
	got, err := u.finish(ctx, 100)
	if err != nil {
		t.Fatal(err)
	}
	n := float64(scrapes.Load() - 1) // the last scrape's n
	if got.CPUSeconds != 2*n || got.CPUMsPerMB != 1000*2*n/100 || got.PeakRSSMB != 300 ||
		math.Abs(got.GCShare-0.05) > 1e-9 {
		t.Fatalf("usage %+v after %v scrapes", got, n+1)
	}
	if _, err := startUsage(ctx, srv.URL+"/nothing-here\x00"); !errors.Is(err, ErrBadFlag) {
		t.Fatalf("a bad URL: %v", err)
	}
}
