package console

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/samsa-streaming/samsa/internal/testutil"
)

// BenchmarkConsole measures the console against a broker holding 1,000 topics of 10
// partitions (10,000 partitions) and 100 consumer groups, each committed to every
// partition of one topic: the time of each list page, and the cost of one lag
// sample of the 100 groups (wall time, and CPU of the console's process and of the
// broker). Run it with
//
//	go test -run '^$' -bench BenchmarkConsole -benchtime 20x ./internal/console/
func BenchmarkConsole(b *testing.B) {
	const topics, partitions, groups = 1000, 10, 100
	dir, err := os.MkdirTemp("/dev/shm", "samsa-console-bench-")
	if err != nil {
		dir = b.TempDir()
	}
	b.Cleanup(func() { os.RemoveAll(dir) })
	broker := testutil.StartBroker(b, "log.dirs="+dir)
	s, err := New(Config{Brokers: []string{broker.Addr}, Listen: "127.0.0.1:0", LagInterval: time.Hour, Timeout: 30 * time.Second})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	names := make([]string, topics)
	for i := range names {
		names[i] = fmt.Sprintf("topic-%04d", i)
	}
	for i := 0; i < topics; i += 100 {
		if _, err := s.adm.CreateTopics(ctx, partitions, 1, nil, names[i:i+100]...); err != nil {
			b.Fatal(err)
		}
	}
	testutil.WaitFor(b, 60*time.Second, func() bool {
		ends, err := s.adm.ListEndOffsets(ctx, names...)
		return err == nil && ends.Error() == nil && len(ends) == topics
	}, "every partition to have a leader")
	for g := range groups {
		var offsets kadm.Offsets
		for p := range int32(partitions) {
			offsets.AddOffset(names[g], p, 0, -1)
		}
		if _, err := s.adm.CommitOffsets(ctx, fmt.Sprintf("group-%03d", g), offsets); err != nil {
			b.Fatal(err)
		}
	}
	if err := s.Start(); err != nil {
		b.Fatal(err)
	}
	base := strings.TrimSuffix(s.URL(), "/")
	start := time.Now()
	get(b, base+"/")
	b.Logf("the first page after the console started: %v", time.Since(start))

	for _, path := range []string{"/", "/topics", "/topics/topic-0000", "/groups", "/groups/group-000", "/doctor"} {
		b.Run("page="+path, func(b *testing.B) {
			for b.Loop() {
				get(b, base+path)
			}
		})
	}
	b.Run("lag-sample-100-groups", func(b *testing.B) {
		var selfCPU, brokerCPU time.Duration
		for b.Loop() {
			self0, broker0 := processCPU(b, 0), processCPU(b, broker.Pid())
			s.lag.sampleOnce(ctx)
			selfCPU += processCPU(b, 0) - self0
			brokerCPU += processCPU(b, broker.Pid()) - broker0
		}
		if got := len(s.lag.latest()); got != groups {
			b.Fatalf("sampled %d groups, want %d", got, groups)
		}
		perSample := func(d time.Duration) float64 { return float64(d) / float64(b.N) / float64(time.Millisecond) }
		b.ReportMetric(perSample(selfCPU), "console-cpu-ms/sample")
		b.ReportMetric(perSample(brokerCPU), "broker-cpu-ms/sample")
		// At the default interval (5 s) a sample's CPU is this share of one core.
		b.ReportMetric(perSample(selfCPU+brokerCPU)/float64(defaultLagInterval.Milliseconds())*100, "%core-at-5s")
	})
}

func get(b *testing.B, url string) {
	resp, err := http.Get(url)
	if err != nil {
		b.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b.Fatalf("GET %s: %d", url, resp.StatusCode)
	}
}

// processCPU is the user+system CPU time a process has used: this one for pid 0.
func processCPU(b *testing.B, pid int) time.Duration {
	if pid == 0 {
		var ru syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
			b.Fatal(err)
		}
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	// Fields after the command name (which may hold spaces): utime is the 14th
	// field of the line, stime the 15th, in clock ticks of 1/100 s.
	fields := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+2:]))
	utime, _ := strconv.ParseInt(fields[11], 10, 64)
	stime, _ := strconv.ParseInt(fields[12], 10, 64)
	return time.Duration(utime+stime) * 10 * time.Millisecond
}
