package server

import (
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// throttles records what Config.ConnectionThrottled is told.
type throttles struct {
	mu  sync.Mutex
	got []throttle
}

type throttle struct {
	listener, quota string
	d               time.Duration
}

func (r *throttles) add(listener, quota string, d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, throttle{listener, quota, d})
}

func (r *throttles) of(listener, quota string) []time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []time.Duration
	for _, th := range r.got {
		if th.listener == listener && th.quota == quota {
			out = append(out, th.d)
		}
	}
	return out
}

// answeredAfter dials addr (from local, if set), sends ApiVersions and returns how
// long the answer took, or ok=false if the server closed the connection instead.
func answeredAfter(t *testing.T, addr string, local net.IP) (time.Duration, bool) {
	t.Helper()
	d := net.Dialer{Timeout: testDeadline}
	if local != nil {
		d.LocalAddr = &net.TCPAddr{IP: local}
	}
	start := time.Now()
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(testDeadline))
	if _, err := c.Write(encodeRequest(kmsg.NewPtrApiVersionsRequest(), 0, 1, "x")); err != nil {
		return 0, false // already closed
	}
	var size [4]byte
	if _, err := c.Read(size[:]); err != nil {
		return 0, false
	}
	return time.Since(start), true
}

// TestConnectionCreationRate: max.connection.creation.rate, broker-wide and per
// listener (KIP-612). Over the rate a listener waits before it serves the
// connection it accepted; every connection is still served. The broker-wide rate
// does not count the Exempt (inter-broker) listener, whose own limit still holds.
func TestConnectionCreationRate(t *testing.T) {
	var th throttles
	srv, _ := startServer(t, whoAmI, func(c *Config) {
		c.Listeners = []Listener{
			{Name: "CLIENT", Addr: "127.0.0.1:0"},
			{Name: "BROKER", Addr: "127.0.0.1:0", Exempt: true},
			{Name: "LIMITED", Addr: "127.0.0.1:0", Exempt: true, MaxConnectionRate: 2},
		}
		// One sample spans the measured time: 2 a second allows the first
		// connection, and delays each next one (at most one window).
		c.MaxConnectionRate, c.QuotaSamples, c.QuotaWindow = 2, 2, 400*time.Millisecond
		c.ConnectionThrottled = th.add
	})
	addrs := srv.Addrs()
	for name, addr := range map[string]string{"CLIENT": addrs[0].String(), "BROKER": addrs[1].String(), "LIMITED": addrs[2].String()} {
		for i := range 4 {
			before := len(th.of(name, "broker")) + len(th.of(name, "listener"))
			took, ok := answeredAfter(t, addr, nil)
			if !ok {
				t.Fatalf("%s connection %d was closed: a rate limit delays connections, it does not refuse them", name, i)
			}
			if ds := append(th.of(name, "broker"), th.of(name, "listener")...); len(ds) > before && took < ds[len(ds)-1] {
				t.Fatalf("%s connection %d answered after %v, before the %v it was delayed", name, i, took, ds[len(ds)-1])
			}
		}
	}
	if ds := th.of("CLIENT", "broker"); len(ds) < 3 {
		t.Errorf("broker-wide rate: %d of 4 connections on CLIENT delayed, want at least 3 (%v)", len(ds), ds)
	}
	if ds := append(th.of("BROKER", "broker"), th.of("BROKER", "listener")...); len(ds) != 0 {
		t.Errorf("the exempt listener's connections were delayed: %v", ds)
	}
	if ds := th.of("LIMITED", "listener"); len(ds) < 3 {
		t.Errorf("listener rate: %d of 4 connections on LIMITED delayed, want at least 3 (%v)", len(ds), ds)
	}
	for _, ds := range [][]time.Duration{th.of("CLIENT", "broker"), th.of("LIMITED", "listener")} {
		for _, d := range ds {
			if d <= 0 || d > 400*time.Millisecond {
				t.Errorf("a delay of %v, want within (0, one window]", d)
			}
		}
	}
}

// TestIPConnectionRate: an address over its connection_creation_rate quota has its
// new connection closed unread after the throttle time, and that connection does
// not count: the next one from the address is refused as well, while another
// address, without a quota, is served.
func TestIPConnectionRate(t *testing.T) {
	var th throttles
	limited := netip.MustParseAddr("127.0.0.2")
	_, addr := startServer(t, whoAmI, func(c *Config) {
		// One sample spans the measured time: 1 a second allows the first
		// connection, and the next ones are over it.
		c.QuotaSamples, c.QuotaWindow = 2, time.Second
		c.IPConnectionRate = func(ip netip.Addr) (float64, bool) { return 1, ip == limited }
		c.ConnectionThrottled = th.add
	})
	from := net.IP(limited.AsSlice())
	if _, ok := answeredAfter(t, addr, from); !ok {
		t.Fatal("the first connection from 127.0.0.2, within its quota, was closed")
	}
	for i := range 2 {
		if _, ok := answeredAfter(t, addr, from); ok {
			t.Fatalf("connection %d from 127.0.0.2 over its quota was served", i+2)
		}
	}
	if _, ok := answeredAfter(t, addr, nil); !ok {
		t.Fatal("a connection from 127.0.0.1, which has no quota, was closed")
	}
	ds := th.of("", "ip")
	if len(ds) != 2 {
		t.Fatalf("%d connections closed by the IP quota, want 2: %v", len(ds), ds)
	}
	for _, d := range ds {
		if d <= 0 || d > time.Second {
			t.Errorf("throttle of %v, want within (0, one window]", d)
		}
	}
}

// TestThrottledConnectionNotCounted: a connection closed by its address's quota is
// taken back from the rates that counted it (Kafka un-records it), so that a client
// retrying at the quota's pace is let in once the connections it really made have
// aged out.
func TestThrottledConnectionNotCounted(t *testing.T) {
	q := newConnRates(Config{Limits: Limits{QuotaSamples: 2, QuotaWindow: time.Second}})
	l := &Listener{MaxConnectionRate: 100}
	ip := netip.MustParseAddr("192.0.2.1")
	t0 := time.Unix(1000, 0)
	at := func(d time.Duration) time.Duration {
		now := t0.Add(d)
		q.accepted(l, 100, now)
		return q.fromIP(l, ip, 1, now)
	}
	if d := at(0); d != 0 {
		t.Fatalf("the first connection: throttled %v", d)
	}
	for _, d := range []time.Duration{100 * time.Millisecond, 1050 * time.Millisecond} {
		if got := at(d); got <= 0 {
			t.Fatalf("a connection %v after the first: not throttled", d)
		}
	}
	// The first connection's sample has aged out (two samples of a second); the
	// throttled ones were taken back, so nothing is left in the measured span.
	if d := at(2010 * time.Millisecond); d != 0 {
		t.Fatalf("a connection once the accepted one aged out: throttled %v, as if the throttled ones counted", d)
	}
	// They were taken back from the broker-wide and listener rates too: 2 of the 4
	// connections count there.
	now := t0.Add(2010 * time.Millisecond)
	for name, r := range map[string]interface {
		Throttle(float64, time.Time) time.Duration
	}{"broker": q.all, "listener": q.perLn[l]} {
		if d := r.Throttle(1, now); d != 0 {
			t.Errorf("%s rate over 1 a second with the throttled connections taken back: %v", name, d)
		}
	}
}

// TestSetLimitsAtRunTime: raising max.connections with SetLimits lets a listener
// waiting at the old limit accept at once; lowering max.connections.per.ip closes
// the next connection beyond it, not the open ones.
func TestSetLimitsAtRunTime(t *testing.T) {
	srv, addr := startServer(t, whoAmI, func(c *Config) { c.MaxConnections = 1 })
	first := dial(t, addr)
	send(t, first, encodeRequest(kmsg.NewPtrApiVersionsRequest(), 0, 1, "x"))
	readResponse(t, first, kmsg.NewPtrApiVersionsResponse(), 0, false)
	second := dial(t, addr) // queued by the kernel: the listener waits at the limit
	send(t, second, encodeRequest(kmsg.NewPtrApiVersionsRequest(), 0, 1, "x"))
	srv.SetLimits(Limits{MaxConnections: 2})
	readResponse(t, second, kmsg.NewPtrApiVersionsResponse(), 0, false)

	srv.SetLimits(Limits{MaxConnections: 3, MaxConnectionsPerIP: 2})
	expectClosed(t, dial(t, addr))
	send(t, first, encodeRequest(kmsg.NewPtrApiVersionsRequest(), 0, 2, "x"))
	readResponse(t, first, kmsg.NewPtrApiVersionsResponse(), 0, false)
}

// BenchmarkAccept measures new connections served per second (dial, ApiVersions,
// close, one at a time) without connection quotas and with a broker-wide rate and an
// IP quota that never bite, to show what the quotas' bookkeeping costs an accept.
func BenchmarkAccept(b *testing.B) {
	for _, c := range []struct {
		name   string
		mutate func(*Config)
	}{
		{"no-quotas", nil},
		{"quotas-not-biting", func(c *Config) {
			c.MaxConnectionRate = 1 << 30
			c.IPConnectionRate = func(netip.Addr) (float64, bool) { return 1 << 30, true }
		}},
	} {
		b.Run(c.name, func(b *testing.B) {
			cfg := Config{Listeners: Listen("127.0.0.1:0"), Handler: whoAmI, Versions: servedVersions, APIKeys: servedAPIKeys}
			if c.mutate != nil {
				c.mutate(&cfg)
			}
			srv, err := New(cfg)
			if err != nil {
				b.Fatal(err)
			}
			if err := srv.Start(); err != nil {
				b.Fatal(err)
			}
			defer srv.Close()
			addr := srv.Addrs()[0].String()
			frame := encodeRequest(kmsg.NewPtrApiVersionsRequest(), 0, 1, "b")
			size := make([]byte, 4)
			for b.Loop() {
				conn, err := net.Dial("tcp", addr)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := conn.Write(frame); err != nil {
					b.Fatal(err)
				}
				if _, err := conn.Read(size); err != nil {
					b.Fatal(err)
				}
				conn.Close()
			}
		})
	}
}
