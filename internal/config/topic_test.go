package config

import (
	"errors"
	"math"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
)

func TestResolveTopicDefaults(t *testing.T) {
	got, err := ResolveTopic(Default(), nil)
	if err != nil {
		t.Fatal(err)
	}
	want := Topic{
		CleanupPolicy:                   []string{"delete"},
		RetentionMs:                     604800000,
		RetentionBytes:                  -1,
		SegmentBytes:                    1073741824,
		SegmentMs:                       604800000,
		SegmentIndexBytes:               10485760,
		IndexIntervalBytes:              4096,
		MaxMessageBytes:                 1048588,
		MessageTimestampType:            "CreateTime",
		MessageTimestampBeforeMaxMs:     math.MaxInt64,
		MessageTimestampAfterMaxMs:      math.MaxInt64,
		MessageTimestampDifferenceMaxMs: math.MaxInt64,
		MinInsyncReplicas:               1,
		FlushMessages:                   math.MaxInt64,
		FlushMs:                         math.MaxInt64,
		DeleteRetentionMs:               86400000,
		MinCompactionLagMs:              0,
		MaxCompactionLagMs:              math.MaxInt64,
		MinCleanableDirtyRatio:          0.5,
		FileDeleteDelayMs:               60000,
		CompressionType:                 "producer",
		CompressionGzipLevel:            -1,
		CompressionLz4Level:             9,
		CompressionZstdLevel:            3,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("ResolveTopic(Default(), nil) =\n%+v\nwant\n%+v", got, want)
	}
}

func TestResolveTopicPrecedence(t *testing.T) {
	b, err := Load("", []string{
		"log.retention.hours=1", "log.segment.bytes=5000", "log.cleanup.policy=compact",
		"log.flush.interval.ms=250", "message.max.bytes=777", "compression.type=uncompressed",
		"log.cleaner.min.cleanable.ratio=0.25",
	})
	if err != nil {
		t.Fatal(err)
	}
	// Broker properties set explicitly become the topic defaults.
	got, err := ResolveTopic(b, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got.RetentionMs != 3_600_000 || got.SegmentBytes != 5000 || !got.Compact() || got.Delete() ||
		got.FlushMs != 250 || got.MaxMessageBytes != 777 || got.CompressionType != "none" ||
		got.MinCleanableDirtyRatio != 0.25 {
		t.Errorf("broker defaults not applied: %+v", got)
	}
	// Topic overrides beat them.
	got, err = ResolveTopic(b, map[string]string{
		"retention.ms": "-1", "segment.bytes": "1048576", "cleanup.policy": "compact,delete",
		"flush.ms": "10", "max.message.bytes": "100", "compression.type": "zstd",
		"min.cleanable.dirty.ratio": "0.9", "unclean.leader.election.enable": "true",
		"segment.ms": "60000", "preallocate": "true",
	})
	if err != nil {
		t.Fatal(err)
	}
	if got.RetentionMs != -1 || got.SegmentBytes != 1048576 || !got.Compact() || !got.Delete() ||
		got.FlushMs != 10 || got.MaxMessageBytes != 100 || got.CompressionType != "zstd" ||
		got.MinCleanableDirtyRatio != 0.9 || !got.UncleanLeaderElectionEnable || got.SegmentMs != 60000 {
		t.Errorf("topic overrides not applied: %+v", got)
	}
}

func TestResolveTopicErrors(t *testing.T) {
	_, err := ResolveTopic(Default(), map[string]string{
		"retention.ms": "soon", "segment.bytes": "1", "no.such.config": "1", "num.partitions": "3",
	})
	if err == nil {
		t.Fatal("ResolveTopic accepted bad overrides")
	}
	for _, want := range []string{"retention.ms", "segment.bytes", "no.such.config", "num.partitions is a broker property"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not mention %q: %v", want, err)
		}
	}
	if !errors.Is(err, ErrInvalidValue) || !errors.Is(err, ErrUnknownProperty) {
		t.Errorf("error does not wrap both sentinels: %v", err)
	}

	_, err = ResolveTopic(Default(), map[string]string{"min.compaction.lag.ms": "100", "max.compaction.lag.ms": "50"})
	if !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("min.compaction.lag.ms > max.compaction.lag.ms: err = %v, want ErrInvalidConfig", err)
	}
}

func TestValidateTopicConfig(t *testing.T) {
	tests := []struct {
		name, value string
		want        error // nil = valid
	}{
		{"retention.ms", "-1", nil},
		{"retention.ms", "-2", ErrInvalidValue},
		{"retention.ms", "1.5", ErrInvalidValue},
		{"retention.ms", " 1000 ", nil},
		{"retention.bytes", "-1", nil},
		{"segment.bytes", "14", nil},
		{"segment.bytes", "13", ErrInvalidValue},
		{"segment.bytes", "2147483648", ErrInvalidValue},
		{"segment.ms", "0", ErrInvalidValue},
		{"segment.index.bytes", "3", ErrInvalidValue},
		{"cleanup.policy", "compact", nil},
		{"cleanup.policy", "compact, delete", nil},
		{"cleanup.policy", "", ErrInvalidValue},
		{"cleanup.policy", "Compact", ErrInvalidValue},
		{"compression.type", "lz4", nil},
		{"compression.type", "uncompressed", nil},
		{"compression.type", "none", nil},
		{"compression.type", "brotli", ErrInvalidValue},
		{"message.timestamp.type", "LogAppendTime", nil},
		{"message.timestamp.type", "logappendtime", ErrInvalidValue},
		{"message.timestamp.before.max.ms", "0", nil},
		{"message.timestamp.after.max.ms", "-1", ErrInvalidValue},
		{"segment.jitter.ms", "0", nil},
		{"segment.jitter.ms", "-1", ErrInvalidValue},
		{"message.format.version", "2.8-IV1", nil},
		{"local.retention.ms", "-2", nil},
		{"remote.storage.enable", "false", nil},
		{"remote.storage.enable", "true", ErrInvalidValue},
		{"compression.gzip.level", "-1", nil},
		{"compression.gzip.level", "9", nil},
		{"compression.gzip.level", "0", ErrInvalidValue},
		{"compression.gzip.level", "10", ErrInvalidValue},
		{"compression.lz4.level", "17", nil},
		{"compression.lz4.level", "0", ErrInvalidValue},
		{"compression.zstd.level", "-131072", nil},
		{"compression.zstd.level", "23", ErrInvalidValue},
		{"min.insync.replicas", "0", ErrInvalidValue},
		{"min.insync.replicas", "2", nil},
		{"min.cleanable.dirty.ratio", "1", nil},
		{"min.cleanable.dirty.ratio", "1.01", ErrInvalidValue},
		{"min.cleanable.dirty.ratio", "NaN", ErrInvalidValue},
		{"unclean.leader.election.enable", "TRUE", nil},
		{"unclean.leader.election.enable", "yes", ErrInvalidValue},
		{"max.message.bytes", "-1", ErrInvalidValue},
		{"flush.messages", "0", ErrInvalidValue},
		{"flush.ms", "0", nil},
		{"max.compaction.lag.ms", "0", ErrInvalidValue},
		{"file.delete.delay.ms", "0", nil},
		{"preallocate", "true", nil},
		{"leader.replication.throttled.replicas", "", nil},
		{"no.such.config", "1", ErrUnknownProperty},
		{"log.retention.ms", "1", ErrUnknownProperty},
	}
	for _, tt := range tests {
		err := ValidateTopicConfig(tt.name, tt.value)
		if tt.want == nil {
			if err != nil {
				t.Errorf("ValidateTopicConfig(%q, %q) = %v, want nil", tt.name, tt.value, err)
			}
			continue
		}
		if !errors.Is(err, tt.want) || !strings.Contains(err.Error(), tt.name) {
			t.Errorf("ValidateTopicConfig(%q, %q) = %v, want %v naming the config", tt.name, tt.value, err, tt.want)
		}
	}
}

func TestDescribeTopic(t *testing.T) {
	b, err := Load("", []string{"log.retention.hours=2", "log.roll.ms=5000"})
	if err != nil {
		t.Fatal(err)
	}
	entries := DescribeTopic(b, map[string]string{"cleanup.policy": "compact"})
	if len(entries) != len(topicProperties) {
		t.Fatalf("%d entries, want %d", len(entries), len(topicProperties))
	}
	if !sort.SliceIsSorted(entries, func(i, j int) bool { return entries[i].Name < entries[j].Name }) {
		t.Error("entries are not sorted by name")
	}
	byName := map[string]Entry{}
	for _, e := range entries {
		byName[e.Name] = e
		if e.ReadOnly || e.Sensitive || e.Type == TypeUnknown || e.Doc == "" {
			t.Errorf("%s: unexpected entry %+v", e.Name, e)
		}
	}
	check := func(name, value string, source, typ int8) {
		t.Helper()
		e := byName[name]
		if e.Value != value || e.Source != source || e.Type != typ {
			t.Errorf("%s = %+v, want value %q source %d type %d", name, e, value, source, typ)
		}
	}
	check("cleanup.policy", "compact", SourceDynamicTopic, TypeList)
	// Kafka's source is the first synonym's, and retention.ms's start at
	// log.retention.ms, which is not set (ConfigHelper.configSynonyms).
	check("retention.ms", "7200000", SourceDefault, TypeLong)
	check("segment.ms", "5000", SourceStaticBroker, TypeLong)
	if e := byName["retention.ms"]; e.CreateSource != SourceStaticBroker {
		t.Errorf("retention.ms CreateSource %d, want STATIC_BROKER_CONFIG (KafkaConfigSchema.resolveEffectiveTopicConfig)", e.CreateSource)
	}
	check("segment.bytes", "1073741824", SourceDefault, TypeInt)
	check("flush.ms", "9223372036854775807", SourceDefault, TypeLong)
	check("min.cleanable.dirty.ratio", "0.5", SourceDefault, TypeDouble)
	check("unclean.leader.election.enable", "false", SourceDefault, TypeBoolean)
	check("compression.type", "producer", SourceDefault, TypeString)

	// Synonyms: the override, then the broker properties where set, then their
	// defaults, from the first entry for the main broker property on.
	for name, want := range map[string][]Synonym{
		"cleanup.policy": {{"cleanup.policy", "compact", SourceDynamicTopic}, {"log.cleanup.policy", "delete", SourceDefault}},
		"retention.ms":   nil,
		"segment.ms":     {{"log.roll.ms", "5000", SourceStaticBroker}, {"log.roll.hours", "168", SourceDefault}},
		"flush.ms":       nil,
	} {
		if got := byName[name].Synonyms; !slices.Equal(got, want) {
			t.Errorf("%s synonyms = %v, want %v", name, got, want)
		}
	}
}

func TestDescribeBroker(t *testing.T) {
	b, err := Load("", []string{"log.retention.minutes=3", "num.io.threads=4"})
	if err != nil {
		t.Fatal(err)
	}
	entries := DescribeBroker(b)
	if len(entries) != len(brokerProperties) {
		t.Fatalf("%d entries, want %d", len(entries), len(brokerProperties))
	}
	if !sort.SliceIsSorted(entries, func(i, j int) bool { return entries[i].Name < entries[j].Name }) {
		t.Error("entries are not sorted by name")
	}
	byName := map[string]Entry{}
	for _, e := range entries {
		byName[e.Name] = e
		if e.ReadOnly == IsDynamicBrokerProperty(e.Name) {
			t.Errorf("%s: read-only %v, dynamic %v", e.Name, e.ReadOnly, IsDynamicBrokerProperty(e.Name))
		}
	}
	for name, want := range map[string]Entry{
		"log.retention.ms":      {Value: "180000", Source: SourceDefault, Type: TypeLong},
		"log.retention.minutes": {Value: "3", Source: SourceStaticBroker, Type: TypeInt},
		"num.io.threads":        {Value: "4", Source: SourceStaticBroker, Type: TypeInt},
		"num.network.threads":   {Value: "3", Source: SourceDefault, Type: TypeInt},
		"listeners":             {Value: "PLAINTEXT://127.0.0.1:9092", Source: SourceDefault, Type: TypeList},
		"log.dirs":              {Value: "./samsa-data", Source: SourceDefault, Type: TypeList},
		"log.flush.interval.ms": {Value: "-1", Source: SourceDefault, Type: TypeLong},
	} {
		e := byName[name]
		if e.Value != want.Value || e.Source != want.Source || e.Type != want.Type {
			t.Errorf("%s = %+v, want %+v", name, e, want)
		}
	}
	for name, want := range map[string][]Synonym{
		"log.retention.ms":      nil,
		"log.retention.minutes": {{"log.retention.minutes", "3", SourceStaticBroker}, {"log.retention.hours", "168", SourceDefault}},
		"num.io.threads":        {{"num.io.threads", "4", SourceStaticBroker}, {"num.io.threads", "8", SourceDefault}},
		"log.retention.hours":   {{"log.retention.hours", "168", SourceDefault}},
	} {
		if got := byName[name].Synonyms; !slices.Equal(got, want) {
			t.Errorf("%s synonyms = %v, want %v", name, got, want)
		}
	}
}

// Every broker property a topic config draws its default from exists in the broker
// table, and every broker property documented as "Topic: x" names a real topic config.
func TestTopicTableConsistent(t *testing.T) {
	for _, p := range topicProperties {
		for _, bk := range p.broker {
			if _, ok := brokerIndex[bk]; !ok {
				t.Errorf("topic config %s refers to unknown broker property %s", p.name, bk)
			}
		}
		if p.set == nil && !p.ignored {
			t.Errorf("topic config %s sets nothing but is not marked ignored", p.name)
		}
	}
	// Kafka names these the same at both levels.
	sameName := map[string]bool{"min.insync.replicas": true, "unclean.leader.election.enable": true,
		"compression.type": true, "compression.gzip.level": true, "compression.lz4.level": true, "compression.zstd.level": true}
	for _, p := range brokerProperties {
		if _, topic, ok := strings.Cut(p.doc, "Topic: "); ok {
			name := strings.TrimSuffix(topic, ".")
			if !IsTopicConfig(name) {
				t.Errorf("broker property %s documents unknown topic config %q", p.name, name)
			}
		}
		if IsTopicConfig(p.name) && !sameName[p.name] {
			t.Errorf("%s is both a broker property and a topic config", p.name)
		}
	}
}

func TestTimestampBounds(t *testing.T) {
	const maxLong = math.MaxInt64
	tests := []struct {
		name                      string
		typ                       string
		before, after, difference int64
		wantBefore, wantAfter     int64
	}{
		{"defaults: any timestamp", "CreateTime", maxLong, maxLong, maxLong, maxLong, maxLong},
		{"difference stands in for both", "CreateTime", maxLong, maxLong, 5000, 5000, 5000},
		{"explicit bounds win over difference", "CreateTime", 100, maxLong, 5000, 100, 5000},
		{"both explicit", "CreateTime", 100, 200, 5000, 100, 200},
		{"LogAppendTime checks nothing", "LogAppendTime", 100, 200, 5000, maxLong, maxLong},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			topic := Topic{MessageTimestampType: tt.typ, MessageTimestampBeforeMaxMs: tt.before,
				MessageTimestampAfterMaxMs: tt.after, MessageTimestampDifferenceMaxMs: tt.difference}
			if b, a := topic.TimestampBounds(); b != tt.wantBefore || a != tt.wantAfter {
				t.Fatalf("TimestampBounds() = %d, %d, want %d, %d", b, a, tt.wantBefore, tt.wantAfter)
			}
		})
	}
}

func TestCompressionLevel(t *testing.T) {
	topic := Topic{CompressionGzipLevel: 1, CompressionLz4Level: 12, CompressionZstdLevel: 19}
	for typ, want := range map[string]int{"gzip": 1, "lz4": 12, "zstd": 19, "snappy": 0, "producer": 0, "none": 0} {
		topic.CompressionType = typ
		if got := topic.CompressionLevel(); got != want {
			t.Errorf("compression.type=%s: level %d, want %d", typ, got, want)
		}
	}
}
