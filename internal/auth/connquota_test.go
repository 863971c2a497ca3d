package auth

import (
	"context"
	"errors"
	"net/netip"
	"testing"

	"github.com/samsa-streaming/samsa/internal/metadata"
)

func TestIPConnectionRates(t *testing.T) {
	ip := func(s string) []metadata.QuotaEntity { return []metadata.QuotaEntity{{Type: "ip", Name: &s}} }
	apply := func(img *metadata.Image, recs ...metadata.ClientQuotaRecord) *metadata.Image {
		t.Helper()
		var rs []metadata.Record
		for _, r := range recs {
			rs = append(rs, r)
		}
		next, err := metadata.Apply(img, img.Offset()+1, rs)
		if err != nil {
			t.Fatal(err)
		}
		return next
	}
	resolved := 0
	r := &IPConnectionRates{Resolve: func(_ context.Context, host string) ([]netip.Addr, error) {
		resolved++
		if host == "edge.example" {
			return []netip.Addr{netip.MustParseAddr("10.0.0.7"), netip.MustParseAddr("::ffff:10.0.0.8")}, nil
		}
		return nil, errors.New("no such host")
	}}
	img := apply(metadata.EmptyImage(),
		metadata.ClientQuotaRecord{Entity: ip("192.0.2.1"), Key: ConnectionCreationRate, Value: 5},
		metadata.ClientQuotaRecord{Entity: ip("edge.example"), Key: ConnectionCreationRate, Value: 7},
		metadata.ClientQuotaRecord{Entity: ip("gone.example"), Key: ConnectionCreationRate, Value: 9},
		metadata.ClientQuotaRecord{Entity: []metadata.QuotaEntity{{Type: "user", Name: name("alice")}}, Key: ProducerByteRate, Value: 100},
	)
	check := func(img *metadata.Image, addr string, want float64, wantOK bool) {
		t.Helper()
		got, ok := r.Lookup(img, netip.MustParseAddr(addr))
		if got != want || ok != wantOK {
			t.Errorf("%s: %v %v, want %v %v", addr, got, ok, want, wantOK)
		}
	}
	check(img, "192.0.2.1", 5, true)
	check(img, "::ffff:192.0.2.1", 5, true) // the same address, IPv4-mapped
	check(img, "10.0.0.7", 7, true)         // by the host name's addresses
	check(img, "10.0.0.8", 7, true)
	check(img, "192.0.2.2", 0, false) // no quota, no default
	if resolved != 2 {
		t.Errorf("%d lookups of host names, want one per name", resolved)
	}
	check(img, "10.0.0.7", 7, true)
	if resolved != 2 {
		t.Errorf("host names resolved again with unchanged quotas (%d lookups)", resolved)
	}

	// The default IP entity applies to every address without its own quota; a
	// removed quota no longer applies.
	img = apply(img,
		metadata.ClientQuotaRecord{Entity: []metadata.QuotaEntity{{Type: "ip"}}, Key: ConnectionCreationRate, Value: 3},
		metadata.ClientQuotaRecord{Entity: ip("192.0.2.1"), Key: ConnectionCreationRate, Remove: true},
	)
	check(img, "192.0.2.1", 3, true)
	check(img, "192.0.2.2", 3, true)
	check(img, "10.0.0.7", 7, true)

	// An IP quota does not turn on the request quotas' slow path.
	q := NewQuotas(11, 1e9)
	q.Update(apply(metadata.EmptyImage(), metadata.ClientQuotaRecord{Entity: ip("192.0.2.1"), Key: ConnectionCreationRate, Value: 5}))
	if q.Enabled() {
		t.Error("an IP connection quota enabled the request quotas")
	}
}
