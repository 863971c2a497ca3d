package broker

// DescribeConfigs (key 32) versions 0–4, AlterConfigs (key 33) versions 0–2,
// IncrementalAlterConfigs (key 44) versions 0–1. The two Alter APIs are forwarded to
// the active controller and served on the controller listener too; DescribeConfigs
// is answered by the broker from its own image and configuration.
//
// Topic resources describe every supported topic config with its effective value and
// source (DYNAMIC_TOPIC_CONFIG for an override, else the broker property's:
// DYNAMIC_BROKER_CONFIG or DYNAMIC_DEFAULT_BROKER_CONFIG when set dynamically,
// STATIC_BROKER_CONFIG when set in the file, DEFAULT_CONFIG otherwise), its type (v3+) and documentation; a
// topic name no topic can have is INVALID_TOPIC_EXCEPTION, as Kafka validates it
// first. Broker resources named by this node's id describe the broker's properties;
// "" describes the cluster-wide dynamic defaults set; another broker's id is
// INVALID_REQUEST, as on Kafka.
// BROKER_LOGGER resources, named by this node's id, describe the root logger at the
// level the broker logs at (read-only: Samsa sets it with --log-level). Group
// resources (KIP-848/KIP-932 group configs: share.*) are set per group through the
// metadata quorum, as Kafka stores them, and describe each group config with its
// override or the broker property it defaults to. Changes to topic configs commit
// through the metadata quorum and take effect on the partitions at once; AlterConfigs
// replaces a topic's whole set of overrides (as Kafka's legacy API does) while
// IncrementalAlterConfigs applies SET,
// DELETE, APPEND and SUBTRACT per config. A resource named twice in one Alter request
// is INVALID_REQUEST wherever it appears, and not applied, as on Kafka. A resource
// named again in one DescribeConfigs request is described where it is first named and
// answered INVALID_REQUEST after: each mention of a broker would otherwise cost its
// whole configuration again (some 30 KB with documentation, for 5 bytes of request),
// so that one request could make the broker build gigabytes.
//
// Broker resources may be altered (KIP-226), for the whole cluster ("") or one
// registered node (its id), in the broker properties that are a topic config's default
// (log.retention.ms, log.segment.bytes, message.max.bytes, min.insync.replicas,
// unclean.leader.election.enable…: config.IsDynamicBrokerProperty). Another property is
// INVALID_REQUEST naming it ("cannot update these configs dynamically"), as is a bad
// value, as on Kafka. Each broker's effective configuration is its static one overlaid
// by the cluster default, then by its own node's, and every partition without a topic
// override follows it as the metadata image changes (reconcile.go); DescribeConfigs
// reports such values with source DYNAMIC_BROKER_CONFIG or
// DYNAMIC_DEFAULT_BROKER_CONFIG, writable, in Kafka's synonym order.

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-streaming/samsa/internal/config"
	"github.com/samsa-streaming/samsa/internal/controller"
	"github.com/samsa-streaming/samsa/internal/metadata"
	"github.com/samsa-streaming/samsa/internal/protocol"
)

func init() {
	register(kmsg.DescribeConfigs, 0, 4, (*Broker).handleDescribeConfigs)
	register(kmsg.AlterConfigs, 0, 2, (*Broker).handleAlterConfigs)
	register(kmsg.IncrementalAlterConfigs, 0, 1, (*Broker).handleIncrementalAlterConfigs)
	registerController(kmsg.AlterConfigs, 0, 2, (*Broker).serveAlterConfigs)
	registerController(kmsg.IncrementalAlterConfigs, 0, 1, (*Broker).serveIncrementalAlterConfigs)
}

func (b *Broker) handleDescribeConfigs(req *protocol.Request) <-chan protocol.Response {
	r := req.Body.(*kmsg.DescribeConfigsRequest)
	resp := kmsg.NewPtrDescribeConfigsResponse()
	resp.SetVersion(req.Version)
	img := b.image()
	type resource struct {
		typ  kmsg.ConfigResourceType
		name string
	}
	seen := make(map[resource]bool, len(r.Resources))
	for _, res := range r.Resources {
		sr := kmsg.NewDescribeConfigsResponseResource()
		sr.ResourceType, sr.ResourceName = res.ResourceType, res.ResourceName
		if key := (resource{res.ResourceType, res.ResourceName}); seen[key] {
			sr.ErrorCode = kerr.InvalidRequest.Code
			sr.ErrorMessage = kmsg.StringPtr("resource named more than once; described where first named")
			resp.Resources = append(resp.Resources, sr)
			continue
		} else {
			seen[key] = true
		}
		var entries []config.Entry
		switch res.ResourceType {
		case kmsg.ConfigResourceTypeTopic:
			if err := legalTopicName(res.ResourceName); err != nil {
				sr.ErrorCode, sr.ErrorMessage = errorCode(err), errorMessage(err)
				break
			}
			t, ok := img.Topic(res.ResourceName)
			if !ok {
				sr.ErrorCode = kerr.UnknownTopicOrPartition.Code
				sr.ErrorMessage = kmsg.StringPtr(fmt.Sprintf("topic %q does not exist", res.ResourceName))
				break
			}
			entries = config.DescribeTopic(b.effectiveConfig(img), t.Configs)
		case kmsg.ConfigResourceTypeBroker:
			if err := b.checkBrokerResource(res.ResourceName); err != nil {
				sr.ErrorCode, sr.ErrorMessage = errorCode(err), errorMessage(err)
				break
			}
			if res.ResourceName != "" {
				entries = config.DescribeBroker(b.effectiveConfig(img))
			} else {
				// The cluster-wide dynamic defaults, of which Kafka describes those set.
				entries = config.DescribeDynamicDefaults(b.effectiveConfig(img))
			}
		case kmsg.ConfigResourceTypeBrokerLogger:
			if err := b.checkBrokerLoggerResource(res.ResourceName); err != nil {
				sr.ErrorCode, sr.ErrorMessage = errorCode(err), errorMessage(err)
				break
			}
			entries = []config.Entry{{Name: "root", Value: log4jLevel(b.logger), ReadOnly: true,
				Source: int8(kmsg.ConfigSourceDynamicBrokerLoggerConfig)}}
		case kmsg.ConfigResourceTypeGroupConfig:
			if res.ResourceName == "" {
				sr.ErrorCode, sr.ErrorMessage = kerr.InvalidRequest.Code, kmsg.StringPtr("a group config resource needs a group name")
				break
			}
			entries = config.DescribeGroup(b.cfg, img.GroupConfigs(res.ResourceName))
		default:
			sr.ErrorCode = kerr.InvalidRequest.Code
			sr.ErrorMessage = kmsg.StringPtr("unsupported config resource type " + strconv.Itoa(int(res.ResourceType)))
		}
		wanted := make(map[string]bool, len(res.ConfigNames))
		for _, n := range res.ConfigNames {
			wanted[n] = true
		}
		for _, e := range entries {
			if res.ConfigNames != nil && !wanted[e.Name] {
				continue
			}
			c := kmsg.NewDescribeConfigsResponseResourceConfig()
			c.Name = e.Name
			v := e.Value
			c.Value = &v
			c.ReadOnly = e.ReadOnly
			c.Source = kmsg.ConfigSource(e.Source)
			c.IsDefault = e.Source == int8(kmsg.ConfigSourceDefaultConfig)
			c.IsSensitive = e.Sensitive
			if e.Sensitive {
				c.Value = nil
			}
			c.ConfigType = kmsg.ConfigType(e.Type)
			if r.IncludeDocumentation && e.Doc != "" {
				doc := e.Doc
				c.Documentation = &doc
			}
			if r.IncludeSynonyms {
				for _, s := range e.Synonyms {
					syn := kmsg.NewDescribeConfigsResponseResourceConfigConfigSynonym()
					syn.Name, syn.Source = s.Name, kmsg.ConfigSource(s.Source)
					if !e.Sensitive {
						syn.Value = kmsg.StringPtr(s.Value)
					}
					c.ConfigSynonyms = append(c.ConfigSynonyms, syn)
				}
			}
			sr.Configs = append(sr.Configs, c)
		}
		resp.Resources = append(resp.Resources, sr)
	}
	return reply(resp)
}

// legalTopicName is Kafka's Topic.validate, which DescribeConfigs applies to a topic
// resource before it looks the topic up: INVALID_TOPIC_EXCEPTION for a name no topic
// can have. The name of the metadata log, which the controller reserves, is legal
// there (Kafka answers it UNKNOWN_TOPIC_OR_PARTITION).
func legalTopicName(name string) error {
	if name == metadataTopic {
		return nil
	}
	return controller.ValidateTopicName(name)
}

// checkBrokerResource accepts this node's id or "" (cluster default); any other name
// is INVALID_REQUEST, as Kafka's ConfigHelper answers: a broker describes its own
// configs only.
func (b *Broker) checkBrokerResource(name string) error {
	if name == "" || name == strconv.Itoa(int(b.nodeID)) {
		return nil
	}
	// Short messages: a request naming thousands of resources is answered with one each.
	if _, err := strconv.ParseInt(name, 10, 32); err != nil {
		return &configError{fmt.Sprintf("%q is not a broker id", name)}
	}
	return &configError{fmt.Sprintf("this is broker %d: ask broker %s", b.nodeID, name)}
}

// checkBrokerLoggerResource accepts this node's id only, as Kafka's ConfigHelper does
// for a BROKER_LOGGER resource.
func (b *Broker) checkBrokerLoggerResource(name string) error {
	if name == "" {
		return &configError{fmt.Sprintf("a broker logger resource needs a broker id: name broker %d", b.nodeID)}
	}
	if name == strconv.Itoa(int(b.nodeID)) {
		return nil
	}
	if _, err := strconv.ParseInt(name, 10, 32); err != nil {
		return &configError{fmt.Sprintf("%q is not a broker id", name)}
	}
	return &configError{fmt.Sprintf("this is broker %d: ask broker %s", b.nodeID, name)}
}

// log4jLevel is the level of logger as log4j names it (Kafka describes its loggers
// so): the lowest it logs at, OFF when it logs nothing.
func log4jLevel(logger *slog.Logger) string {
	for _, l := range []struct {
		level slog.Level
		name  string
	}{{slog.LevelDebug, "DEBUG"}, {slog.LevelInfo, "INFO"}, {slog.LevelWarn, "WARN"}, {slog.LevelError, "ERROR"}} {
		if logger.Enabled(context.Background(), l.level) {
			return l.name
		}
	}
	return "OFF"
}

func (b *Broker) handleAlterConfigs(req *protocol.Request) <-chan protocol.Response {
	return b.forward(req, 0, nil)
}

func (b *Broker) handleIncrementalAlterConfigs(req *protocol.Request) <-chan protocol.Response {
	return b.forward(req, 0, nil)
}

// serveAlterConfigs is the controller side of AlterConfigs.
func (b *Broker) serveAlterConfigs(ctx context.Context, req kmsg.Request) kmsg.Response {
	r := req.(*kmsg.AlterConfigsRequest)
	resp := kmsg.NewPtrAlterConfigsResponse()
	resp.SetVersion(r.Version)
	dup := repeatedResources(r.Resources, func(res kmsg.AlterConfigsRequestResource) configResource {
		return configResource{res.ResourceType, res.ResourceName}
	})
	for _, res := range r.Resources {
		var ops []controller.ConfigOp
		for _, c := range res.Configs {
			ops = append(ops, controller.ConfigOp{Name: c.Name, Value: c.Value, Op: int8(kmsg.IncrementalAlterConfigOpSet)})
		}
		var err error = errRepeatedResource
		if !dup[configResource{res.ResourceType, res.ResourceName}] {
			err = nullValues(res.Configs)
		}
		if err == nil {
			err = b.alterConfigs(ctx, res.ResourceType, res.ResourceName, ops, true, r.ValidateOnly)
		}
		sr := kmsg.NewAlterConfigsResponseResource()
		sr.ResourceType, sr.ResourceName = res.ResourceType, res.ResourceName
		sr.ErrorCode, sr.ErrorMessage = errorCode(err), errorMessage(err)
		resp.Resources = append(resp.Resources, sr)
	}
	return resp
}

// serveIncrementalAlterConfigs is the controller side of IncrementalAlterConfigs.
func (b *Broker) serveIncrementalAlterConfigs(ctx context.Context, req kmsg.Request) kmsg.Response {
	r := req.(*kmsg.IncrementalAlterConfigsRequest)
	resp := kmsg.NewPtrIncrementalAlterConfigsResponse()
	resp.SetVersion(r.Version)
	dup := repeatedResources(r.Resources, func(res kmsg.IncrementalAlterConfigsRequestResource) configResource {
		return configResource{res.ResourceType, res.ResourceName}
	})
	for _, res := range r.Resources {
		var ops []controller.ConfigOp
		for _, c := range res.Configs {
			ops = append(ops, controller.ConfigOp{Name: c.Name, Value: c.Value, Op: int8(c.Op)})
		}
		var err error = errRepeatedResource
		if !dup[configResource{res.ResourceType, res.ResourceName}] {
			err = b.alterConfigs(ctx, res.ResourceType, res.ResourceName, ops, false, r.ValidateOnly)
		}
		sr := kmsg.NewIncrementalAlterConfigsResponseResource()
		sr.ResourceType, sr.ResourceName = res.ResourceType, res.ResourceName
		sr.ErrorCode, sr.ErrorMessage = errorCode(err), errorMessage(err)
		resp.Resources = append(resp.Resources, sr)
	}
	return resp
}

// configResource is a config resource as a request names it.
type configResource struct {
	typ  kmsg.ConfigResourceType
	name string
}

// errRepeatedResource answers each entry of a resource an AlterConfigs or
// IncrementalAlterConfigs request names more than once, as Kafka's
// ConfigAdminManager.preprocess does: none of them is applied.
var errRepeatedResource = &configError{"the resource is named more than once in the request: name it once, with all its changes"}

// nullValues refuses the configs of a legacy AlterConfigs resource given without a
// value, as Kafka's ConfigAdminManager does (INVALID_REQUEST): that API sets every
// config it names.
func nullValues(configs []kmsg.AlterConfigsRequestResourceConfig) error {
	var names []string
	for _, c := range configs {
		if c.Value == nil {
			names = append(names, c.Name)
		}
	}
	if names == nil {
		return nil
	}
	return &configError{"configs without a value: " + strings.Join(names, ", ") + "; AlterConfigs sets every config it names (leave one out to remove it)"}
}

// repeatedResources returns the resources named more than once among resources.
func repeatedResources[T any](resources []T, key func(T) configResource) map[configResource]bool {
	seen, dup := map[configResource]bool{}, map[configResource]bool{}
	for _, res := range resources {
		k := key(res)
		dup[k] = dup[k] || seen[k]
		seen[k] = true
	}
	return dup
}

func (b *Broker) alterConfigs(ctx context.Context, rt kmsg.ConfigResourceType, name string, ops []controller.ConfigOp, replaceAll, validateOnly bool) error {
	switch rt {
	case kmsg.ConfigResourceTypeTopic:
	case kmsg.ConfigResourceTypeGroupConfig:
	case kmsg.ConfigResourceTypeBroker:
		if _, registered := b.image().Broker(metadata.NodeID(atoiOr(name, -1))); name != "" && !registered {
			return &configError{"broker " + name + " is not registered"}
		}
	case kmsg.ConfigResourceTypeBrokerLogger:
		return &configError{"log levels are static in Samsa: start the broker with --log-level"}
	default:
		return &configError{"unsupported config resource type " + strconv.Itoa(int(rt))}
	}
	return b.controller.AlterConfigs(ctx, int8(rt), name, ops, replaceAll, validateOnly)
}

func atoiOr(s string, def int) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		return def
	}
	return n
}

// configError is an INVALID_REQUEST with a message.
type configError struct{ msg string }

func (e *configError) Error() string { return e.msg }
func (e *configError) Unwrap() error { return kerr.InvalidRequest }
