package config

import (
	"errors"
	"sort"
	"strconv"
	"strings"
)

// SourceGroup is Kafka's ConfigSource for a group config override (DYNAMIC_GROUP_CONFIG).
const SourceGroup int8 = 8

// groupConfig is a config of a GROUP resource (KIP-848, KIP-932): set per group with
// IncrementalAlterConfigs, stored in the metadata log; a group without an override
// uses the broker property named by broker.
type groupConfig struct {
	name, broker, doc string
	typ               int8
	check             func(string) error
	def               func(b *Broker) string
}

func intAtLeast(min int) func(string) error {
	return func(s string) error {
		n, err := strconv.Atoi(s)
		if err != nil || n < min {
			return errors.New("must be an integer of at least " + strconv.Itoa(min))
		}
		return nil
	}
}

var groupConfigs = []groupConfig{
	{name: "share.auto.offset.reset", typ: TypeString,
		doc: "Where a share group starts in a partition it has no state for: latest or earliest.",
		check: func(s string) error {
			if s != "latest" && s != "earliest" {
				return errors.New("must be latest or earliest")
			}
			return nil
		},
		def: func(*Broker) string { return "latest" }},
	{name: "share.record.lock.duration.ms", broker: "group.share.record.lock.duration.ms", typ: TypeInt,
		doc:   "How long a share consumer holds the records it acquired.",
		check: intAtLeast(1000),
		def:   func(b *Broker) string { return strconv.Itoa(int(b.GroupShareRecordLockDurationMs)) }},
	{name: "share.delivery.count.limit", broker: "group.share.delivery.count.limit", typ: TypeInt,
		doc:   "How many times a record is delivered before it is archived.",
		check: intAtLeast(2),
		def:   func(b *Broker) string { return strconv.Itoa(int(b.GroupShareDeliveryCountLimit)) }},
	{name: "share.isolation.level", typ: TypeString,
		doc: "read_uncommitted or read_committed (the same without transactions).",
		check: func(s string) error {
			if s != "read_uncommitted" && s != "read_committed" {
				return errors.New("must be read_uncommitted or read_committed")
			}
			return nil
		},
		def: func(*Broker) string { return "read_uncommitted" }},
}

// IsGroupConfig reports whether name is a group config Samsa serves.
func IsGroupConfig(name string) bool {
	for _, c := range groupConfigs {
		if c.name == name {
			return true
		}
	}
	return false
}

// ValidateGroupConfig checks one GROUP resource config.
func ValidateGroupConfig(name, value string) error {
	for _, c := range groupConfigs {
		if c.name == name {
			return c.check(strings.TrimSpace(value))
		}
	}
	return errors.New("unknown group config")
}

// DescribeGroup lists every group config with its effective value for a group with
// these overrides, sorted by name.
func DescribeGroup(b *Broker, overrides map[string]string) []Entry {
	out := make([]Entry, 0, len(groupConfigs))
	for _, c := range groupConfigs {
		e := Entry{Name: c.name, Type: c.typ, Doc: c.doc, Value: c.def(b), Source: SourceDefault}
		if c.broker != "" && has(b.Raw, c.broker) {
			e.Source = SourceStaticBroker
		}
		if v, ok := overrides[c.name]; ok {
			e.Value, e.Source = v, SourceGroup
		}
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// GroupValue returns a group config's effective value.
func GroupValue(b *Broker, overrides map[string]string, name string) string {
	if v, ok := overrides[name]; ok {
		return v
	}
	for _, c := range groupConfigs {
		if c.name == name {
			return c.def(b)
		}
	}
	return ""
}
