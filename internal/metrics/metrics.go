package metrics

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Path is where the HTTP listener serves the metrics.
const Path = "/metrics"

// namespace prefixes every Samsa metric name.
const namespace = "samsa"

var (
	// ErrInvalidOptions marks every Options validation failure.
	ErrInvalidOptions = errors.New("metrics: invalid options")
	// ErrStarted is returned by a second Start.
	ErrStarted = errors.New("metrics: already started")
	// ErrClosed is returned by Start after Close.
	ErrClosed = errors.New("metrics: closed")
)

// Options configures a Metrics.
type Options struct {
	// Listen is metrics.listener, a host:port such as "127.0.0.1:9644" (port 0 picks
	// a free port). Empty: no HTTP listener; the metrics are still recorded and
	// reachable through Handler.
	Listen string
	// Logger receives the listener's logs (default: discard).
	Logger *slog.Logger
	// Source supplies the state gauges at scrape time. Optional: without it only the
	// event counters, the histogram and the Go runtime/process metrics are served.
	Source Source
}

// Metrics is a broker's metric set and, once started, its HTTP listener.
// A nil *Metrics is valid: every method is a no-op.
type Metrics struct {
	listen   string
	logger   *slog.Logger
	registry *prometheus.Registry
	// runtime holds the Go runtime and process collectors (go_*, process_*), apart
	// so that a scrape asking only for them (name[]) walks no partition or group.
	runtime *prometheus.Registry
	handler http.Handler

	// Event counters, resolved to label children through the caches below.
	bytesIn, bytesOut, recordsIn, recordsOut *prometheus.CounterVec
	requests, requestBytes, responseBytes    *prometheus.CounterVec
	requestLatency                           *prometheus.HistogramVec
	produceErrors, fetchErrors               *prometheus.CounterVec
	rebalances                               *prometheus.CounterVec
	isrShrinks, isrExpands                   prometheus.Counter
	connThrottles, connThrottleSeconds       *prometheus.CounterVec
	txn                                      txnMetrics
	share                                    shareMetrics

	// topics maps a topic name to its *topicCounters; groups maps a group id to
	// its rebalance prometheus.Counter; shareTopics a topic name to its
	// share-acquired *counterSeries (apart from topics, so that a topic no share
	// group reads exports no share series).
	topics, groups, shareTopics sync.Map
	// apis holds the request series per api key and version, filled on first use.
	apis *[apiKeyLimit][apiVersionLimit]atomic.Pointer[requestSeries]
	// produceErrorSeries and fetchErrorSeries hold the error counters per code + 1.
	produceErrorSeries, fetchErrorSeries *[errorCodeLimit]atomic.Pointer[counterSeries]

	mu struct {
		sync.Mutex
		listener net.Listener
		server   *http.Server
		served   chan struct{} // closed when the HTTP server's Serve returns
		started  bool
		closed   bool
	}
}

// New builds a Metrics with its own registry. It does not listen; call Start.
func New(o Options) (*Metrics, error) {
	if o.Listen != "" {
		if _, _, err := net.SplitHostPort(o.Listen); err != nil {
			return nil, fmt.Errorf("%w: metrics.listener %q: %w", ErrInvalidOptions, o.Listen, err)
		}
	}
	logger := o.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	m := &Metrics{
		listen:             o.Listen,
		logger:             logger,
		registry:           prometheus.NewRegistry(),
		runtime:            prometheus.NewRegistry(),
		apis:               new([apiKeyLimit][apiVersionLimit]atomic.Pointer[requestSeries]),
		produceErrorSeries: new([errorCodeLimit]atomic.Pointer[counterSeries]),
		fetchErrorSeries:   new([errorCodeLimit]atomic.Pointer[counterSeries]),
	}
	m.defineEventMetrics()
	m.txn = newTxnMetrics()
	m.share = newShareMetrics()
	toRegister := []prometheus.Collector{
		m.bytesIn, m.bytesOut, m.recordsIn, m.recordsOut,
		m.requests, m.requestBytes, m.responseBytes, m.requestLatency,
		m.produceErrors, m.fetchErrors, m.rebalances, m.isrShrinks, m.isrExpands,
		m.connThrottles, m.connThrottleSeconds,
	}
	toRegister = append(toRegister, m.txn.collectors()...)
	toRegister = append(toRegister, m.share.collectors()...)
	if o.Source != nil {
		toRegister = append(toRegister, newStateCollector(o.Source))
	}
	for _, c := range toRegister {
		if err := m.registry.Register(c); err != nil {
			return nil, fmt.Errorf("metrics: register: %w", err)
		}
	}
	for _, c := range []prometheus.Collector{
		collectors.NewGoCollector(collectors.WithGoCollectorRuntimeMetrics(
			// The garbage collector's share of the CPU the process used: gc over
			// total minus idle (runtime/metrics estimates; docs/metrics.md).
			collectors.GoRuntimeMetricsRule{Matcher: regexp.MustCompile(`^/cpu/classes/(gc/total|idle|total):cpu-seconds$`)},
		)),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	} {
		if err := m.runtime.Register(c); err != nil {
			return nil, fmt.Errorf("metrics: register: %w", err)
		}
	}
	opts := promhttp.HandlerOpts{
		ErrorLog:      slogErrorLog{logger},
		ErrorHandling: promhttp.ContinueOnError,
		Registry:      m.registry,
	}
	all := promhttp.HandlerFor(prometheus.Gatherers{m.runtime, m.registry}, opts)
	opts.Registry = nil // its handler-error counter lives in m.registry, served by all
	runtimeOnly := promhttp.HandlerFor(m.runtime, opts)
	m.handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if onlyRuntime(r.URL.Query()["name[]"]) {
			runtimeOnly.ServeHTTP(w, r)
			return
		}
		all.ServeHTTP(w, r)
	})
	return m, nil
}

// onlyRuntime reports whether a scrape's name[] filter (promhttp's) asks for Go
// runtime and process metrics alone: samsa bench samples the broker's CPU and memory
// every second, and gathering every partition's and group's gauges for that cost
// the broker a tenth of its CPU with 2,000 partitions.
func onlyRuntime(names []string) bool {
	for _, n := range names {
		if !strings.HasPrefix(n, "go_") && !strings.HasPrefix(n, "process_") {
			return false
		}
	}
	return len(names) > 0
}

// RequestFrames serves samsa_request_frame_bytes{state="in_use"|"free"} from fn,
// read at scrape time: the memory of the pooled request frames (the server's
// FrameBytes).
func (m *Metrics) RequestFrames(fn func() (inUse, free int64)) error {
	if m == nil {
		return nil
	}
	desc := prometheus.NewDesc(namespace+"_request_frame_bytes",
		"Bytes of the pooled buffers holding produce requests: being read or handled (in_use), or kept for the next ones (free).",
		[]string{"state"}, nil)
	return m.registry.Register(funcCollector{desc: desc, collect: func(ch chan<- prometheus.Metric) {
		inUse, free := fn()
		ch <- prometheus.MustNewConstMetric(desc, prometheus.GaugeValue, float64(inUse), "in_use")
		ch <- prometheus.MustNewConstMetric(desc, prometheus.GaugeValue, float64(free), "free")
	}})
}

// funcCollector collects one metric family from a function.
type funcCollector struct {
	desc    *prometheus.Desc
	collect func(ch chan<- prometheus.Metric)
}

func (c funcCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }
func (c funcCollector) Collect(ch chan<- prometheus.Metric) { c.collect(ch) }

// Registry returns the private registry, for callers that add their own collectors
// (the Go runtime and process metrics are gathered apart). Nil for a nil Metrics.
func (m *Metrics) Registry() *prometheus.Registry {
	if m == nil {
		return nil
	}
	return m.registry
}

// Handler serves the metrics in the Prometheus exposition formats; Start mounts it at
// Path. For a nil Metrics it answers 404.
func (m *Metrics) Handler() http.Handler {
	if m == nil {
		return http.NotFoundHandler()
	}
	return m.handler
}

// Start listens on Options.Listen and serves Path over HTTP in the background. It is
// a no-op when Listen is empty or m is nil.
func (m *Metrics) Start() error {
	if m == nil || m.listen == "" {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	switch {
	case m.mu.closed:
		return ErrClosed
	case m.mu.started:
		return ErrStarted
	}
	ln, err := net.Listen("tcp", m.listen)
	if err != nil {
		return fmt.Errorf("metrics: listen on metrics.listener %q: %w", m.listen, err)
	}
	mux := http.NewServeMux()
	mux.Handle(Path, m.handler)
	srv := &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(m.logger.Handler(), slog.LevelWarn),
	}
	served := make(chan struct{})
	m.mu.started, m.mu.listener, m.mu.server, m.mu.served = true, ln, srv, served
	go func() {
		defer close(served)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			m.logger.Error("metrics listener stopped", "addr", ln.Addr().String(), "err", err)
		}
	}()
	m.logger.Info("metrics listening", "addr", ln.Addr().String(), "path", Path)
	return nil
}

// Addr is the bound address of the HTTP listener, or nil when it is not running
// (Listen empty, not started, or m nil).
func (m *Metrics) Addr() net.Addr {
	if m == nil {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.mu.listener == nil {
		return nil
	}
	return m.mu.listener.Addr()
}

// Close stops the HTTP listener, closes its connections and waits for it to finish.
// Recorders stay usable afterwards (they only touch memory). Close is idempotent.
func (m *Metrics) Close() error {
	if m == nil {
		return nil
	}
	m.mu.Lock()
	if m.mu.closed {
		m.mu.Unlock()
		return nil
	}
	m.mu.closed = true
	srv, served := m.mu.server, m.mu.served
	m.mu.listener = nil
	m.mu.Unlock()
	if srv == nil {
		return nil
	}
	err := srv.Close()
	<-served
	if err != nil {
		return fmt.Errorf("metrics: close listener: %w", err)
	}
	return nil
}

// slogErrorLog adapts the logger to promhttp's error logger.
type slogErrorLog struct{ logger *slog.Logger }

func (l slogErrorLog) Println(v ...any) {
	l.logger.Warn("metrics scrape error", "err", fmt.Sprint(v...))
}
