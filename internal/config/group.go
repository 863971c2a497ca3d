package config

import (
	"errors"
	"fmt"
	"slices"
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
	valid             string // the valid values, for docs/config.md
	typ               int8
	check             func(string) error
	def               func(b *Broker) string
	// bounds, for a bounded integer (a duration, a limit), are the broker's smallest
	// and largest value for it (group.X.min.Y and group.X.max.Y, see boundName).
	bounds func(b *Broker) (lo, hi int32)
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
	{name: "consumer.session.timeout.ms", broker: "group.consumer.session.timeout.ms", valid: "[group.consumer.min.session.timeout.ms,...,group.consumer.max.session.timeout.ms]", typ: TypeInt,
		doc:   "Session timeout of the group's consumer-protocol (KIP-848) members.",
		check: intAtLeast(1),
		def:   func(b *Broker) string { return strconv.Itoa(int(b.GroupConsumerSessionTimeoutMs)) },
		bounds: func(b *Broker) (int32, int32) {
			return b.GroupConsumerMinSessionTimeoutMs, b.GroupConsumerMaxSessionTimeoutMs
		}},
	{name: "consumer.heartbeat.interval.ms", broker: "group.consumer.heartbeat.interval.ms", valid: "[group.consumer.min.heartbeat.interval.ms,...,group.consumer.max.heartbeat.interval.ms]", typ: TypeInt,
		doc:   "Heartbeat interval the coordinator hands the group's consumer-protocol members.",
		check: intAtLeast(1),
		def:   func(b *Broker) string { return strconv.Itoa(int(b.GroupConsumerHeartbeatIntervalMs)) },
		bounds: func(b *Broker) (int32, int32) {
			return b.GroupConsumerMinHeartbeatIntervalMs, b.GroupConsumerMaxHeartbeatIntervalMs
		}},
	{name: "consumer.assignment.interval.ms", broker: "group.consumer.assignment.interval.ms", valid: "[group.consumer.min.assignment.interval.ms,...,group.consumer.max.assignment.interval.ms]", typ: TypeInt,
		doc:   "Least time between two target assignments of the group (Kafka 4.3, KIP-1263); 0 assigns at every change.",
		check: intAtLeast(0),
		def:   func(b *Broker) string { return strconv.Itoa(int(b.GroupConsumerAssignmentIntervalMs)) },
		bounds: func(b *Broker) (int32, int32) {
			return b.GroupConsumerMinAssignmentIntervalMs, b.GroupConsumerMaxAssignmentIntervalMs
		}},
	{name: "share.session.timeout.ms", broker: "group.share.session.timeout.ms", valid: "[group.share.min.session.timeout.ms,...,group.share.max.session.timeout.ms]", typ: TypeInt,
		doc:   "Session timeout of the share group's members.",
		check: intAtLeast(1),
		def:   func(b *Broker) string { return strconv.Itoa(int(b.GroupShareSessionTimeoutMs)) },
		bounds: func(b *Broker) (int32, int32) {
			return b.GroupShareMinSessionTimeoutMs, b.GroupShareMaxSessionTimeoutMs
		}},
	{name: "share.heartbeat.interval.ms", broker: "group.share.heartbeat.interval.ms", valid: "[group.share.min.heartbeat.interval.ms,...,group.share.max.heartbeat.interval.ms]", typ: TypeInt,
		doc:   "Heartbeat interval the coordinator hands the share group's members.",
		check: intAtLeast(1),
		def:   func(b *Broker) string { return strconv.Itoa(int(b.GroupShareHeartbeatIntervalMs)) },
		bounds: func(b *Broker) (int32, int32) {
			return b.GroupShareMinHeartbeatIntervalMs, b.GroupShareMaxHeartbeatIntervalMs
		}},
	{name: "share.assignment.interval.ms", broker: "group.share.assignment.interval.ms", valid: "[group.share.min.assignment.interval.ms,...,group.share.max.assignment.interval.ms]", typ: TypeInt,
		doc:   "Least time between two target assignments of the share group (Kafka 4.3, KIP-1263); 0 assigns at every change.",
		check: intAtLeast(0),
		def:   func(b *Broker) string { return strconv.Itoa(int(b.GroupShareAssignmentIntervalMs)) },
		bounds: func(b *Broker) (int32, int32) {
			return b.GroupShareMinAssignmentIntervalMs, b.GroupShareMaxAssignmentIntervalMs
		}},
	{name: "share.auto.offset.reset", valid: "latest, earliest", typ: TypeString,
		doc: "Where a share group starts in the partitions of a topic it meets for the first time: latest or earliest (partitions the topic gains later start at offset 0).",
		check: func(s string) error {
			if s != "latest" && s != "earliest" {
				return errors.New("must be latest or earliest")
			}
			return nil
		},
		def: func(*Broker) string { return "latest" }},
	{name: "share.record.lock.duration.ms", broker: "group.share.record.lock.duration.ms", valid: "[group.share.min.record.lock.duration.ms,...,group.share.max.record.lock.duration.ms]", typ: TypeInt,
		doc:   "How long a share consumer holds the records it acquired.",
		check: intAtLeast(1000),
		def:   func(b *Broker) string { return strconv.Itoa(int(b.GroupShareRecordLockDurationMs)) },
		bounds: func(b *Broker) (int32, int32) {
			return b.GroupShareMinRecordLockDurationMs, b.GroupShareMaxRecordLockDurationMs
		}},
	{name: "share.delivery.count.limit", broker: "group.share.delivery.count.limit", valid: "[group.share.min.delivery.count.limit,...,group.share.max.delivery.count.limit]", typ: TypeInt,
		doc:   "How many times a record is delivered before it is archived.",
		check: intAtLeast(1),
		def:   func(b *Broker) string { return strconv.Itoa(int(b.GroupShareDeliveryCountLimit)) },
		bounds: func(b *Broker) (int32, int32) {
			return b.GroupShareMinDeliveryCountLimit, b.GroupShareMaxDeliveryCountLimit
		}},
	{name: "share.partition.max.record.locks", broker: "group.share.partition.max.record.locks", valid: "[group.share.min.partition.max.record.locks,...,group.share.max.partition.max.record.locks]", typ: TypeInt,
		doc:   "Most records of one share partition in flight (acquired or waiting for redelivery) at once; the batch that reaches the limit is acquired whole (Kafka 4.3, KIP-1240).",
		check: intAtLeast(1),
		def:   func(b *Broker) string { return strconv.Itoa(int(b.GroupSharePartitionMaxRecordLocks)) },
		bounds: func(b *Broker) (int32, int32) {
			return b.GroupShareMinPartitionMaxRecordLocks, b.GroupShareMaxPartitionMaxRecordLocks
		}},
	{name: "share.isolation.level", valid: "read_uncommitted, read_committed", typ: TypeString,
		doc: "read_uncommitted, or read_committed: records up to the last stable offset, those of aborted transactions archived, never delivered.",
		check: func(s string) error {
			if s != "read_uncommitted" && s != "read_committed" {
				return errors.New("must be read_uncommitted or read_committed")
			}
			return nil
		},
		def: func(*Broker) string { return "read_uncommitted" }},
	{name: "share.renew.acknowledge.enable", valid: "true, false", typ: TypeBoolean,
		doc: "Whether the share group's consumers may renew the acquisition lock of records they hold (RENEW acknowledgements, KIP-1222); false refuses a RENEW with INVALID_RECORD_STATE (Kafka 4.3).",
		check: func(s string) error {
			if !strings.EqualFold(s, "true") && !strings.EqualFold(s, "false") {
				return errors.New("must be true or false")
			}
			return nil
		},
		def: func(*Broker) string { return "true" }},
}

// groupTimeoutPairs are the group configs whose session timeout must stay above
// their heartbeat interval.
var groupTimeoutPairs = [][2]string{
	{"consumer.session.timeout.ms", "consumer.heartbeat.interval.ms"},
	{"share.session.timeout.ms", "share.heartbeat.interval.ms"},
}

// ValidateGroupConfigs checks a GROUP resource's overrides as a change leaves them
// (next): each changed one on its own, within the bounds the broker b sets for it, and
// a session timeout against its heartbeat interval when either changed. The error
// names the config, its value and the rule.
func ValidateGroupConfigs(b *Broker, next map[string]string, changed []string) error {
	var errs []error
	for _, name := range changed {
		v, ok := next[name]
		if !ok {
			continue // deleted: the broker's value applies
		}
		i := slices.IndexFunc(groupConfigs, func(c groupConfig) bool { return c.name == name })
		if i < 0 {
			errs = append(errs, fmt.Errorf("%s is not a group config (%s are)", name, strings.Join(groupConfigNames(), ", ")))
			continue
		}
		c := groupConfigs[i]
		v = strings.TrimSpace(v)
		if err := c.check(v); err != nil {
			errs = append(errs, fmt.Errorf("%s=%s %w", name, v, err))
			continue
		}
		if c.bounds != nil {
			lo, hi := c.bounds(b)
			if n, _ := strconv.Atoi(v); n < int(lo) || n > int(hi) {
				errs = append(errs, fmt.Errorf("%s=%s is outside [%s=%d, %s=%d]", name, v,
					boundName(c.broker, "min"), lo, boundName(c.broker, "max"), hi))
			}
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	for _, p := range groupTimeoutPairs {
		if !slices.Contains(changed, p[0]) && !slices.Contains(changed, p[1]) {
			continue
		}
		session, heartbeat := GroupValue(b, next, p[0]), GroupValue(b, next, p[1])
		if s, h := atoi(session), atoi(heartbeat); s <= h {
			errs = append(errs, fmt.Errorf("%s=%s must be above %s=%s", p[0], session, p[1], heartbeat))
		}
	}
	return errors.Join(errs...)
}

// boundName turns group.consumer.session.timeout.ms into
// group.consumer.min.session.timeout.ms (which is "min" or "max").
func boundName(broker, which string) string {
	group, rest, _ := strings.Cut(strings.TrimPrefix(broker, "group."), ".")
	return "group." + group + "." + which + "." + rest
}

func groupConfigNames() []string {
	names := make([]string, len(groupConfigs))
	for i, c := range groupConfigs {
		names[i] = c.name
	}
	sort.Strings(names)
	return names
}

func atoi(s string) int {
	n, _ := strconv.Atoi(strings.TrimSpace(s))
	return n
}

// GroupInt returns an integer group config's effective value (a duration in
// milliseconds, a limit), kept within the broker's bounds for it: an override stored
// when the bounds were wider counts as the nearest bound, as Kafka evaluates stored
// group configs.
func GroupInt(b *Broker, overrides map[string]string, name string) int {
	n := atoi(GroupValue(b, overrides, name))
	for _, c := range groupConfigs {
		if c.name == name && c.bounds != nil {
			lo, hi := c.bounds(b)
			n = min(max(n, int(lo)), int(hi))
		}
	}
	return n
}

// DescribeGroup lists every group config with its effective value for a group with
// these overrides, sorted by name, with the synonyms and source Kafka's
// ConfigHelper.createGroupConfigEntry gives (since late 2025): the group's override
// (GROUP_CONFIG), then the broker's group.* property (see brokerSynonyms) or, for a
// config without one, the config's own default (DEFAULT_CONFIG); the source is the
// first synonym's.
func DescribeGroup(b *Broker, overrides map[string]string) []Entry {
	out := make([]Entry, 0, len(groupConfigs))
	for _, c := range groupConfigs {
		e := Entry{Name: c.name, Type: c.typ, Doc: c.doc, Value: c.def(b), Source: SourceDefault}
		if c.broker != "" && has(b.Raw, c.broker) {
			e.Source = SourceStaticBroker
		}
		if v, ok := overrides[c.name]; ok {
			e.Value, e.Source = v, SourceGroup
			e.Synonyms = append(e.Synonyms, Synonym{Name: c.name, Value: v, Source: SourceGroup})
		}
		if c.broker != "" {
			e.Synonyms = append(e.Synonyms, brokerSynonyms(b, []string{c.broker}, c.broker)...)
		} else {
			// No broker property: Kafka gives the group config's own default.
			e.Synonyms = append(e.Synonyms, Synonym{Name: c.name, Value: c.def(b), Source: SourceDefault})
		}
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// GroupBool returns a boolean group config's effective value: true or false in any
// case, as Kafka parses a BOOLEAN config.
func GroupBool(b *Broker, overrides map[string]string, name string) bool {
	return mustBool(GroupValue(b, overrides, name))
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
