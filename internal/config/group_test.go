package config

import (
	"reflect"
	"strings"
	"testing"
)

func TestValidateGroupConfigs(t *testing.T) {
	b := Default()
	cases := []struct {
		name    string
		next    map[string]string
		changed []string
		want    string // "" for valid, else a part of the error
	}{
		{"within the broker's bounds", map[string]string{"consumer.session.timeout.ms": "50000"}, []string{"consumer.session.timeout.ms"}, ""},
		{"below the broker's bound", map[string]string{"consumer.session.timeout.ms": "30000"}, []string{"consumer.session.timeout.ms"},
			"consumer.session.timeout.ms=30000 is outside [group.consumer.min.session.timeout.ms=45000, group.consumer.max.session.timeout.ms=60000]"},
		{"above the broker's bound", map[string]string{"share.heartbeat.interval.ms": "20000"}, []string{"share.heartbeat.interval.ms"},
			"share.heartbeat.interval.ms=20000 is outside [group.share.min.heartbeat.interval.ms=5000, group.share.max.heartbeat.interval.ms=15000]"},
		{"not a number", map[string]string{"consumer.heartbeat.interval.ms": "soon"}, []string{"consumer.heartbeat.interval.ms"},
			"consumer.heartbeat.interval.ms=soon must be an integer"},
		{"above the broker's delivery count bound", map[string]string{"share.delivery.count.limit": "65536"}, []string{"share.delivery.count.limit"},
			"share.delivery.count.limit=65536 is outside [group.share.min.delivery.count.limit=2, group.share.max.delivery.count.limit=10]"},
		{"lock duration above the broker's bound", map[string]string{"share.record.lock.duration.ms": "70000"}, []string{"share.record.lock.duration.ms"},
			"share.record.lock.duration.ms=70000 is outside [group.share.min.record.lock.duration.ms=15000, group.share.max.record.lock.duration.ms=60000]"},
		{"lock duration below the broker's bound", map[string]string{"share.record.lock.duration.ms": "5000"}, []string{"share.record.lock.duration.ms"},
			"share.record.lock.duration.ms=5000 is outside [group.share.min.record.lock.duration.ms=15000"},
		{"unknown", map[string]string{"consumer.poll.ms": "1"}, []string{"consumer.poll.ms"}, "consumer.poll.ms is not a group config"},
		{"deleted", map[string]string{}, []string{"consumer.session.timeout.ms"}, ""},
		{"a bad value stored before is not checked again", map[string]string{"share.auto.offset.reset": "never", "share.delivery.count.limit": "3"},
			[]string{"share.delivery.count.limit"}, ""},
		{"renew acknowledgements disabled", map[string]string{"share.renew.acknowledge.enable": "false"}, []string{"share.renew.acknowledge.enable"}, ""},
		{"renew acknowledgements in any case", map[string]string{"share.renew.acknowledge.enable": " TRUE "}, []string{"share.renew.acknowledge.enable"}, ""},
		{"renew acknowledgements as a number", map[string]string{"share.renew.acknowledge.enable": "1"}, []string{"share.renew.acknowledge.enable"},
			"share.renew.acknowledge.enable=1 must be true or false"},
	}
	for _, c := range cases {
		err := ValidateGroupConfigs(b, c.next, c.changed)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: error %v, want one containing %q", c.name, err, c.want)
		}
	}

	// With wider bounds, a session timeout must still stay above its heartbeat
	// interval, the broker's value standing in for the one not set.
	b.GroupShareMinSessionTimeoutMs, b.GroupShareMaxHeartbeatIntervalMs = 1000, 60000
	err := ValidateGroupConfigs(b, map[string]string{"share.session.timeout.ms": "4000"}, []string{"share.session.timeout.ms"})
	if err == nil || !strings.Contains(err.Error(), "share.session.timeout.ms=4000 must be above share.heartbeat.interval.ms=5000") {
		t.Errorf("session below the broker's heartbeat interval: %v", err)
	}
	err = ValidateGroupConfigs(b, map[string]string{"share.session.timeout.ms": "50000", "share.heartbeat.interval.ms": "50000"}, []string{"share.heartbeat.interval.ms"})
	if err == nil || !strings.Contains(err.Error(), "must be above share.heartbeat.interval.ms=50000") {
		t.Errorf("heartbeat equal to the session: %v", err)
	}
}

// TestGroupBool: share.renew.acknowledge.enable is true unless the group sets it
// false (Kafka's GroupConfig.SHARE_RENEW_ACKNOWLEDGE_ENABLE_DEFAULT), in any case.
func TestGroupBool(t *testing.T) {
	b := Default()
	for _, c := range []struct {
		stored string
		want   bool
	}{{"", true}, {"true", true}, {"false", false}, {"False", false}, {" TRUE ", true}} {
		overrides := map[string]string{}
		if c.stored != "" {
			overrides["share.renew.acknowledge.enable"] = c.stored
		}
		if got := GroupBool(b, overrides, "share.renew.acknowledge.enable"); got != c.want {
			t.Errorf("stored %q: %v, want %v", c.stored, got, c.want)
		}
	}
}

func TestGroupIntKeepsWithinBounds(t *testing.T) {
	b := Default()
	for _, c := range []struct {
		stored string
		want   int
	}{{"", 45000}, {"50000", 50000}, {"120000", 60000}, {"1000", 45000}} {
		overrides := map[string]string{}
		if c.stored != "" {
			overrides["consumer.session.timeout.ms"] = c.stored
		}
		if got := GroupInt(b, overrides, "consumer.session.timeout.ms"); got != c.want {
			t.Errorf("stored %q: %d ms, want %d", c.stored, got, c.want)
		}
	}
}

// TestDescribeGroupSynonyms: a group config's source and synonyms, as Kafka's
// ConfigHelper.createGroupConfigEntry gives them: a config set on the group is
// GROUP_CONFIG, followed by the broker's group.* property (STATIC_BROKER_CONFIG when
// set in its configuration, then its DEFAULT_CONFIG); an unset one takes its source
// from the broker property. A group config without a broker property has its own
// default as a DEFAULT_CONFIG synonym (Samsa gave none).
func TestDescribeGroupSynonyms(t *testing.T) {
	b, err := Load("", []string{"group.consumer.session.timeout.ms=50000"})
	if err != nil {
		t.Fatal(err)
	}
	entries := DescribeGroup(b, map[string]string{"share.auto.offset.reset": "earliest", "share.session.timeout.ms": "40000"})
	byName := map[string]Entry{}
	for _, e := range entries {
		byName[e.Name] = e
	}
	cases := []struct {
		name, value string
		source      int8
		synonyms    []Synonym
	}{
		{"consumer.session.timeout.ms", "50000", SourceStaticBroker, []Synonym{
			{Name: "group.consumer.session.timeout.ms", Value: "50000", Source: SourceStaticBroker},
			{Name: "group.consumer.session.timeout.ms", Value: "45000", Source: SourceDefault}}},
		{"share.session.timeout.ms", "40000", SourceGroup, []Synonym{
			{Name: "share.session.timeout.ms", Value: "40000", Source: SourceGroup},
			{Name: "group.share.session.timeout.ms", Value: "45000", Source: SourceDefault}}},
		{"share.auto.offset.reset", "earliest", SourceGroup, []Synonym{
			{Name: "share.auto.offset.reset", Value: "earliest", Source: SourceGroup},
			{Name: "share.auto.offset.reset", Value: "latest", Source: SourceDefault}}},
		{"share.isolation.level", "read_uncommitted", SourceDefault, []Synonym{
			{Name: "share.isolation.level", Value: "read_uncommitted", Source: SourceDefault}}},
		{"share.renew.acknowledge.enable", "true", SourceDefault, []Synonym{
			{Name: "share.renew.acknowledge.enable", Value: "true", Source: SourceDefault}}},
	}
	for _, c := range cases {
		e := byName[c.name]
		if e.Value != c.value || e.Source != c.source || !reflect.DeepEqual(e.Synonyms, c.synonyms) {
			t.Errorf("%s: value %q source %v synonyms %+v; want %q %v %+v", c.name, e.Value, e.Source, e.Synonyms, c.value, c.source, c.synonyms)
		}
	}
}
