package conformance

import (
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/samsa-streaming/samsa/internal/testutil"
)

// TestSecurity runs a produce/consume round trip with every client over SSL,
// SASL_PLAINTEXT and SASL_SSL, with PLAIN and SCRAM (kafka-python authenticates
// with SaslHandshake v0 and raw tokens, the others with SaslAuthenticate).
func TestSecurity(t *testing.T) {
	if os.Getenv(externalBrokerEnv) != "" {
		t.Skip("the security scenarios start their own broker")
	}
	sb := testutil.StartSecureBroker(t, testutil.SecureOptions{
		PlainUsers: map[string]string{"alice": "alice-secret"},
		ScramUsers: map[string]string{"carol": "carol-secret"},
	})
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("broker log (tail):\n%s", tail(sb.Log(), 60))
		}
	})
	base := &target{broker: sb.Broker, suffix: strconv.FormatInt(time.Now().UnixNano()%1_000_000_000, 36), admin: sb.Plaintext}
	listeners := []struct {
		name     string
		addr     string
		security []string
	}{
		{"SASL_PLAINTEXT-PLAIN", sb.SASLPlaintext, []string{"--security-protocol", "SASL_PLAINTEXT", "--sasl-mechanism", "PLAIN", "--user", "alice", "--password", "alice-secret"}},
		{"SASL_PLAINTEXT-SCRAM-SHA-256", sb.SASLPlaintext, []string{"--security-protocol", "SASL_PLAINTEXT", "--sasl-mechanism", "SCRAM-SHA-256", "--user", "carol", "--password", "carol-secret"}},
		{"SSL", sb.SSL, []string{"--security-protocol", "SSL", "--ca", sb.CA.File}},
		{"SASL_SSL-SCRAM-SHA-512", sb.SASLSSL, []string{"--security-protocol", "SASL_SSL", "--sasl-mechanism", "SCRAM-SHA-512", "--user", "carol", "--password", "carol-secret", "--ca", sb.CA.File}},
		{"SASL_SSL-PLAIN", sb.SASLSSL, []string{"--security-protocol", "SASL_SSL", "--sasl-mechanism", "PLAIN", "--user", "alice", "--password", "alice-secret", "--ca", sb.CA.File}},
	}
	for _, c := range allClients {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			for _, l := range listeners {
				t.Run(l.name, func(t *testing.T) {
					tg := *base
					tg.addr, tg.security = l.addr, l.security
					roundTrip(t, &tg, "sec."+strings.ToLower(l.name), c, c, "none")
				})
			}
		})
	}
}
