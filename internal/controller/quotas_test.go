package controller

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/samsa-streaming/samsa/internal/metadata"
)

// TestValidateQuotaChange holds AlterClientQuotas to Kafka's
// ClientQuotaControlManager rules, IP entities (KIP-612) included.
func TestValidateQuotaChange(t *testing.T) {
	named := func(typ, name string) metadata.QuotaEntity { return metadata.QuotaEntity{Type: typ, Name: &name} }
	def := func(typ string) metadata.QuotaEntity { return metadata.QuotaEntity{Type: typ} }
	set := func(k string, v float64) map[string]float64 { return map[string]float64{k: v} }
	for _, c := range []struct {
		name   string
		change QuotaChange
		want   string // "" for valid
	}{
		{"user byte rate", QuotaChange{Entity: []metadata.QuotaEntity{named("user", "alice")}, Values: set("producer_byte_rate", 1024)}, ""},
		{"user and client id", QuotaChange{Entity: []metadata.QuotaEntity{named("user", "alice"), def("client-id")}, Values: set("request_percentage", 12.5)}, ""},
		{"ip rate", QuotaChange{Entity: []metadata.QuotaEntity{named("ip", "192.0.2.1")}, Values: set("connection_creation_rate", 10)}, ""},
		{"default ip rate", QuotaChange{Entity: []metadata.QuotaEntity{def("ip")}, Values: set("connection_creation_rate", 10)}, ""},
		{"ip removal", QuotaChange{Entity: []metadata.QuotaEntity{def("ip")}, Removes: []string{"connection_creation_rate"}}, ""},
		{"ip with user", QuotaChange{Entity: []metadata.QuotaEntity{named("ip", "192.0.2.1"), named("user", "alice")}, Values: set("connection_creation_rate", 10)},
			"an ip entity cannot be combined with a user or client-id"},
		{"byte rate on ip", QuotaChange{Entity: []metadata.QuotaEntity{def("ip")}, Values: set("producer_byte_rate", 10)},
			`quota "producer_byte_rate" does not apply to this entity (one of [connection_creation_rate])`},
		{"connection rate on user", QuotaChange{Entity: []metadata.QuotaEntity{def("user")}, Values: set("connection_creation_rate", 10)},
			`quota "connection_creation_rate" does not apply to this entity`},
		{"fractional connection rate", QuotaChange{Entity: []metadata.QuotaEntity{def("ip")}, Values: set("connection_creation_rate", 2.5)},
			"connection_creation_rate=2.5 must be a whole number"},
		{"fractional byte rate", QuotaChange{Entity: []metadata.QuotaEntity{def("user")}, Values: set("consumer_byte_rate", 100.5)},
			"consumer_byte_rate=100.5 must be a whole number"},
		{"connection rate too large", QuotaChange{Entity: []metadata.QuotaEntity{def("ip")}, Values: set("connection_creation_rate", 1e10)},
			"is larger than 2147483647"},
		{"zero", QuotaChange{Entity: []metadata.QuotaEntity{def("ip")}, Values: set("connection_creation_rate", 0)}, "must be positive"},
		{"empty name", QuotaChange{Entity: []metadata.QuotaEntity{named("ip", "")}, Values: set("connection_creation_rate", 1)}, "empty ip name"},
		{"unknown type", QuotaChange{Entity: []metadata.QuotaEntity{named("group", "g")}, Values: set("producer_byte_rate", 1)}, `entity type "group"`},
		{"type twice", QuotaChange{Entity: []metadata.QuotaEntity{def("ip"), named("ip", "192.0.2.1")}, Values: set("connection_creation_rate", 1)}, "entity type ip twice"},
		{"no entity", QuotaChange{Values: set("producer_byte_rate", 1)}, "empty entity"},
	} {
		err := validateQuotaChange(c.change)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.want != "" && (err == nil || !errors.Is(err, kerr.InvalidRequest) || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: %v, want INVALID_REQUEST with %q", c.name, err, c.want)
		}
	}

	// A host name must resolve (Kafka's InetAddress.getByName); an address needs
	// no lookup.
	ctx := context.Background()
	if err := resolvableIPEntity(ctx, []metadata.QuotaEntity{named("ip", "2001:db8::1")}); err != nil {
		t.Errorf("an IPv6 address: %v", err)
	}
	if err := resolvableIPEntity(ctx, []metadata.QuotaEntity{named("ip", "localhost")}); err != nil {
		t.Errorf("localhost: %v", err)
	}
	if err := resolvableIPEntity(ctx, []metadata.QuotaEntity{named("ip", "no-such-host.invalid")}); err == nil || !errors.Is(err, kerr.InvalidRequest) {
		t.Errorf("a name that does not resolve: %v", err)
	}
}
