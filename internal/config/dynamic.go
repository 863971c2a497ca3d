package config

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Dynamic broker configs (KIP-226, as Kafka's DynamicBrokerConfig serves them in KRaft
// mode): the broker properties that are a topic config's default (its synonyms, the
// DynamicLogConfig of Kafka) may be set at run time through the metadata quorum, for
// the whole cluster (BROKER resource "") or for one node (resource = its id). A broker's
// effective configuration is its static one (file and --override) overlaid by the
// cluster default, overlaid by its own node's: per broker > cluster default > static >
// Kafka's default, each property resolved with its synonyms (log.retention.ms over
// .minutes over .hours) from the merged set, as Kafka does.

// dynamicProperties are the broker properties that may be altered at run time: every
// broker property a topic config falls back to, except log.flush.scheduler.interval.ms,
// which also paces Samsa's flush scheduler, set once at start-up; and the broker-wide
// connection limits, as Kafka's DynamicConnectionQuota has them (their
// listener.name.<listener>. forms stay static).
var dynamicProperties = func() map[string]bool {
	m := map[string]bool{"max.connections": true, "max.connections.per.ip": true,
		"max.connections.per.ip.overrides": true, "max.connection.creation.rate": true}
	for _, p := range topicProperties {
		if p.ignored {
			continue
		}
		for _, n := range p.broker {
			m[n] = true
		}
	}
	delete(m, "log.flush.scheduler.interval.ms")
	return m
}()

// IsDynamicBrokerProperty reports whether the broker property name may be altered at
// run time (see dynamicProperties).
func IsDynamicBrokerProperty(name string) bool { return dynamicProperties[name] }

// ValidateDynamicBrokerConfigs checks the dynamic configs a BROKER resource would hold
// after a change (next), changed naming those set or deleted: every changed name must
// be a dynamic property (else the error names all that are not, as Kafka's "Cannot
// update these configs dynamically"), and every value must be valid for its property
// (the error names the property and the value). The caller answers INVALID_REQUEST,
// as Kafka's ConfigAdminManager does for both.
func ValidateDynamicBrokerConfigs(next map[string]string, changed []string) error {
	var static []string
	for _, n := range changed {
		if _, set := next[n]; set && !dynamicProperties[n] {
			static = append(static, n)
		}
	}
	if len(static) > 0 {
		slices.Sort(static)
		return fmt.Errorf("cannot update these configs dynamically: %s; set them in server.properties (or with --override) and restart the broker",
			strings.Join(static, ", "))
	}
	var errs []error
	for _, n := range slices.Sorted(maps.Keys(next)) {
		p, ok := brokerIndex[n]
		if !ok {
			continue // not dynamic: refused above when changed
		}
		if err := p.spec.check(next[n]); err != nil {
			errs = append(errs, invalidValue(n, next[n], err))
		}
	}
	return errors.Join(errs...)
}

// WithDynamic returns the effective configuration of the broker whose static
// configuration is b: b's properties overlaid by the dynamic cluster defaults, then by
// this node's dynamic configs (see the comment at the top of this file). b is not
// changed. Configs that are not dynamic or whose value is invalid are left out and
// reported (joined) along with a result that does without them; b itself is returned
// when neither map has a usable config.
func (b *Broker) WithDynamic(clusterDefault, perBroker map[string]string) (*Broker, error) {
	var errs []error
	usable := func(m map[string]string) map[string]string {
		out := map[string]string{}
		for _, n := range slices.Sorted(maps.Keys(m)) {
			v := strings.TrimSpace(m[n])
			if !dynamicProperties[n] {
				errs = append(errs, fmt.Errorf("%w: %s is not a dynamic broker config in Samsa", ErrUnknownProperty, n))
				continue
			}
			if err := brokerIndex[n].spec.check(v); err != nil {
				errs = append(errs, invalidValue(n, v, err))
				continue
			}
			out[n] = v
		}
		return out
	}
	def, own := usable(clusterDefault), usable(perBroker)
	if len(def) == 0 && len(own) == 0 {
		return b, errors.Join(errs...)
	}
	set := maps.Clone(b.Raw)
	if set == nil {
		set = map[string]string{}
	}
	maps.Copy(set, def)
	maps.Copy(set, own)
	eff, buildErrs := build(set)
	if len(buildErrs) > 0 {
		errs = append(errs, fmt.Errorf("the dynamic broker configs conflict with the broker's other properties: %w", errors.Join(buildErrs...)))
		return b, errors.Join(errs...)
	}
	eff.Raw = b.Raw
	eff.DynamicDefault, eff.DynamicBroker = def, own
	return eff, errors.Join(errs...)
}

// dynamicSource is where b's value of property name comes from when it is a dynamic
// config: SourceDynamicBroker, SourceDynamicDefaultBroker, or 0 when it is not one.
func dynamicSource(b *Broker, name string) (string, int8) {
	if v, ok := b.DynamicBroker[name]; ok {
		return v, SourceDynamicBroker
	}
	if v, ok := b.DynamicDefault[name]; ok {
		return v, SourceDynamicDefaultBroker
	}
	return "", 0
}

// DescribeDynamicDefaults lists the cluster-wide dynamic configs set (the BROKER
// resource ""), sorted by name, as Kafka describes that resource: each with source
// DYNAMIC_DEFAULT_BROKER_CONFIG, writable, its synonyms without the per-broker ones.
func DescribeDynamicDefaults(b *Broker) []Entry {
	var out []Entry
	for _, n := range slices.Sorted(maps.Keys(b.DynamicDefault)) {
		p := brokerIndex[n]
		e := Entry{Name: n, Value: b.DynamicDefault[n], Source: SourceDynamicDefaultBroker,
			Type: p.spec.kafkaType(), Doc: p.doc}
		for _, s := range brokerSynonyms(b, brokerSynonymNames(n), n) {
			if s.Source != SourceDynamicBroker {
				e.Synonyms = append(e.Synonyms, s)
			}
		}
		out = append(out, e)
	}
	return out
}
