package integration

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-streaming/samsa/internal/testutil"
)

// servedFrom reports whether a new connection from local (a loopback address: Linux
// routes all of 127.0.0.0/8 to the loopback device) to addr gets an answer to
// ApiVersions, or is closed unanswered.
func servedFrom(t *testing.T, addr, local string) bool {
	t.Helper()
	d := net.Dialer{Timeout: 10 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("dial %s from %s: %v", addr, local, err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	req := kmsg.NewPtrApiVersionsRequest()
	frame := []byte{0, 0, 0, 0, 0, 18, 0, 0, 0, 0, 0, 1, 0, 0} // ApiVersions v0, correlation id 1, no client id
	frame = req.AppendTo(frame)
	frame[3] = byte(len(frame) - 4)
	if _, err := c.Write(frame); err != nil {
		return false
	}
	_, err = c.Read(make([]byte, 4))
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("a connection from %s was neither answered nor closed within 10 s", local)
	}
	return err == nil
}

// setIPQuota sets (value > 0) or removes (0) connection_creation_rate of the IP
// entity ip ("" for the default IP entity) and waits until the broker enforces it
// (the quota is in the metadata log; the answer comes from the controller).
func setIPQuota(t *testing.T, adm *kadm.Client, ip string, value float64) error {
	t.Helper()
	e := kadm.ClientQuotaEntityComponent{Type: "ip"}
	if ip != "" {
		e.Name = kadm.StringPtr(ip)
	}
	op := kadm.AlterClientQuotaOp{Key: "connection_creation_rate", Value: value, Remove: value == 0}
	res, err := adm.AlterClientQuotas(ctxT(t, 20*time.Second), []kadm.AlterClientQuotaEntry{{Entity: []kadm.ClientQuotaEntityComponent{e}, Ops: []kadm.AlterClientQuotaOp{op}}})
	if err == nil {
		err = res[0].Err
		if err != nil && res[0].ErrMessage != "" {
			err = fmt.Errorf("%w: %s", err, res[0].ErrMessage)
		}
	}
	return err
}

// TestIPConnectionRateQuota holds connection_creation_rate quotas of IP entities
// (KIP-612, set with AlterClientQuotas) to what Kafka's brokers do: a new
// connection from an address over its quota is closed unanswered after the
// throttle time and not counted; other addresses are not affected; an address's
// own quota wins over the default IP entity's; a removed quota no longer applies;
// franz-go, from a throttled address, still produces and consumes (it retries the
// closed connections); the refusals are Kafka's.
func TestIPConnectionRateQuota(t *testing.T) {
	t.Parallel()
	metricsAddr := fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t))
	// Three samples of a second: a rate is measured over two seconds at least, so
	// 1 a second allows two new connections at once, and a connection made within
	// three seconds of the first is over it.
	b := testutil.StartBroker(t, "quota.window.num=3", "quota.window.size.seconds=1", "metrics.listener="+metricsAddr)
	adm := newAdmin(t, b) // connected from 127.0.0.1 before any quota
	createTopic(t, adm, "from-throttled", 1, nil)

	for _, c := range []struct {
		entity []kadm.ClientQuotaEntityComponent
		op     kadm.AlterClientQuotaOp
		want   string
	}{
		{[]kadm.ClientQuotaEntityComponent{{Type: "ip", Name: kadm.StringPtr("127.0.0.2")}, {Type: "user", Name: kadm.StringPtr("alice")}},
			kadm.AlterClientQuotaOp{Key: "connection_creation_rate", Value: 1}, "cannot be combined"},
		{[]kadm.ClientQuotaEntityComponent{{Type: "ip", Name: kadm.StringPtr("127.0.0.2")}},
			kadm.AlterClientQuotaOp{Key: "producer_byte_rate", Value: 1024}, "does not apply to this entity"},
		{[]kadm.ClientQuotaEntityComponent{{Type: "ip", Name: kadm.StringPtr("127.0.0.2")}},
			kadm.AlterClientQuotaOp{Key: "connection_creation_rate", Value: 2.5}, "must be a whole number"},
		{[]kadm.ClientQuotaEntityComponent{{Type: "ip", Name: kadm.StringPtr("no-such-host.invalid")}},
			kadm.AlterClientQuotaOp{Key: "connection_creation_rate", Value: 1}, "not an IP address or a host name that resolves"},
	} {
		res, err := adm.AlterClientQuotas(ctxT(t, 20*time.Second), []kadm.AlterClientQuotaEntry{{Entity: c.entity, Ops: []kadm.AlterClientQuotaOp{c.op}}})
		if err != nil {
			t.Fatal(err)
		}
		if !errors.Is(res[0].Err, kerr.InvalidRequest) || !strings.Contains(res[0].ErrMessage, c.want) {
			t.Errorf("%v %s=%v: %v %q, want INVALID_REQUEST with %q", c.entity, c.op.Key, c.op.Value, res[0].Err, res[0].ErrMessage, c.want)
		}
	}

	if err := setIPQuota(t, adm, "127.0.0.2", 1); err != nil {
		t.Fatal(err)
	}
	if err := setIPQuota(t, adm, "127.0.0.3", 1000); err != nil {
		t.Fatal(err)
	}
	described, err := adm.DescribeClientQuotas(ctxT(t, 10*time.Second), true, []kadm.DescribeClientQuotaComponent{{Type: "ip", MatchName: kadm.StringPtr("127.0.0.2")}})
	if err != nil || len(described) != 1 || len(described[0].Values) != 1 || described[0].Values[0].Key != "connection_creation_rate" || described[0].Values[0].Value != 1 {
		t.Fatalf("DescribeClientQuotas of ip 127.0.0.2: %+v %v", described, err)
	}

	// The first connections are within the quota; the next ones, not counted, are
	// over it as long as they come faster than one a second.
	testutil.WaitFor(t, 10*time.Second, func() bool { return !servedFrom(t, b.Addr, "127.0.0.2") }, "127.0.0.2's quota to close a connection")
	if servedFrom(t, b.Addr, "127.0.0.2") {
		t.Fatal("a connection from 127.0.0.2 right after a throttled one was served: a throttled connection must not count")
	}
	for i := range 5 {
		if !servedFrom(t, b.Addr, "127.0.0.3") {
			t.Fatalf("connection %d from 127.0.0.3, whose quota is 1000 a second, was closed", i)
		}
		if !servedFrom(t, b.Addr, "127.0.0.1") {
			t.Fatalf("connection %d from 127.0.0.1, which has no quota, was closed", i)
		}
	}

	// franz-go from the throttled address: its closed connections are retried until
	// one is accepted; the record is produced once and read back.
	dialer := &net.Dialer{Timeout: 10 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}}
	cl := newClient(t, b, kgo.Dialer(dialer.DialContext), kgo.RetryTimeout(60*time.Second),
		kgo.ConsumeTopics("from-throttled"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	ctx := ctxT(t, 90*time.Second)
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "from-throttled", Value: []byte("through the quota")}).FirstErr(); err != nil {
		t.Fatalf("produce from 127.0.0.2: %v", err)
	}
	var got []*kgo.Record
	for len(got) == 0 {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consume from 127.0.0.2: %v", err)
		}
		got = append(got, fs.Records()...)
	}
	if len(got) != 1 || string(got[0].Value) != "through the quota" || got[0].Offset != 0 {
		t.Fatalf("read back %d records, first at offset %d: %q", len(got), got[0].Offset, got[0].Value)
	}

	// The default IP entity applies to addresses without a quota of their own.
	if err := setIPQuota(t, adm, "", 1); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 10*time.Second, func() bool { return !servedFrom(t, b.Addr, "127.0.0.4") }, "the default IP quota to close a connection from 127.0.0.4")
	for i := range 5 {
		if !servedFrom(t, b.Addr, "127.0.0.3") {
			t.Fatalf("connection %d from 127.0.0.3 was closed: its own quota wins over the default", i)
		}
	}
	// Removed, the quotas no longer apply.
	if err := setIPQuota(t, adm, "", 0); err != nil {
		t.Fatal(err)
	}
	if err := setIPQuota(t, adm, "127.0.0.2", 0); err != nil {
		t.Fatal(err)
	}
	for _, from := range []string{"127.0.0.2", "127.0.0.4"} {
		testutil.WaitFor(t, 10*time.Second, func() bool { return servedFrom(t, b.Addr, from) }, "a connection from "+from+" to be served without its quota")
		for i := range 5 {
			if !servedFrom(t, b.Addr, from) {
				t.Fatalf("connection %d from %s was closed after its quota was removed", i, from)
			}
		}
	}

	families, err := testutil.ScrapeMetrics(context.Background(), metricsAddr)
	if err != nil {
		t.Fatal(err)
	}
	if n := testutil.MetricValue(families, "samsa_connection_throttles_total", map[string]string{"quota": "ip", "listener": "PLAINTEXT"}); n < 3 {
		t.Errorf("samsa_connection_throttles_total{quota=ip} = %v, want at least the 3 closes this test saw", n)
	}
}

// TestDynamicConnectionLimits: the broker-wide connection limits may be altered at
// run time (KIP-226), cluster-wide or per broker, as Kafka's DynamicConnectionQuota
// allows: max.connections.per.ip set dynamically closes a connection beyond it at
// once and, deleted, no longer applies; max.connection.creation.rate set
// dynamically delays new connections (samsa_connection_throttles_total counts
// them) and its invalid value is refused naming it; DescribeConfigs reports their
// dynamic source.
func TestDynamicConnectionLimits(t *testing.T) {
	t.Parallel()
	metricsAddr := fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t))
	b := testutil.StartBroker(t, "quota.window.num=2", "quota.window.size.seconds=1", "metrics.listener="+metricsAddr)
	adm := newAdmin(t, b)
	// The test's own clients connect from 127.0.0.1: an override keeps them out of
	// the limit, which the connections from 127.0.0.5 meet.
	overrides, one := "127.0.0.1:100", "1"
	if err := alterBroker(t, adm, -1, "max.connections.per.ip.overrides", &overrides); err != nil {
		t.Fatalf("set max.connections.per.ip.overrides for the cluster: %v", err)
	}
	if err := alterBroker(t, adm, -1, "max.connections.per.ip", &one); err != nil {
		t.Fatalf("set max.connections.per.ip=1 for the cluster: %v", err)
	}
	if got := describedConfig(t, adm, func(ctx context.Context) (kadm.ResourceConfigs, error) { return adm.DescribeBrokerConfigs(ctx, 1) }, "max.connections.per.ip"); !strings.HasPrefix(got, "1 DYNAMIC_DEFAULT_BROKER_CONFIG") {
		t.Fatalf("described max.connections.per.ip: %s", got)
	}
	// 127.0.0.5 has no connection open: its first is served, a second one beside it
	// is closed at once.
	d := net.Dialer{Timeout: 10 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.5")}}
	first, err := d.Dial("tcp", b.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	testutil.WaitFor(t, 10*time.Second, func() bool { return !servedFrom(t, b.Addr, "127.0.0.5") }, "a second connection from 127.0.0.5 to be closed under max.connections.per.ip=1")
	if err := alterBroker(t, adm, -1, "max.connections.per.ip", nil); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 10*time.Second, func() bool { return servedFrom(t, b.Addr, "127.0.0.5") }, "a second connection from 127.0.0.5 to be served once the limit is deleted")

	zero := "0"
	if err := alterBroker(t, adm, 1, "max.connection.creation.rate", &zero); err == nil || !strings.Contains(err.Error(), "max.connection.creation.rate") {
		t.Fatalf("max.connection.creation.rate=0 on broker 1: %v, want it refused naming the property", err)
	}
	rate := "1"
	if err := alterBroker(t, adm, 1, "max.connection.creation.rate", &rate); err != nil {
		t.Fatalf("set max.connection.creation.rate=1 on broker 1: %v", err)
	}
	throttled := func() float64 {
		families, err := testutil.ScrapeMetrics(context.Background(), metricsAddr)
		if err != nil {
			t.Fatal(err)
		}
		return max(0, testutil.MetricValue(families, "samsa_connection_throttles_total", map[string]string{"quota": "broker"})) +
			max(0, testutil.MetricValue(families, "samsa_connection_throttles_total", map[string]string{"quota": "listener"}))
	}
	// One a second, measured over a second at least: new connections in a row are
	// delayed, and every one is served.
	testutil.WaitFor(t, 20*time.Second, func() bool {
		if !servedFrom(t, b.Addr, "127.0.0.6") {
			t.Fatal("a connection was closed by max.connection.creation.rate, which delays connections")
		}
		return throttled() > 0
	}, "max.connection.creation.rate=1, set at run time, to delay a connection")
}
