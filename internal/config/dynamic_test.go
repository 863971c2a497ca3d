package config

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// TestWithDynamic: a broker's effective configuration is its static properties
// overlaid by the cluster-wide dynamic configs, then by its own node's, each setting
// resolved from the merged set with its synonyms (a static log.retention.ms still wins
// over a dynamic log.retention.hours, as in Kafka); the static configuration is left
// as it was, and DescribeBroker / DescribeTopic report the dynamic sources in Kafka's
// synonym order.
func TestWithDynamic(t *testing.T) {
	static, err := Load("", []string{"log.retention.hours=5", "log.segment.bytes=100000", "message.max.bytes=2000"})
	if err != nil {
		t.Fatal(err)
	}
	eff, err := static.WithDynamic(
		map[string]string{"log.retention.ms": "1000", "log.segment.bytes": "50000", "min.insync.replicas": "2"},
		map[string]string{"log.segment.bytes": "60000"})
	if err != nil {
		t.Fatal(err)
	}
	if eff.LogRetentionMs != 1000 || eff.LogSegmentBytes != 60000 || eff.MinInsyncReplicas != 2 || eff.MessageMaxBytes != 2000 {
		t.Errorf("effective: retention %d segment %d min ISR %d max message %d", eff.LogRetentionMs, eff.LogSegmentBytes, eff.MinInsyncReplicas, eff.MessageMaxBytes)
	}
	if static.LogRetentionMs != 5*3_600_000 || static.LogSegmentBytes != 100000 || static.DynamicDefault != nil {
		t.Errorf("the static configuration changed: retention %d segment %d", static.LogRetentionMs, static.LogSegmentBytes)
	}
	tc, err := ResolveTopic(eff, nil)
	if err != nil || tc.RetentionMs != 1000 || tc.SegmentBytes != 60000 || tc.MinInsyncReplicas != 2 {
		t.Errorf("topic defaults: %+v %v", tc, err)
	}
	var segment Entry
	for _, e := range DescribeTopic(eff, nil) {
		if e.Name == "segment.bytes" {
			segment = e
		}
	}
	want := []Synonym{{"log.segment.bytes", "60000", SourceDynamicBroker}, {"log.segment.bytes", "50000", SourceDynamicDefaultBroker},
		{"log.segment.bytes", "100000", SourceStaticBroker}, {"log.segment.bytes", "1073741824", SourceDefault}}
	if segment.Value != "60000" || segment.Source != SourceDynamicBroker || segment.CreateSource != SourceDynamicBroker || !slices.Equal(segment.Synonyms, want) {
		t.Errorf("segment.bytes = %+v", segment)
	}
	for _, e := range DescribeBroker(eff) {
		if e.Name == "min.insync.replicas" && (e.Value != "2" || e.Source != SourceDynamicDefaultBroker || e.ReadOnly) {
			t.Errorf("min.insync.replicas = %+v", e)
		}
	}
	if got := DescribeDynamicDefaults(eff); len(got) != 3 || got[1].Name != "log.segment.bytes" || got[1].Value != "50000" ||
		!slices.Equal(got[1].Synonyms, want[1:]) {
		t.Errorf("dynamic defaults = %+v", got)
	}

	// A static log.retention.ms wins over a dynamic log.retention.hours.
	static, _ = Load("", []string{"log.retention.ms=7"})
	if eff, _ := static.WithDynamic(map[string]string{"log.retention.hours": "1"}, nil); eff.LogRetentionMs != 7 {
		t.Errorf("static log.retention.ms=7 with dynamic log.retention.hours=1: %d", eff.LogRetentionMs)
	}
	// Unusable dynamic configs are reported and left out.
	if eff, err := static.WithDynamic(map[string]string{"log.dirs": "/x", "log.segment.bytes": "1"}, nil); err == nil || eff != static {
		t.Errorf("unusable dynamic configs: %v, static kept %v", err, eff == static)
	}
}

// TestValidateDynamicBrokerConfigs: only the properties that are topic defaults may be
// set dynamically (the error names every other one and where to set it); values are
// checked by the property's spec, naming it and the value.
func TestValidateDynamicBrokerConfigs(t *testing.T) {
	next := map[string]string{"log.retention.ms": "5", "listeners": "x", "num.io.threads": "3"}
	err := ValidateDynamicBrokerConfigs(next, []string{"listeners", "log.retention.ms", "num.io.threads"})
	if err == nil || !strings.Contains(err.Error(), "listeners, num.io.threads") || !strings.Contains(err.Error(), "server.properties") || strings.Contains(err.Error(), "log.retention.ms") {
		t.Errorf("static properties: %v", err)
	}
	err = ValidateDynamicBrokerConfigs(map[string]string{"log.segment.bytes": "3"}, []string{"log.segment.bytes"})
	if !errors.Is(err, ErrInvalidValue) || !strings.Contains(err.Error(), "log.segment.bytes") || !strings.Contains(err.Error(), "3") {
		t.Errorf("bad value: %v", err)
	}
	if err := ValidateDynamicBrokerConfigs(map[string]string{"compression.type": "zstd", "unclean.leader.election.enable": "true"}, []string{"compression.type"}); err != nil {
		t.Errorf("dynamic properties: %v", err)
	}
	if err := ValidateDynamicBrokerConfigs(map[string]string{}, []string{"listeners"}); err != nil {
		t.Errorf("deleting a property not set: %v", err)
	}
}
