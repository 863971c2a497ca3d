package bench

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// BrokerUsage is what the broker under test spent on a run, read from its Prometheus
// endpoint (metrics.listener) with --broker-metrics: the process's CPU time and the
// garbage collector's share of it between the start and the end of the measured part,
// and the largest resident memory seen by sampling every usageSampleEvery (a scrape
// costs the broker some CPU: with 1,000 partitions about 10 ms).
type BrokerUsage struct {
	CPUSeconds float64 `json:"cpu_seconds"`
	// CPUMsPerMB is CPUSeconds in milliseconds over the megabytes of record values
	// produced (MB = 2^20 bytes).
	CPUMsPerMB float64 `json:"cpu_ms_per_mb"`
	// GCShare is the runtime's estimate of the garbage collector's CPU over all the
	// CPU the Go runtime used (go_cpu_classes: gc / (total − idle)).
	GCShare float64 `json:"gc_share"`
	// PeakRSSMB is the largest process_resident_memory_bytes sampled, in MB.
	PeakRSSMB float64 `json:"peak_rss_mb"`
	Samples   int     `json:"samples"`
}

const usageSampleEvery = time.Second

// brokerSample is one scrape of the counters BrokerUsage is computed from.
type brokerSample struct {
	cpu, gc, runtimeTotal, runtimeIdle, rss float64
}

// fields maps the metric names a sample reads to where they go.
func (smp *brokerSample) fields() map[string]*float64 {
	return map[string]*float64{
		"process_cpu_seconds_total":                 &smp.cpu,
		"process_resident_memory_bytes":             &smp.rss,
		"go_cpu_classes_gc_total_cpu_seconds_total": &smp.gc,
		"go_cpu_classes_total_cpu_seconds_total":    &smp.runtimeTotal,
		"go_cpu_classes_idle_cpu_seconds_total":     &smp.runtimeIdle,
	}
}

// usageSampler scrapes a broker's metrics endpoint during a run.
type usageSampler struct {
	url    string
	client *http.Client
	first  brokerSample
	stop   chan struct{}
	done   chan struct{}

	mu      sync.Mutex
	peakRSS float64
	samples int
	err     error
}

// startUsage takes the first sample and starts sampling resident memory; url "" is a
// sampler that measures nothing.
func startUsage(ctx context.Context, url string) (*usageSampler, error) {
	if url == "" {
		return nil, nil
	}
	s := &usageSampler{url: url, client: &http.Client{Timeout: 5 * time.Second},
		stop: make(chan struct{}), done: make(chan struct{})}
	first, err := s.scrape(ctx)
	if err != nil {
		return nil, fmt.Errorf("%w: --broker-metrics %s: %v", ErrBadFlag, url, err)
	}
	s.first, s.peakRSS, s.samples = first, first.rss, 1
	go s.loop(ctx)
	return s, nil
}

func (s *usageSampler) loop(ctx context.Context) {
	defer close(s.done)
	t := time.NewTicker(usageSampleEvery)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-ctx.Done():
			return
		case <-t.C:
			smp, err := s.scrape(ctx)
			s.record(smp, err)
		}
	}
}

func (s *usageSampler) record(smp brokerSample, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		if s.err == nil {
			s.err = err
		}
		return
	}
	s.peakRSS = max(s.peakRSS, smp.rss)
	s.samples++
}

// finish takes the last sample and returns the usage over megabytes produced.
func (s *usageSampler) finish(ctx context.Context, megabytes float64) (*BrokerUsage, error) {
	if s == nil {
		return nil, nil
	}
	close(s.stop)
	<-s.done
	last, err := s.scrape(ctx)
	s.record(last, err)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return nil, fmt.Errorf("bench: scraping %s: %w", s.url, s.err)
	}
	u := &BrokerUsage{CPUSeconds: last.cpu - s.first.cpu, PeakRSSMB: s.peakRSS / mebibyte, Samples: s.samples}
	if megabytes > 0 {
		u.CPUMsPerMB = 1000 * u.CPUSeconds / megabytes
	}
	if used := (last.runtimeTotal - s.first.runtimeTotal) - (last.runtimeIdle - s.first.runtimeIdle); used > 0 {
		u.GCShare = (last.gc - s.first.gc) / used
	}
	return u, nil
}

// scrape reads the counters from the Prometheus text exposition.
func (s *usageSampler) scrape(ctx context.Context) (brokerSample, error) {
	var smp brokerSample
	fields := smp.fields()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.url, nil)
	if err != nil {
		return smp, err
	}
	// Only the metrics read below (promhttp's name[] filter): a whole scrape of a
	// broker with thousands of partitions, every second, costs it CPU the run measures.
	q := req.URL.Query()
	for name := range fields {
		q.Add("name[]", name)
	}
	req.URL.RawQuery = q.Encode()
	resp, err := s.client.Do(req)
	if err != nil {
		return smp, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return smp, fmt.Errorf("HTTP %s", resp.Status)
	}
	found := 0
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), " ")
		if p := fields[name]; ok && p != nil {
			v, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
			if err != nil {
				return smp, fmt.Errorf("%s: %w", name, err)
			}
			*p = v
			found++
		}
	}
	if err := sc.Err(); err != nil {
		return smp, err
	}
	if found < 2 {
		return smp, fmt.Errorf("no process_cpu_seconds_total and process_resident_memory_bytes in the response: is it a Prometheus endpoint of the broker?")
	}
	return smp, nil
}
