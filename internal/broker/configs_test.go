package broker

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestDescribeConfigsIllegalTopicName: a topic resource whose name no topic can have
// is INVALID_TOPIC_EXCEPTION, as Kafka's Topic.validate answers before it looks the
// topic up; a legal name that is not a topic is UNKNOWN_TOPIC_OR_PARTITION.
func TestDescribeConfigsIllegalTopicName(t *testing.T) {
	b := startTestBroker(t)
	for name, want := range map[string]int16{
		"":                       kerr.InvalidTopicException.Code,
		".":                      kerr.InvalidTopicException.Code,
		"..":                     kerr.InvalidTopicException.Code,
		"a b":                    kerr.InvalidTopicException.Code,
		strings.Repeat("x", 250): kerr.InvalidTopicException.Code,
		"no-such-topic":          kerr.UnknownTopicOrPartition.Code,
		"__cluster_metadata":     kerr.UnknownTopicOrPartition.Code,
	} {
		req := kmsg.NewPtrDescribeConfigsRequest()
		res := kmsg.NewDescribeConfigsRequestResource()
		res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeTopic, name
		req.Resources = append(req.Resources, res)
		got := call[*kmsg.DescribeConfigsResponse](t, b, req).Resources[0]
		if got.ErrorCode != want {
			t.Errorf("topic %q: %v, want %v", name, kerr.ErrorForCode(got.ErrorCode), kerr.ErrorForCode(want))
		}
	}
}

// TestAlterConfigsRepeatedResource: a resource named twice in one AlterConfigs or
// IncrementalAlterConfigs request is INVALID_REQUEST at each place and not applied,
// as Kafka's ConfigAdminManager answers; another resource of the request is applied.
// With an authorizer that is so even for a resource the principal may not alter.
func TestAlterConfigsRepeatedResource(t *testing.T) {
	fx := newFuzzFixture(t)
	b := fx.b
	retention := func(topic string) string {
		tp, _ := b.image().Topic(topic)
		return tp.Configs["retention.ms"]
	}
	topic := func(name string) kmsg.IncrementalAlterConfigsRequestResource {
		res := kmsg.NewIncrementalAlterConfigsRequestResource()
		res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeTopic, name
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Name, c.Value = "retention.ms", kmsg.StringPtr("123456")
		res.Configs = append(res.Configs, c)
		return res
	}
	inc := kmsg.NewPtrIncrementalAlterConfigsRequest()
	inc.Resources = append(inc.Resources, topic(fuzzTopicA), topic(fuzzTopicB), topic(fuzzTopicA))
	codes := func(resources []kmsg.IncrementalAlterConfigsResponseResource) map[string][]int16 {
		out := map[string][]int16{}
		for _, r := range resources {
			out[r.ResourceName] = append(out[r.ResourceName], r.ErrorCode)
		}
		return out
	}
	got := codes(call[*kmsg.IncrementalAlterConfigsResponse](t, b, inc).Resources)
	if a := got[fuzzTopicA]; len(a) != 2 || a[0] != kerr.InvalidRequest.Code || a[1] != kerr.InvalidRequest.Code || len(got[fuzzTopicB]) != 1 || got[fuzzTopicB][0] != 0 {
		t.Errorf("IncrementalAlterConfigs: %v, want fuzz-a INVALID_REQUEST twice, fuzz-b done", got)
	}
	if retention(fuzzTopicA) != "" || retention(fuzzTopicB) != "123456" {
		t.Errorf("retention.ms: fuzz-a %q, fuzz-b %q; want fuzz-a untouched", retention(fuzzTopicA), retention(fuzzTopicB))
	}

	legacy := kmsg.NewPtrAlterConfigsRequest()
	for range 2 {
		res := kmsg.NewAlterConfigsRequestResource()
		res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeTopic, fuzzTopicA
		c := kmsg.NewAlterConfigsRequestResourceConfig()
		c.Name, c.Value = "retention.ms", kmsg.StringPtr("654321")
		res.Configs = append(res.Configs, c)
		legacy.Resources = append(legacy.Resources, res)
	}
	for _, r := range call[*kmsg.AlterConfigsResponse](t, b, legacy).Resources {
		if r.ErrorCode != kerr.InvalidRequest.Code {
			t.Errorf("AlterConfigs, fuzz-a twice: %v, want INVALID_REQUEST", kerr.ErrorForCode(r.ErrorCode))
		}
	}

	// fuzz:fuzz may not alter fuzz-b's configs: named twice, it is still INVALID_REQUEST.
	inc.Resources = []kmsg.IncrementalAlterConfigsRequestResource{topic(fuzzTopicB), topic(fuzzTopicB)}
	inc.SetVersion(1)
	for _, r := range callAs[*kmsg.IncrementalAlterConfigsResponse](t, fx.authz, fuzzPrincipal, inc).Resources {
		if r.ErrorCode != kerr.InvalidRequest.Code {
			t.Errorf("with an authorizer, fuzz-b twice: %v, want INVALID_REQUEST", kerr.ErrorForCode(r.ErrorCode))
		}
	}
}

// TestAlterConfigsNullValue: a legacy AlterConfigs config without a value is
// INVALID_REQUEST (naming the config) and nothing of the
// resource is applied, as Kafka's ConfigAdminManager answers; it was dropped and the
// others applied.
func TestAlterConfigsNullValue(t *testing.T) {
	b := startTestBroker(t)
	createTestTopic(t, b, "null-value", 1)
	req := kmsg.NewPtrAlterConfigsRequest()
	res := kmsg.NewAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeTopic, "null-value"
	for _, name := range []string{"segment.ms", "retention.ms"} {
		c := kmsg.NewAlterConfigsRequestResourceConfig()
		c.Name = name
		if name == "segment.ms" {
			c.Value = kmsg.StringPtr("100000")
		}
		res.Configs = append(res.Configs, c)
	}
	req.Resources = append(req.Resources, res)
	got := call[*kmsg.AlterConfigsResponse](t, b, req).Resources[0]
	if got.ErrorCode != kerr.InvalidRequest.Code || got.ErrorMessage == nil || !strings.HasPrefix(*got.ErrorMessage, "configs without a value: retention.ms;") {
		t.Fatalf("%v (%v), want INVALID_REQUEST naming retention.ms", kerr.ErrorForCode(got.ErrorCode), got.ErrorMessage)
	}
	if tp, _ := b.image().Topic("null-value"); len(tp.Configs) != 0 {
		t.Fatalf("configs %v applied", tp.Configs)
	}
}

// incrementalAlter sends one IncrementalAlterConfigs of configs to the topic and
// returns the resource's error code and message.
func incrementalAlter(t *testing.T, b *Broker, topic string, validateOnly bool, configs ...kmsg.IncrementalAlterConfigsRequestResourceConfig) (int16, string) {
	t.Helper()
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	req.ValidateOnly = validateOnly
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName, res.Configs = kmsg.ConfigResourceTypeTopic, topic, configs
	req.Resources = append(req.Resources, res)
	got := call[*kmsg.IncrementalAlterConfigsResponse](t, b, req).Resources[0]
	var msg string
	if got.ErrorMessage != nil {
		msg = *got.ErrorMessage
	}
	return got.ErrorCode, msg
}

func configOp(name string, op kmsg.IncrementalAlterConfigOp, value *string) kmsg.IncrementalAlterConfigsRequestResourceConfig {
	c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	c.Name, c.Op, c.Value = name, op, value
	return c
}

// TestIncrementalAlterConfigsListFromDefault: APPEND and SUBTRACT on a list config the
// topic does not set start from the config's default, and a list SUBTRACT empties is
// set to "" (validated as such), as Kafka's ConfigurationControlManager does: APPEND
// compact to a new topic's cleanup.policy is "delete,compact" (it was "compact", which
// stopped retention), SUBTRACT delete from it is refused as an empty cleanup.policy
// (it left the topic at delete, answering success).
func TestIncrementalAlterConfigsListFromDefault(t *testing.T) {
	b := startTestBroker(t)
	createTestTopic(t, b, "lists", 1)
	override := func(name string) (string, bool) {
		tp, _ := b.image().Topic("lists")
		v, ok := tp.Configs[name]
		return v, ok
	}
	if code, msg := incrementalAlter(t, b, "lists", false, configOp("cleanup.policy", kmsg.IncrementalAlterConfigOpSubtract, kmsg.StringPtr("delete"))); code != kerr.InvalidConfig.Code || !strings.Contains(msg, "cleanup.policy") {
		t.Errorf("SUBTRACT delete from the default cleanup.policy: %v %q, want INVALID_CONFIG naming cleanup.policy", kerr.ErrorForCode(code), msg)
	}
	if code, msg := incrementalAlter(t, b, "lists", false, configOp("cleanup.policy", kmsg.IncrementalAlterConfigOpAppend, kmsg.StringPtr("compact"))); code != 0 {
		t.Fatalf("APPEND compact: %v %q", kerr.ErrorForCode(code), msg)
	}
	if v, _ := override("cleanup.policy"); v != "delete,compact" {
		t.Errorf("cleanup.policy after APPEND compact to the default: %q, want \"delete,compact\"", v)
	}
	const throttled = "leader.replication.throttled.replicas"
	for _, op := range []kmsg.IncrementalAlterConfigOp{kmsg.IncrementalAlterConfigOpAppend, kmsg.IncrementalAlterConfigOpSubtract} {
		if code, msg := incrementalAlter(t, b, "lists", false, configOp(throttled, op, kmsg.StringPtr("0:1"))); code != 0 {
			t.Fatalf("%v %s: %v %q", op, throttled, kerr.ErrorForCode(code), msg)
		}
	}
	if v, ok := override(throttled); !ok || v != "" {
		t.Errorf("%s after APPEND and SUBTRACT of 0:1: %q (set %v), want set to \"\"", throttled, v, ok)
	}
}

// TestDescribeConfigsBrokerResources: a broker describes its own configs by id; ""
// is the cluster-wide dynamic defaults, none set here (Kafka's ConfigHelper
// describes those set only: it listed every static property); another broker's id or
// a name that is no id is INVALID_REQUEST with a message naming it.
func TestDescribeConfigsBrokerResources(t *testing.T) {
	b := startTestBroker(t)
	for _, tc := range []struct {
		name    string
		code    int16
		configs bool
	}{
		{"1", 0, true},
		{"", 0, false},
		{"7", kerr.InvalidRequest.Code, false},
		{"abc", kerr.InvalidRequest.Code, false},
	} {
		req := kmsg.NewPtrDescribeConfigsRequest()
		res := kmsg.NewDescribeConfigsRequestResource()
		res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeBroker, tc.name
		req.Resources = append(req.Resources, res)
		got := call[*kmsg.DescribeConfigsResponse](t, b, req).Resources[0]
		if got.ErrorCode != tc.code || (len(got.Configs) > 0) != tc.configs {
			t.Errorf("broker %q: %v, %d configs; want %v, configs %v", tc.name, kerr.ErrorForCode(got.ErrorCode), len(got.Configs), kerr.ErrorForCode(tc.code), tc.configs)
		}
		if tc.code != 0 && (got.ErrorMessage == nil || !strings.Contains(*got.ErrorMessage, tc.name)) {
			t.Errorf("broker %q: message %v does not name it", tc.name, got.ErrorMessage)
		}
	}
}

// TestDescribeConfigsOtherBrokersAnswerShortly: a BROKER or BROKER_LOGGER resource
// naming another broker or no broker id is answered with a short message naming it
// (what to ask instead): 10,000 such resources in one request were answered with
// 9.5 times its size, the message (about 90 bytes) saying each thing twice.
func TestDescribeConfigsOtherBrokersAnswerShortly(t *testing.T) {
	b := startTestBroker(t)
	req := kmsg.NewPtrDescribeConfigsRequest()
	for i := range 5000 {
		for _, typ := range []kmsg.ConfigResourceType{kmsg.ConfigResourceTypeBroker, kmsg.ConfigResourceTypeBrokerLogger} {
			req.Resources = append(req.Resources,
				kmsg.DescribeConfigsRequestResource{ResourceType: typ, ResourceName: strconv.Itoa(i + 2)},
				kmsg.DescribeConfigsRequestResource{ResourceType: typ, ResourceName: fmt.Sprintf("x%d", i)})
		}
	}
	resp := call[*kmsg.DescribeConfigsResponse](t, b, req)
	for _, r := range resp.Resources {
		if r.ErrorCode != kerr.InvalidRequest.Code || r.ErrorMessage == nil || !strings.Contains(*r.ErrorMessage, r.ResourceName) {
			t.Fatalf("%v %q: %v %v, want INVALID_REQUEST naming it", r.ResourceType, r.ResourceName, kerr.ErrorForCode(r.ErrorCode), r.ErrorMessage)
		}
	}
	if n, m := len(resp.AppendTo(nil)), len(req.AppendTo(nil)); n > 6*m { // it was 9.5 times
		t.Errorf("a %d KiB request answered with %d KiB, want at most 6 times the request", m>>10, n>>10)
	}
}

// TestDescribeConfigsTopicSynonyms: a topic config's synonyms (IncludeSynonyms) are
// its override, then the broker properties it defaults to where set and with their
// defaults, from the first entry for the main broker property on, and its source is
// the first synonym's, as Kafka's ConfigHelper answers: retention.ms, whose broker
// list starts at log.retention.ms (no default), has none and DEFAULT_CONFIG even with
// log.retention.hours set (Samsa answered STATIC_BROKER_CONFIG and listed
// log.retention.hours).
func TestDescribeConfigsTopicSynonyms(t *testing.T) {
	b := startTestBrokerWith(t, nil, []string{"log.retention.hours=2", "log.roll.ms=5000"}, t.TempDir())
	createTestTopic(t, b, "syn", 1)
	if code, msg := incrementalAlter(t, b, "syn", false, configOp("max.message.bytes", kmsg.IncrementalAlterConfigOpSet, kmsg.StringPtr("2000"))); code != 0 {
		t.Fatalf("set max.message.bytes: %v %q", kerr.ErrorForCode(code), msg)
	}
	req := kmsg.NewPtrDescribeConfigsRequest()
	req.IncludeSynonyms = true
	res := kmsg.NewDescribeConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeTopic, "syn"
	res.ConfigNames = []string{"retention.ms", "segment.ms", "max.message.bytes", "flush.ms"}
	req.Resources = append(req.Resources, res)
	got := map[string]string{}
	for _, c := range call[*kmsg.DescribeConfigsResponse](t, b, req).Resources[0].Configs {
		s := fmt.Sprintf("%s=%s %v:", c.Name, *c.Value, c.Source)
		for _, syn := range c.ConfigSynonyms {
			s += fmt.Sprintf(" %v/%s=%s", syn.Source, syn.Name, *syn.Value)
		}
		got[c.Name] = s
	}
	for name, want := range map[string]string{
		"retention.ms":      "retention.ms=7200000 DEFAULT_CONFIG:",
		"segment.ms":        "segment.ms=5000 STATIC_BROKER_CONFIG: STATIC_BROKER_CONFIG/log.roll.ms=5000 DEFAULT_CONFIG/log.roll.hours=168",
		"max.message.bytes": "max.message.bytes=2000 DYNAMIC_TOPIC_CONFIG: DYNAMIC_TOPIC_CONFIG/max.message.bytes=2000 DEFAULT_CONFIG/message.max.bytes=1048588",
		"flush.ms":          "flush.ms=9223372036854775807 DEFAULT_CONFIG:",
	} {
		if got[name] != want {
			t.Errorf("got  %s\nwant %s", got[name], want)
		}
	}
}

// TestDescribeConfigsBrokerLogger: a BROKER_LOGGER resource named by the broker's id
// describes its root logger with source DYNAMIC_BROKER_LOGGER_CONFIG, as Kafka
// describes its log4j loggers (it was INVALID_REQUEST, unsupported); "" and another
// id are INVALID_REQUEST, as on Kafka.
func TestDescribeConfigsBrokerLogger(t *testing.T) {
	b := startTestBroker(t)
	for name, want := range map[string]int16{"1": 0, "": kerr.InvalidRequest.Code, "7": kerr.InvalidRequest.Code} {
		req := kmsg.NewPtrDescribeConfigsRequest()
		res := kmsg.NewDescribeConfigsRequestResource()
		res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeBrokerLogger, name
		req.Resources = append(req.Resources, res)
		got := call[*kmsg.DescribeConfigsResponse](t, b, req).Resources[0]
		if got.ErrorCode != want {
			t.Errorf("broker logger %q: %v, want %v", name, kerr.ErrorForCode(got.ErrorCode), kerr.ErrorForCode(want))
		}
		if want != 0 {
			continue
		}
		// The test broker logs nothing (slog.DiscardHandler).
		if len(got.Configs) != 1 || got.Configs[0].Name != "root" || got.Configs[0].Value == nil || *got.Configs[0].Value != "OFF" ||
			got.Configs[0].Source != kmsg.ConfigSourceDynamicBrokerLoggerConfig {
			t.Errorf("broker logger %q: configs %+v, want root=OFF from DYNAMIC_BROKER_LOGGER_CONFIG", name, got.Configs)
		}
	}
}

// TestDynamicBrokerConfigConflict: a dynamic broker config that conflicts with the
// broker's other properties (log.cleaner.min.compaction.lag.ms above
// log.cleaner.max.compaction.lag.ms) is refused INVALID_REQUEST naming them and not
// stored, as Kafka validates the whole resulting configuration; it was stored, and then
// ignored by every broker with only a warning in the log.
func TestDynamicBrokerConfigConflict(t *testing.T) {
	b := startTestBrokerWith(t, nil, []string{"log.cleaner.max.compaction.lag.ms=5000"}, t.TempDir())
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType = kmsg.ConfigResourceTypeBroker
	res.Configs = append(res.Configs, configOp("log.cleaner.min.compaction.lag.ms", kmsg.IncrementalAlterConfigOpSet, kmsg.StringPtr("10000")))
	req.Resources = append(req.Resources, res)
	got := call[*kmsg.IncrementalAlterConfigsResponse](t, b, req).Resources[0]
	if got.ErrorCode != kerr.InvalidRequest.Code || got.ErrorMessage == nil || !strings.Contains(*got.ErrorMessage, "log.cleaner.min.compaction.lag.ms") {
		t.Errorf("conflicting dynamic config: %v %v, want INVALID_REQUEST naming it", kerr.ErrorForCode(got.ErrorCode), got.ErrorMessage)
	}
	if stored := b.image().BrokerConfigs(""); len(stored) != 0 {
		t.Errorf("stored %v", stored)
	}
}
