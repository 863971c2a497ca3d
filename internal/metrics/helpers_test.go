package metrics

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// fakeSource is a Source whose snapshot the test sets.
type fakeSource struct {
	mu         sync.Mutex
	partitions []PartitionStats
	groups     []GroupStats
}

func (s *fakeSource) Partitions() []PartitionStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]PartitionStats(nil), s.partitions...)
}

func (s *fakeSource) Groups() []GroupStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]GroupStats(nil), s.groups...)
}

// newMetrics builds a Metrics and closes it at cleanup.
func newMetrics(t testing.TB, o Options) *Metrics {
	t.Helper()
	m, err := New(o)
	if err != nil {
		t.Fatalf("New(%+v): %v", o, err)
	}
	t.Cleanup(func() {
		if err := m.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return m
}

// scrapeURL GETs url and parses the body as the Prometheus text format.
func scrapeURL(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	client := &http.Client{Timeout: 10 * time.Second}
	resp, err := client.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read %s: %v", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: status %d: %s", url, resp.StatusCode, body)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Fatalf("GET %s: Content-Type %q, want text/plain", url, ct)
	}
	return parseText(t, string(body))
}

// scrapeHandler scrapes m through its Handler without a listener.
func scrapeHandler(t *testing.T, m *Metrics) map[string]*dto.MetricFamily {
	t.Helper()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, Path, nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("scrape: status %d: %s", rec.Code, rec.Body.String())
	}
	return parseText(t, rec.Body.String())
}

func parseText(t *testing.T, body string) map[string]*dto.MetricFamily {
	t.Helper()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("parse exposition: %v\n%s", err, body)
	}
	return families
}

// labels is a label set written "k=v,k=v" for compact test tables.
func labelsOf(m *dto.Metric) string {
	var parts []string
	for _, l := range m.GetLabel() {
		parts = append(parts, l.GetName()+"="+l.GetValue())
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

// find returns the sample of family name whose labels are exactly labels.
func find(families map[string]*dto.MetricFamily, name, labels string) (*dto.Metric, bool) {
	f, ok := families[name]
	if !ok {
		return nil, false
	}
	for _, m := range f.GetMetric() {
		if labelsOf(m) == labels {
			return m, true
		}
	}
	return nil, false
}

// value is the counter, gauge or untyped value of a sample; histograms are read with
// find directly.
func value(m *dto.Metric) float64 {
	switch {
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Untyped != nil:
		return m.Untyped.GetValue()
	}
	return 0
}

// sample is one expected sample: family, labels ("k=v,..." sorted by key), value.
type sample struct {
	name, labels string
	want         float64
}

func checkSamples(t *testing.T, families map[string]*dto.MetricFamily, want []sample) {
	t.Helper()
	for _, s := range want {
		m, ok := find(families, s.name, s.labels)
		if !ok {
			t.Errorf("%s{%s}: missing", s.name, s.labels)
			continue
		}
		if got := value(m); got != s.want {
			t.Errorf("%s{%s} = %v, want %v", s.name, s.labels, got, s.want)
		}
	}
}

func checkAbsent(t *testing.T, families map[string]*dto.MetricFamily, name, labels string) {
	t.Helper()
	if m, ok := find(families, name, labels); ok {
		t.Errorf("%s{%s} = %v, want no such series", name, labels, value(m))
	}
}
