package config

import "sort"

// Entry is one config as DescribeConfigs reports it.
type Entry struct {
	Name, Value string
	// Source is Kafka's ConfigSource: SourceDynamicTopic (1) for a topic override,
	// SourceStaticBroker (4) for a property set in the file or an override,
	// SourceDefault (5) otherwise.
	Source    int8
	ReadOnly  bool
	Sensitive bool
	Type      int8 // Kafka's ConfigType: TypeBoolean ... TypePassword
	Doc       string
	// Synonyms are the places the value could come from, most specific first, as
	// DescribeConfigs reports them: a topic's (or group's) override, then the broker
	// properties it defaults to, each where it is set (STATIC_BROKER_CONFIG) and
	// then each with its default (DEFAULT_CONFIG).
	Synonyms []Synonym
}

// Synonym is one entry of Entry.Synonyms.
type Synonym struct {
	Name, Value string
	Source      int8
}

// brokerSynonyms lists the broker properties names where b sets them, then where
// they have a default, in names' order (Kafka's precedence).
func brokerSynonyms(b *Broker, names []string) []Synonym {
	var out []Synonym
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
	return out
}

// DescribeTopic lists every topic config Samsa accepts, sorted by name, with the
// value in effect for a topic whose overrides are given: the override (source
// DYNAMIC_TOPIC_CONFIG), else the broker's value (STATIC_BROKER_CONFIG when the
// broker property was set explicitly, DEFAULT_CONFIG when it is Kafka's default).
func DescribeTopic(b *Broker, overrides map[string]string) []Entry {
	out := make([]Entry, 0, len(topicProperties))
	for i := range topicProperties {
		p := &topicProperties[i]
		e := Entry{Name: p.name, Type: p.spec.kafkaType(), Doc: p.doc}
		if v, ok := overrides[p.name]; ok {
			e.Value, e.Source = v, SourceDynamicTopic
			e.Synonyms = append(e.Synonyms, Synonym{Name: p.name, Value: v, Source: SourceDynamicTopic})
		} else {
			e.Value, e.Source = p.fromBroker(b), SourceDefault
			for _, bk := range p.broker {
				if has(b.Raw, bk) {
					e.Source = SourceStaticBroker
				}
			}
		}
		e.Synonyms = append(e.Synonyms, brokerSynonyms(b, p.broker)...)
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// DescribeBroker lists every broker property Samsa accepts (including those
// accepted with no effect), sorted by name, with its effective value. All are
// read-only: Samsa does not alter broker configs at run time.
func DescribeBroker(b *Broker) []Entry {
	out := make([]Entry, 0, len(brokerProperties))
	for i := range brokerProperties {
		p := &brokerProperties[i]
		e := Entry{Name: p.name, Value: brokerValue(b, p), Source: SourceDefault,
			ReadOnly: true, Type: p.spec.kafkaType(), Doc: p.doc, Sensitive: p.spec.kafkaType() == TypePassword}
		if has(b.Raw, p.name) {
			e.Source = SourceStaticBroker
		}
		e.Synonyms = brokerSynonyms(b, brokerSynonymNames(p.name))
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// brokerSynonymNames returns the broker properties that stand for the same setting
// as name, name first and then those it takes precedence over (log.retention.ms,
// log.retention.minutes, log.retention.hours), as the topic configs list them.
func brokerSynonymNames(name string) []string {
	if names, ok := brokerSynonymGroups[name]; ok {
		return names
	}
	return []string{name}
}

// brokerSynonymGroups maps the first broker property of each topic config's list of
// several to that list.
var brokerSynonymGroups = func() map[string][]string {
	m := map[string][]string{}
	for _, p := range topicProperties {
		if len(p.broker) > 1 {
			m[p.broker[0]] = p.broker
		}
	}
	return m
}()
