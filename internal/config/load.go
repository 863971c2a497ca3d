package config

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Load reads the broker configuration: Kafka's defaults (see Default), then the
// properties file at path (none when path is ""), then overrides, each "key=value",
// later ones winning. It reports every problem at once, joined: unknown properties
// (ErrUnknownProperty), ZooKeeper properties (ErrUnsupported), bad values
// (ErrInvalidValue) and conflicts between properties (ErrInvalidConfig), each
// naming the property and its value.
func Load(path string, overrides []string) (*Broker, error) {
	set := map[string]string{}
	var errs []error
	if path != "" {
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("config: %w", err)
		}
		for _, kv := range ParseProperties(string(data)) {
			set[kv.Key] = strings.TrimSpace(kv.Value)
		}
	}
	for _, o := range overrides {
		k, v, ok := strings.Cut(o, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			errs = append(errs, fmt.Errorf("%w: override %q is not key=value", ErrInvalidValue, o))
			continue
		}
		set[k] = strings.TrimSpace(v)
	}

	b, buildErrs := build(set)
	errs = append(errs, buildErrs...)
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return b, nil
}

// build makes the configuration the properties set give (each "key" to its trimmed
// value), over Kafka's defaults, with Raw = set; it returns every problem found.
func build(set map[string]string) (*Broker, []error) {
	var errs []error
	b := Default()
	valid := map[string]string{}
	for _, name := range sortedKeys(set) {
		value := set[name]
		p, ok := brokerIndex[name]
		switch {
		case ok:
			if err := p.spec.check(value); err != nil {
				errs = append(errs, invalidValue(name, value, err))
				continue
			}
			valid[name] = value
			if p.set != nil {
				p.set(b, value)
			}
		case strings.HasPrefix(name, listenerPrefix):
			listener, prop, _, err := splitListenerProperty(name)
			if err == nil {
				err = checkListenerProperty(prop, value)
				if err != nil {
					err = invalidValue(name, value, err)
				}
			}
			if err != nil {
				errs = append(errs, err)
				continue
			}
			valid[name] = value
			if b.Security.ListenerOverrides == nil {
				b.Security.ListenerOverrides = map[string]map[string]string{}
			}
			if b.Security.ListenerOverrides[listener] == nil {
				b.Security.ListenerOverrides[listener] = map[string]string{}
			}
			b.Security.ListenerOverrides[listener][prop] = strings.TrimSpace(value)
		case name == "":
			errs = append(errs, fmt.Errorf("%w: a line sets %q without a property name", ErrUnknownProperty, value))
		case unsupportedProperties[name] != "":
			errs = append(errs, fmt.Errorf("%w: %s: %s", ErrUnsupported, name, unsupportedProperties[name]))
		case strings.HasPrefix(name, "zookeeper."):
			errs = append(errs, fmt.Errorf("%w: %s: Samsa runs in KRaft mode only; remove ZooKeeper settings and use process.roles and controller.quorum.voters", ErrUnsupported, name))
		case IsTopicConfig(name):
			errs = append(errs, fmt.Errorf("%w: %s is a topic config, not a broker property (see docs/config.md for its broker default)", ErrUnknownProperty, name))
		default:
			errs = append(errs, fmt.Errorf("%w: %s", ErrUnknownProperty, name))
		}
	}
	derive(b, valid)
	b.Raw = set
	if err := b.Validate(); err != nil {
		errs = append(errs, err)
	}
	return b, errs
}

// unsupportedProperties are Kafka properties that guard data or access and that
// Samsa cannot honour: ignoring one would leave the operator believing a protection
// holds, so each is refused with what Samsa does instead.
var unsupportedProperties = map[string]string{
	"create.topic.policy.class.name":                 "Samsa runs no topic policy plugins; limit who creates topics with ACLs (CREATE on the cluster or on topics) and bound topic configs with the broker defaults",
	"alter.config.policy.class.name":                 "Samsa runs no config policy plugins; limit who alters configs with ACLs (ALTER_CONFIGS on the cluster or on topics)",
	"client.quota.callback.class":                    "Samsa runs no quota callback plugins; quotas are set per user and client id with AlterClientQuotas (kafka-configs.sh, samsa quota) and found by Kafka's default precedence",
	"leader.replication.throttled.rate":              "Samsa does not throttle replication; followers fetch at full speed (bounded per fetch by replica.fetch.max.bytes and replica.fetch.response.max.bytes)",
	"follower.replication.throttled.rate":            "Samsa does not throttle replication; followers fetch at full speed (bounded per fetch by replica.fetch.max.bytes and replica.fetch.response.max.bytes)",
	"replica.alter.log.dirs.io.max.bytes.per.second": "Samsa does not throttle moves of replicas between log directories",
}

// KeyValue is one entry of a properties file.
type KeyValue struct{ Key, Value string }

// ParseProperties reads Java .properties text: blank lines and lines whose first
// non-blank character is # or ! are skipped; a key ends at the first unescaped
// '=', ':' or blank, which (with surrounding blanks) separates it from the value; a
// line ending in an odd number of backslashes continues on the next line (whose
// leading blanks are dropped); \t \n \r \f \uXXXX and \<any> escapes are decoded.
// Entries are returned in file order; a repeated key appears twice (last wins).
func ParseProperties(text string) []KeyValue {
	var out []KeyValue
	lines := strings.Split(strings.ReplaceAll(strings.ReplaceAll(text, "\r\n", "\n"), "\r", "\n"), "\n")
	for i := 0; i < len(lines); i++ {
		line := strings.TrimLeft(lines[i], " \t\f")
		if line == "" || line[0] == '#' || line[0] == '!' {
			continue
		}
		for endsInContinuation(line) && i+1 < len(lines) {
			i++
			line = line[:len(line)-1] + strings.TrimLeft(lines[i], " \t\f")
		}
		if endsInContinuation(line) { // continuation at end of file
			line = line[:len(line)-1]
		}
		key, value := splitKeyValue(line)
		out = append(out, KeyValue{Key: unescape(key), Value: unescape(value)})
	}
	return out
}

func endsInContinuation(line string) bool {
	n := 0
	for i := len(line) - 1; i >= 0 && line[i] == '\\'; i-- {
		n++
	}
	return n%2 == 1
}

// splitKeyValue splits a logical line into its still-escaped key and value.
func splitKeyValue(line string) (string, string) {
	end := len(line)
	for i := 0; i < len(line); i++ {
		c := line[i]
		if c == '\\' {
			i++ // skip the escaped character
			continue
		}
		if c == '=' || c == ':' || c == ' ' || c == '\t' || c == '\f' {
			end = i
			break
		}
	}
	key, rest := line[:end], line[end:]
	rest = strings.TrimLeft(rest, " \t\f")
	if rest != "" && (rest[0] == '=' || rest[0] == ':') {
		rest = strings.TrimLeft(rest[1:], " \t\f")
	}
	return key, rest
}

func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var sb strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' || i+1 == len(s) {
			sb.WriteByte(c)
			continue
		}
		i++
		switch s[i] {
		case 't':
			sb.WriteByte('\t')
		case 'n':
			sb.WriteByte('\n')
		case 'r':
			sb.WriteByte('\r')
		case 'f':
			sb.WriteByte('\f')
		case 'u':
			if i+5 <= len(s) {
				if r, err := strconv.ParseUint(s[i+1:i+5], 16, 16); err == nil {
					sb.WriteRune(rune(r))
					i += 4
					continue
				}
			}
			sb.WriteByte('u')
		default:
			r, size := utf8.DecodeRuneInString(s[i:])
			sb.WriteRune(r)
			i += size - 1
		}
	}
	return sb.String()
}
