package integration

import (
	"errors"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/samsa-streaming/samsa/internal/testutil"
)

// TestListConfigResources: kadm's ListConfigResources (KIP-1142, Kafka 4.1) lists the
// topics, the broker (as BROKER and BROKER_LOGGER resources) and the groups with a
// config set, by type or all together; a type outside Kafka's five is
// UNSUPPORTED_VERSION; version 0 (ListClientMetricsResources) lists no client-metrics
// resources, as none exist.
func TestListConfigResources(t *testing.T) {
	t.Parallel()
	b := testutil.StartBroker(t)
	cl := newClient(t, b)
	adm := kadm.NewClient(cl)
	for _, topic := range []string{"lcr-a", "lcr-b"} {
		createTopic(t, adm, topic, 1, nil)
	}
	if code, msg := alterGroupConfigs(t, cl, "lcr-group", map[string]string{"share.auto.offset.reset": "earliest"}); code != 0 {
		t.Fatalf("setting a config of group lcr-group: %v %s", kerr.ErrorForCode(code), msg)
	}

	names := func(l kadm.ListedConfigResources, typ kadm.ConfigResourceType) []string {
		var out []string
		for _, r := range l.FilterTypes(typ) {
			out = append(out, r.Name)
		}
		slices.Sort(out)
		return out
	}
	var all kadm.ListedConfigResources
	var err error
	testutil.WaitFor(t, 10*time.Second, func() bool { // the group config reaches the broker's image
		all, err = adm.ListConfigResources(ctxT(t, 10*time.Second))
		return err == nil && all.Err == nil && slices.Contains(names(all, kadm.ConfigResourceGroupConfig), "lcr-group")
	}, "ListConfigResources listing group lcr-group")
	md, err := adm.BrokerMetadata(ctxT(t, 10*time.Second))
	if err != nil || len(md.Brokers) != 1 {
		t.Fatalf("broker metadata: %+v, %v", md, err)
	}
	node := strconv.Itoa(int(md.Brokers[0].NodeID))
	for typ, want := range map[kadm.ConfigResourceType][]string{
		kadm.ConfigResourceGroupConfig:  {"lcr-group"},
		kadm.ConfigResourceBroker:       {node},
		kadm.ConfigResourceBrokerLogger: {node},
		kadm.ConfigResourceTopic:        {"lcr-a", "lcr-b"},
	} {
		if got := names(all, typ); !slices.Equal(got, want) {
			t.Errorf("ListConfigResources of every type lists %v of type %v; want %v", got, typ, want)
		}
	}
	if len(all.Resources) != 5 {
		t.Errorf("ListConfigResources of every type lists %d resources, want 5: %v", len(all.Resources), all.Sorted())
	}

	groups, err := adm.ListConfigResources(ctxT(t, 10*time.Second), kadm.ConfigResourceGroupConfig, kadm.ConfigResourceClientMetrics)
	if err != nil || groups.Err != nil || len(groups.Resources) != 1 || groups.Resources[0] != (kadm.ConfigResource{Name: "lcr-group", Type: kadm.ConfigResourceGroupConfig}) {
		t.Errorf("ListConfigResources of groups and client metrics: %+v, %v; want group lcr-group alone", groups, err)
	}
	if unknown, err := adm.ListConfigResources(ctxT(t, 10*time.Second), kadm.ConfigResourceType(3)); err != nil || !errors.Is(unknown.Err, kerr.UnsupportedVersion) {
		t.Errorf("ListConfigResources of type 3: %+v, %v; want UNSUPPORTED_VERSION", unknown, err)
	}

	v0 := kversion.Stable()
	v0.SetMaxKeyVersion(int16(kmsg.ListConfigResources), 0)
	old := kadm.NewClient(newClient(t, b, kgo.MaxVersions(v0)))
	metrics, err := old.ListConfigResources(ctxT(t, 10*time.Second))
	if err != nil || metrics.Err != nil || len(metrics.Resources) != 0 {
		t.Errorf("ListConfigResources v0 (client metrics): %+v, %v; want none", metrics, err)
	}
}
