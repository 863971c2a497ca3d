package conformance

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/samsa-streaming/samsa/internal/testutil"
)

// TestConnectionRateQuotas runs every client's produce/consume round trip against
// a broker whose max.connection.creation.rate (KIP-612) bites: the listener delays
// its accepts, up to a second each. Each client must still deliver and read every
// record, and the broker's metrics must show that connections were delayed.
//
// The IP quota (connection_creation_rate) closes a connection over it, unread,
// after the throttle time, as Kafka does; librdkafka (kcat) and kafka-python give
// up when that happens to their bootstrap connection (kcat: "all broker
// connections are down"; kafka-python: it takes the broker for Kafka 0.9), with
// Kafka as here. That quota is for connection storms, not for a client's own few
// connections; test/integration's TestIPConnectionRateQuota drives it with franz-go
// and raw connections.
func TestConnectionRateQuotas(t *testing.T) {
	if os.Getenv(externalBrokerEnv) != "" {
		t.Skip("the quota scenario starts its own broker")
	}
	t.Parallel()
	metricsAddr := fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t))
	// Two samples of one second: a client's burst of new connections meets the
	// limit at once, and a delay is at most a second.
	tg := startTarget(t, "metrics.listener="+metricsAddr, "quota.window.num=2", "quota.window.size.seconds=1",
		"max.connection.creation.rate=2")
	for _, c := range allClients {
		t.Run(c.name, func(t *testing.T) {
			roundTrip(t, tg, "connrate", c, c, "none")
		})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	families, err := testutil.ScrapeMetrics(ctx, metricsAddr)
	if err != nil {
		t.Fatal(err)
	}
	// The listener's own limit is the broker-wide one here (a listener's falls back
	// to it), so either may be the one that delayed a connection.
	var n, secs float64
	for _, quota := range []string{"broker", "listener"} {
		n += max(0, testutil.MetricValue(families, "samsa_connection_throttles_total", map[string]string{"quota": quota}))
		secs += max(0, testutil.MetricValue(families, "samsa_connection_throttle_seconds_total", map[string]string{"quota": quota}))
	}
	if n <= 0 {
		t.Fatal("no connection was delayed by max.connection.creation.rate: the scenario did not exercise it")
	}
	t.Logf("connections delayed by max.connection.creation.rate: %v, for %.1f s in all", n, secs)
}
