package config

import "sort"

// Entry is one config as DescribeConfigs reports it.
type Entry struct {
	Name, Value string
	// Source is Kafka's ConfigSource as DescribeConfigs reports it: SourceDynamicTopic
	// (1) for a topic override, else the first synonym's (SourceStaticBroker (4) for a
	// property set in the file or an override, SourceDefault (5) for its default),
	// SourceDefault with no synonym.
	Source int8
	// CreateSource is the source CreateTopics (v5+) reports for a topic config, which
	// Kafka's controller resolves apart from DescribeConfigs
	// (KafkaConfigSchema.resolveEffectiveTopicConfig): the override's, else
	// STATIC_BROKER_CONFIG when any broker property it defaults to is set, else
	// DEFAULT_CONFIG. Topic configs only.
	CreateSource int8
	ReadOnly     bool
	Sensitive    bool
	Type         int8 // Kafka's ConfigType: TypeBoolean ... TypePassword
	Doc          string
	// Synonyms are the places the value could come from, most specific first, as
	// DescribeConfigs reports them: a topic's (or group's) override, then the broker
	// properties it defaults to, each where it is set (STATIC_BROKER_CONFIG) and
	// then each with its default (DEFAULT_CONFIG), from the first entry for the main
	// broker property on (see brokerSynonyms).
	Synonyms []Synonym
}

// Synonym is one entry of Entry.Synonyms.
type Synonym struct {
	Name, Value string
	Source      int8
}

// brokerSynonyms lists the broker properties names where this node's dynamic configs
// set them (DYNAMIC_BROKER_CONFIG), then where the cluster-wide ones do
// (DYNAMIC_DEFAULT_BROKER_CONFIG), where b's static configuration sets them
// (STATIC_BROKER_CONFIG), then where they have a default (DEFAULT_CONFIG), each in names'
// order (Kafka's precedence), from the first entry for the property from on: as
// Kafka's ConfigHelper.configSynonyms, which drops the entries before it. So a topic's
// retention.ms, whose list starts at log.retention.ms (which has no default), has no
// broker synonyms unless log.retention.ms is set, even where log.retention.hours is.
func brokerSynonyms(b *Broker, names []string, from string) []Synonym {
	var out []Synonym
	for _, layer := range []struct {
		set    map[string]string
		source int8
	}{{b.DynamicBroker, SourceDynamicBroker}, {b.DynamicDefault, SourceDynamicDefaultBroker}} {
		for _, n := range names {
			if v, ok := layer.set[n]; ok {
				out = append(out, Synonym{Name: n, Value: v, Source: layer.source})
			}
		}
	}
	for _, n := range names {
		if v, ok := b.Raw[n]; ok {
			out = append(out, Synonym{Name: n, Value: v, Source: SourceStaticBroker})
		}
	}
	for _, n := range names {
		if p, ok := brokerIndex[n]; ok && !p.null {
			out = append(out, Synonym{Name: n, Value: p.def, Source: SourceDefault})
		}
	}
	for len(out) > 0 && out[0].Name != from {
		out = out[1:]
	}
	return out
}

// DescribeTopic lists every topic config Samsa accepts, sorted by name, with the
// value in effect for a topic whose overrides are given: the override (source
// DYNAMIC_TOPIC_CONFIG), else the broker's value, whose source is its first synonym's
// (STATIC_BROKER_CONFIG or DEFAULT_CONFIG), DEFAULT_CONFIG with none, as Kafka's
// ConfigHelper.createTopicConfigEntry answers (see brokerSynonyms).
func DescribeTopic(b *Broker, overrides map[string]string) []Entry {
	out := make([]Entry, 0, len(topicProperties))
	for i := range topicProperties {
		p := &topicProperties[i]
		e := Entry{Name: p.name, Type: p.spec.kafkaType(), Doc: p.doc}
		if v, ok := overrides[p.name]; ok {
			e.Value = v
			e.Synonyms = append(e.Synonyms, Synonym{Name: p.name, Value: v, Source: SourceDynamicTopic})
		} else {
			e.Value = p.fromBroker(b)
		}
		if len(p.broker) > 0 {
			e.Synonyms = append(e.Synonyms, brokerSynonyms(b, p.broker, p.broker[0])...)
		}
		e.Source = SourceDefault
		if len(e.Synonyms) > 0 {
			e.Source = e.Synonyms[0].Source
		}
		e.CreateSource = SourceDefault
		if _, ok := overrides[p.name]; ok {
			e.CreateSource = SourceDynamicTopic
		}
		for _, layer := range []struct {
			set    map[string]string
			source int8
		}{{b.DynamicBroker, SourceDynamicBroker}, {b.DynamicDefault, SourceDynamicDefaultBroker}, {b.Raw, SourceStaticBroker}} {
			for _, bk := range p.broker {
				if has(layer.set, bk) && e.CreateSource == SourceDefault {
					e.CreateSource = layer.source
				}
			}
		}
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// DescribeBroker lists every broker property Samsa accepts (including those
// accepted with no effect), sorted by name, with its effective value and source
// (DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG, STATIC_BROKER_CONFIG or
// DEFAULT_CONFIG). The dynamic properties (IsDynamicBrokerProperty) are writable, the
// others read-only.
func DescribeBroker(b *Broker) []Entry {
	out := make([]Entry, 0, len(brokerProperties))
	for i := range brokerProperties {
		p := &brokerProperties[i]
		e := Entry{Name: p.name, Value: brokerValue(b, p), Source: SourceDefault,
			ReadOnly: !dynamicProperties[p.name], Type: p.spec.kafkaType(), Doc: p.doc, Sensitive: p.spec.kafkaType() == TypePassword}
		if _, src := dynamicSource(b, p.name); src != 0 {
			e.Source = src
		} else if has(b.Raw, p.name) {
			e.Source = SourceStaticBroker
		}
		e.Synonyms = brokerSynonyms(b, brokerSynonymNames(p.name), p.name)
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// brokerSynonymNames returns the broker properties that stand for the same setting
// as name, in Kafka's precedence (log.retention.ms, log.retention.minutes,
// log.retention.hours for any of the three), as the topic configs list them.
func brokerSynonymNames(name string) []string {
	if names, ok := brokerSynonymGroups[name]; ok {
		return names
	}
	return []string{name}
}

// brokerSynonymGroups maps each broker property of a topic config's list of several
// to that list.
var brokerSynonymGroups = func() map[string][]string {
	m := map[string][]string{}
	for _, p := range topicProperties {
		if len(p.broker) > 1 {
			for _, n := range p.broker {
				m[n] = p.broker
			}
		}
	}
	return m
}()
