package auth

import (
	"context"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/samsa-streaming/samsa/internal/metadata"
)

// ConnectionCreationRate is the quota of an IP entity (KIP-612): new connections
// per second from one address.
const ConnectionCreationRate = "connection_creation_rate"

// IPConnectionRates answer the connection_creation_rate quota of an address from
// the client quotas of the metadata image: the address's own (an "ip" entity named
// by it, or by a host name that resolves to it), else the default IP entity's.
// It is safe for concurrent use.
type IPConnectionRates struct {
	table atomic.Pointer[ipRateTable]
	mu    sync.Mutex // one rebuild at a time

	// Resolve finds the addresses of a host name an entity names (default: the
	// system resolver, 2 s at most). Set before use.
	Resolve func(ctx context.Context, host string) ([]netip.Addr, error)
}

type ipRateTable struct {
	version uint64
	byAddr  map[netip.Addr]float64
	def     float64
	hasDef  bool
}

// Lookup returns the connection_creation_rate quota of ip under img's quotas.
func (r *IPConnectionRates) Lookup(img *metadata.Image, ip netip.Addr) (perSecond float64, ok bool) {
	t := r.table.Load()
	if t == nil || t.version < img.QuotasVersion() {
		t = r.rebuild(img)
	}
	if v, ok := t.byAddr[ip.Unmap()]; ok {
		return v, true
	}
	return t.def, t.hasDef
}

// rebuild makes the table of img's quotas, unless a newer one was made meanwhile.
// Host names are resolved here, once per change of the quotas, as Kafka's brokers
// resolve an IP entity's name when the quota record arrives.
func (r *IPConnectionRates) rebuild(img *metadata.Image) *ipRateTable {
	r.mu.Lock()
	defer r.mu.Unlock()
	if t := r.table.Load(); t != nil && t.version >= img.QuotasVersion() {
		return t
	}
	t := &ipRateTable{version: img.QuotasVersion(), byAddr: map[netip.Addr]float64{}}
	for _, q := range img.Quotas() {
		v, ok := q.Values[ConnectionCreationRate]
		if !ok || len(q.Entity) != 1 || q.Entity[0].Type != "ip" {
			continue
		}
		if q.Entity[0].Name == nil {
			t.def, t.hasDef = v, true
			continue
		}
		for _, a := range r.addrs(*q.Entity[0].Name) {
			t.byAddr[a] = v
		}
	}
	r.table.Store(t)
	return t
}

// addrs are the addresses an IP entity's name stands for (none if it does not
// resolve now: the quota then applies to no address until the quotas change).
func (r *IPConnectionRates) addrs(name string) []netip.Addr {
	if a, err := netip.ParseAddr(name); err == nil {
		return []netip.Addr{a.Unmap()}
	}
	resolve := r.Resolve
	if resolve == nil {
		resolve = func(ctx context.Context, host string) ([]netip.Addr, error) {
			return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	found, err := resolve(ctx, name)
	if err != nil {
		return nil
	}
	out := make([]netip.Addr, len(found))
	for i, a := range found {
		out[i] = a.Unmap()
	}
	return out
}
