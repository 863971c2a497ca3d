package controller

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/samsa-streaming/samsa/internal/config"
	"github.com/samsa-streaming/samsa/internal/metadata"
)

// Config operations of IncrementalAlterConfigs, with Kafka's numbering.
const (
	OpSet      int8 = 0
	OpDelete   int8 = 1
	OpAppend   int8 = 2
	OpSubtract int8 = 3
)

// ConfigOp is one change of an AlterConfigs call.
type ConfigOp struct {
	Name  string
	Value *string
	Op    int8 // OpSet, OpDelete, OpAppend, OpSubtract
}

// AlterConfigs changes the configs of one resource: a topic (resourceType 2,
// resourceName = topic) or a broker (resourceType 4, resourceName = node id, or ""
// for the cluster-wide default). replaceAll is the legacy AlterConfigs semantics:
// configs not set by ops are deleted. APPEND and SUBTRACT treat the value as a
// comma-separated list, starting from the config's default when the resource does
// not set it; a list emptied by SUBTRACT is set to "" (both as Kafka's
// ConfigurationControlManager), which the config's validation may refuse. Topic values are
// checked with Options.ValidateTopicConfig, broker ones with Options.ValidateBrokerConfigs.
func (c *Controller) AlterConfigs(ctx context.Context, resourceType int8, resourceName string, ops []ConfigOp, replaceAll bool, validateOnly bool) error {
	_, err := run(ctx, c, func(ctx context.Context) (struct{}, error) {
		return struct{}{}, c.alterConfigs(ctx, resourceType, resourceName, ops, replaceAll, validateOnly)
	})
	return err
}

func (c *Controller) alterConfigs(ctx context.Context, resourceType int8, resourceName string, ops []ConfigOp, replaceAll bool, validateOnly bool) error {
	if !validateOnly {
		if err := c.requireLeader(); err != nil {
			return err
		}
	}
	img := c.Image()
	var current map[string]string
	switch resourceType {
	case metadata.ResourceTopic:
		t, ok := img.Topic(resourceName)
		if !ok {
			return fmt.Errorf("%w: topic %q does not exist", ErrUnknownTopic, resourceName)
		}
		current = t.Configs
	case metadata.ResourceBroker:
		if resourceName != "" {
			if _, err := strconv.ParseInt(resourceName, 10, 32); err != nil {
				return fmt.Errorf("%w: broker resource name %q is not a node id", ErrInvalidRequest, resourceName)
			}
		}
		current = img.BrokerConfigs(resourceName)
	case metadata.ResourceGroup:
		if resourceName == "" {
			return fmt.Errorf("%w: a group config resource needs a group name", ErrInvalidRequest)
		}
		current = img.GroupConfigs(resourceName)
	default:
		return fmt.Errorf("%w: resource type %d cannot be altered", ErrInvalidRequest, resourceType)
	}

	next := maps.Clone(current)
	if next == nil || replaceAll {
		next = map[string]string{}
	}
	seen := map[string]bool{}
	for _, op := range ops {
		if op.Name == "" {
			return fmt.Errorf("%w: config without a name", ErrInvalidRequest)
		}
		if seen[op.Name] {
			return fmt.Errorf("%w: config %s is changed more than once", ErrInvalidRequest, op.Name)
		}
		seen[op.Name] = true
		switch op.Op {
		case OpSet:
			if op.Value == nil {
				if !replaceAll {
					return fmt.Errorf("%w: SET of %s without a value", ErrInvalidRequest, op.Name)
				}
				continue // legacy AlterConfigs: a null value leaves the config unset
			}
			next[op.Name] = *op.Value
		case OpDelete:
			delete(next, op.Name)
		case OpAppend, OpSubtract:
			if op.Value == nil {
				return fmt.Errorf("%w: %s of %s without a value", ErrInvalidRequest, opName(op.Op), op.Name)
			}
			if !isListConfig(resourceType, op.Name) {
				return fmt.Errorf("%w: %s is not a list config; %s applies to lists only, use SET", ErrInvalidConfig, op.Name, opName(op.Op))
			}
			// Linear in the items: a set, then one pass.
			current, set := next[op.Name]
			if !set {
				current = listDefault(resourceType, op.Name)
			}
			list, items := splitList(current), splitList(*op.Value)
			if op.Op == OpAppend {
				in := make(map[string]bool, len(list)+len(items))
				for _, v := range list {
					in[v] = true
				}
				for _, v := range items {
					if !in[v] {
						in[v] = true
						list = append(list, v)
					}
				}
			} else {
				drop := make(map[string]bool, len(items))
				for _, v := range items {
					drop[v] = true
				}
				list = slices.DeleteFunc(list, func(v string) bool { return drop[v] })
			}
			next[op.Name] = strings.Join(list, ",")
		default:
			return fmt.Errorf("%w: unknown config operation %d", ErrInvalidRequest, op.Op)
		}
	}

	var recs []metadata.Record
	var changed []string
	for _, name := range slices.Sorted(maps.Keys(next)) {
		v := next[name]
		if old, ok := current[name]; ok && old == v {
			continue
		}
		if resourceType == metadata.ResourceTopic {
			if err := c.opts.ValidateTopicConfig(name, v); err != nil {
				return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
			}
		}
		recs = append(recs, metadata.ConfigRecord{ResourceType: resourceType, ResourceName: resourceName, Name: name, Value: &v})
		changed = append(changed, name)
	}
	for _, name := range slices.Sorted(maps.Keys(current)) {
		if _, ok := next[name]; !ok {
			recs = append(recs, metadata.ConfigRecord{ResourceType: resourceType, ResourceName: resourceName, Name: name})
			changed = append(changed, name)
		}
	}
	if resourceType == metadata.ResourceBroker {
		if err := c.opts.ValidateBrokerConfigs(next, changed); err != nil {
			return fmt.Errorf("%w: %w", ErrInvalidRequest, err)
		}
	}
	if resourceType == metadata.ResourceGroup {
		if err := c.opts.ValidateGroupConfigs(next, changed); err != nil {
			return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
		}
	}
	if validateOnly || len(recs) == 0 {
		return nil
	}
	return c.propose(ctx, recs)
}

// isListConfig reports whether the config name of a resource of type resourceType
// is list-typed. Group configs have none; an unknown name is not one (Kafka's
// controller refuses APPEND and SUBTRACT to it the same way).
func isListConfig(resourceType int8, name string) bool {
	switch resourceType {
	case metadata.ResourceTopic:
		return config.IsListTopicConfig(name)
	case metadata.ResourceBroker:
		return config.IsListBrokerProperty(name)
	}
	return false
}

// listDefault is the value APPEND and SUBTRACT start from for a list config the
// resource does not set: the config's default.
func listDefault(resourceType int8, name string) string {
	switch resourceType {
	case metadata.ResourceTopic:
		return config.TopicConfigDefault(name)
	case metadata.ResourceBroker:
		return config.BrokerPropertyDefault(name)
	}
	return ""
}

func splitList(s string) []string {
	var out []string
	for v := range strings.SplitSeq(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}

func opName(op int8) string {
	switch op {
	case OpSet:
		return "SET"
	case OpDelete:
		return "DELETE"
	case OpAppend:
		return "APPEND"
	case OpSubtract:
		return "SUBTRACT"
	}
	return strconv.Itoa(int(op))
}
