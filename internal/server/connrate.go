package server

import (
	"net/netip"
	"sync"
	"time"

	"github.com/samsa-streaming/samsa/internal/auth"
)

// Connection-rate quotas (KIP-612), as Kafka's ConnectionQuotas applies them:
//
//   - max.connection.creation.rate, broker-wide (Config.MaxConnectionRate) and per
//     listener (Listener.MaxConnectionRate): an accepted connection is counted, and
//     when the rate is over either limit the listener waits the throttle time before
//     it serves that connection and accepts the next one. The broker-wide rate does
//     not count an Exempt (inter-broker) listener's connections.
//   - connection_creation_rate of an IP entity (Config.IPConnectionRate): a
//     connection from an address over its quota is not counted anywhere and is
//     closed, unread, once the throttle time has passed — the client's next attempt
//     then meets a rate that has had time to fall.
//
// Rates are measured over quota.window.num samples of quota.window.size.seconds, and
// one throttle is at most one window (Kafka's maxThrottleTimeMs).
type connRates struct {
	samples int
	window  time.Duration

	mu    sync.Mutex
	all   *auth.Rate                // broker-wide (nil without a limit)
	perLn map[*Listener]*auth.Rate  // listeners with a limit
	perIP map[netip.Addr]*auth.Rate // addresses with a quota
	swept time.Time                 // perIP's last sweep of idle rates
}

func newConnRates(cfg Config) *connRates {
	return &connRates{samples: cfg.QuotaSamples, window: cfg.QuotaWindow,
		perLn: map[*Listener]*auth.Rate{}, perIP: map[netip.Addr]*auth.Rate{}}
}

// rateIn returns the rate of k in m, made on first use.
func rateIn[K comparable](q *connRates, m map[K]*auth.Rate, k K, now time.Time) *auth.Rate {
	r := m[k]
	if r == nil {
		r = auth.NewRate(q.samples, q.window, now)
		m[k] = r
	}
	return r
}

// accepted counts a connection accepted on l at now under the broker-wide rate
// broker (0: none) and returns how long l must wait before serving it, with the
// quota ("broker" or "listener") that decided it.
func (q *connRates) accepted(l *Listener, broker int, now time.Time) (time.Duration, string) {
	if broker == 0 && l.MaxConnectionRate == 0 {
		return 0, ""
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	var d time.Duration
	var quota string
	if broker > 0 && !l.Exempt {
		if q.all == nil {
			q.all = auth.NewRate(q.samples, q.window, now)
		}
		q.all.Record(1, now)
		d, quota = q.all.Throttle(float64(broker), now), "broker"
	}
	if l.MaxConnectionRate > 0 {
		r := rateIn(q, q.perLn, l, now)
		r.Record(1, now)
		if ld := r.Throttle(float64(l.MaxConnectionRate), now); ld > d {
			d, quota = ld, "listener"
		}
	}
	return min(d, q.window), quota
}

// fromIP counts a connection from ip under its quota (perSecond) and returns how
// long to wait before closing it when that is over the quota; the connection is
// then taken back from every rate that counted it.
func (q *connRates) fromIP(l *Listener, ip netip.Addr, perSecond float64, now time.Time) time.Duration {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.sweepLocked(now)
	r := rateIn(q, q.perIP, ip, now)
	r.Record(1, now)
	d := min(r.Throttle(perSecond, now), q.window)
	if d <= 0 {
		return 0
	}
	r.Record(-1, now)
	if q.all != nil && !l.Exempt {
		q.all.Record(-1, now)
	}
	if lr := q.perLn[l]; lr != nil {
		lr.Record(-1, now)
	}
	return d
}

// sweepLocked drops the rates of addresses that sent nothing for their whole
// measured span (at most once a window): a new rate measures the same. q.mu held.
func (q *connRates) sweepLocked(now time.Time) {
	if now.Sub(q.swept) < q.window {
		return
	}
	q.swept = now
	for ip, r := range q.perIP {
		if r.Idle(now) {
			delete(q.perIP, ip)
		}
	}
}
