package auth

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/samsa-streaming/samsa/internal/metadata"
)

// Quota kinds, Kafka's quota config keys.
const (
	ProducerByteRate       = "producer_byte_rate"
	ConsumerByteRate       = "consumer_byte_rate"
	RequestPercentage      = "request_percentage"
	ControllerMutationRate = "controller_mutation_rate"
)

// Quotas enforce client quotas the way Kafka's ClientQuotaManager does (KIP-13,
// KIP-55, KIP-219): each quota is found for a (user, client id) pair by Kafka's
// precedence — user and client id, user and default client, user, default user and
// client id, default user and default client, default user, client id, default client
// — and the usage is measured per quota entity over quota.window.num samples of
// quota.window.size.seconds. A client over its quota is told to wait
// (value − quota) / quota × window (at most quota.window.num windows, and one window
// for request_percentage, as Kafka bounds it): the broker answers with that throttle
// time and does not read the connection's next request until it has passed.
//
// Quotas is safe for concurrent use. It reads the clock it is given.
type Quotas struct {
	window  time.Duration
	samples int
	// windows are the kinds measured over windows of their own (SetWindow);
	// written before use only.
	windows map[string]quotaWindow

	configured atomic.Bool // any quota at all: the fast path is one load
	version    atomic.Uint64

	mu struct {
		sync.Mutex
		configs   map[string]metadata.Quota // by metadata.QuotaKey
		rates     map[string]*Rate          // by kind + "|" + entity key
		lastSweep time.Time                 // of rates idle for rateExpiry
	}
}

// rateExpiry is how long a client's usage is kept after its last request, as Kafka
// expires an idle quota sensor after an hour: a client id seen once (every
// short-lived tool or application instance that names itself anew) is not measured
// forever. Idle usage is dropped by a sweep at most once per rateExpiry/60.
const rateExpiry = time.Hour

// NewQuotas returns quotas measured over samples windows of window each.
func NewQuotas(samples int, window time.Duration) *Quotas {
	q := &Quotas{window: window, samples: max(samples, 2)}
	q.mu.configs = map[string]metadata.Quota{}
	q.mu.rates = map[string]*Rate{}
	return q
}

type quotaWindow struct {
	samples int
	window  time.Duration
}

// SetWindow measures kind over samples windows of window each instead of the
// windows NewQuotas was given, as Kafka measures controller_mutation_rate over
// controller.quota.window.num and controller.quota.window.size.seconds. Call it
// before the Quotas are used.
func (q *Quotas) SetWindow(kind string, samples int, window time.Duration) {
	if q.windows == nil {
		q.windows = map[string]quotaWindow{}
	}
	q.windows[kind] = quotaWindow{samples: max(samples, 2), window: window}
}

// windowOf is the measurement window of kind.
func (q *Quotas) windowOf(kind string) quotaWindow {
	if w, ok := q.windows[kind]; ok {
		return w
	}
	return quotaWindow{samples: q.samples, window: q.window}
}

// Update takes the quotas of img when they are newer than those it has: requests
// call it concurrently, each with the image it read, and a late one with an older
// image must not bring back quotas a newer one changed. Version 0 (no quota record
// yet) is the empty set it starts with.
func (q *Quotas) Update(img *metadata.Image) {
	if q.version.Load() >= img.QuotasVersion() {
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.version.Load() >= img.QuotasVersion() {
		return // a newer image was applied meanwhile (versions only grow along the log)
	}
	q.mu.configs = img.Quotas()
	// An IP entity's connection_creation_rate is enforced where connections are
	// accepted (IPConnectionRates), not per request.
	configured := false
	for _, c := range q.mu.configs {
		configured = configured || !slices.ContainsFunc(c.Entity, func(e metadata.QuotaEntity) bool { return e.Type == "ip" })
	}
	q.configured.Store(configured)
	q.version.Store(img.QuotasVersion())
}

// Enabled reports whether any quota is configured.
func (q *Quotas) Enabled() bool { return q.configured.Load() }

// lookup finds the quota of kind for user and client id by Kafka's precedence;
// key names the entity whose usage is measured.
func (q *Quotas) lookup(kind, user, clientID string) (limit float64, key string, ok bool) {
	u, c := user, clientID
	candidates := [][]metadata.QuotaEntity{
		{{Type: "user", Name: &u}, {Type: "client-id", Name: &c}},
		{{Type: "user", Name: &u}, {Type: "client-id"}},
		{{Type: "user", Name: &u}},
		{{Type: "user"}, {Type: "client-id", Name: &c}},
		{{Type: "user"}, {Type: "client-id"}},
		{{Type: "user"}},
		{{Type: "client-id", Name: &c}},
		{{Type: "client-id"}},
	}
	for _, entity := range candidates {
		k := metadata.QuotaKey(entity)
		if cfg, found := q.mu.configs[k]; found {
			if v, has := cfg.Values[kind]; has {
				// Usage is measured per actual value of each part of the entity the
				// quota is set on (Kafka's metric tags): a quota on User:alice is
				// shared by all her client ids, a default user quota applies to each
				// user on their own.
				key := kind + "|" + k
				for _, part := range entity {
					if part.Type == "user" {
						key += "|user=" + user
					} else {
						key += "|client-id=" + clientID
					}
				}
				return v, key, true
			}
		}
	}
	return 0, "", false
}

// Record adds value (bytes, or partitions for controller_mutation_rate) to the
// usage of kind by user and client id at now, and returns how long the client must
// wait: 0 when it is within its quota or has none.
func (q *Quotas) Record(kind, user, clientID string, value float64, now time.Time) time.Duration {
	return q.throttle(kind, user, clientID, value, true, now)
}

// Throttle returns how long a client over its quota of kind must still wait,
// without recording anything (controller_mutation_rate checks before a request).
func (q *Quotas) Throttle(kind, user, clientID string, now time.Time) time.Duration {
	return q.throttle(kind, user, clientID, 0, false, now)
}

func (q *Quotas) throttle(kind, user, clientID string, value float64, record bool, now time.Time) time.Duration {
	if !q.configured.Load() {
		return 0
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	limit, key, ok := q.lookup(kind, user, clientID)
	if !ok {
		return 0
	}
	r := q.mu.rates[key]
	switch {
	case r == nil && !record:
		return 0
	case r == nil:
		w := q.windowOf(kind)
		r = NewRate(w.samples, w.window, now)
		q.mu.rates[key] = r
	}
	if record {
		r.Record(value, now)
	}
	q.sweepLocked(now)
	d := r.Throttle(limit, now)
	if kind == RequestPercentage {
		// Kafka's ClientRequestQuotaManager bounds this one throttle at one window
		// (its maxThrottleTimeMs): handler time is measured after the fact, so one
		// slow request would otherwise mute a connection for many seconds.
		d = min(d, q.windowOf(kind).window)
	}
	return d
}

// sweepLocked drops the usage of entities idle for rateExpiry. q.mu held.
func (q *Quotas) sweepLocked(now time.Time) {
	if now.Sub(q.mu.lastSweep) < rateExpiry/60 {
		return
	}
	q.mu.lastSweep = now
	for key, r := range q.mu.rates {
		if now.Sub(r.last) >= rateExpiry {
			delete(q.mu.rates, key)
		}
	}
}

// Rate is a sampled rate, Kafka's Rate over a SampledStat: samples windows; the
// elapsed time is at least samples−1 whole windows, so that a new sensor does not
// see a burst as a huge rate. A Rate is not safe for concurrent use.
type Rate struct {
	window  time.Duration
	samples []sample
	current int
	last    time.Time // of the last record
}

type sample struct {
	start time.Time
	value float64
}

// NewRate returns a rate measured over n samples of window each, starting at now.
func NewRate(n int, window time.Duration, now time.Time) *Rate {
	r := &Rate{window: window, samples: make([]sample, max(n, 2))}
	r.samples[0].start = now
	return r
}

// Record adds v at now (a negative v takes back what was recorded, as Kafka
// un-records a connection it refuses).
func (r *Rate) Record(v float64, now time.Time) {
	r.last = now
	s := &r.samples[r.current]
	if now.Sub(s.start) >= r.window {
		r.current = (r.current + 1) % len(r.samples)
		s = &r.samples[r.current]
		s.start, s.value = now, 0
	}
	s.value += v
}

// Idle reports whether nothing was recorded for the whole span the rate measures:
// it then measures what a new one would, and may be dropped.
func (r *Rate) Idle(now time.Time) bool {
	return now.Sub(r.last) >= time.Duration(len(r.samples))*r.window
}

// measure is the rate per second at now.
func (r *Rate) measure(now time.Time) (perSecond float64, elapsed time.Duration) {
	var total float64
	oldest := now
	for i := range r.samples {
		s := &r.samples[i]
		if s.start.IsZero() {
			continue
		}
		if now.Sub(s.start) >= time.Duration(len(r.samples))*r.window {
			s.start, s.value = time.Time{}, 0 // expired
			continue
		}
		total += s.value
		if s.start.Before(oldest) {
			oldest = s.start
		}
	}
	elapsed = now.Sub(oldest)
	if minimum := time.Duration(len(r.samples)-1) * r.window; elapsed < minimum {
		elapsed = minimum
	}
	return total / elapsed.Seconds(), elapsed
}

// Throttle is how long a client over limit (per second) must wait at now to bring
// the rate back to it, Kafka's QuotaUtils.throttleTime: (rate − limit) / limit ×
// the elapsed span, at most the whole span of samples; 0 within the limit.
func (r *Rate) Throttle(limit float64, now time.Time) time.Duration {
	perSecond, elapsed := r.measure(now)
	if perSecond <= limit || limit <= 0 {
		return 0
	}
	d := time.Duration((perSecond - limit) / limit * float64(elapsed))
	return min(d, time.Duration(len(r.samples))*r.window)
}
