package broker

// DescribeClientQuotas (key 48) and AlterClientQuotas (key 49), versions 0–1
// (KIP-546).
//
// Quotas by user and client id live in the metadata log (ClientQuotaRecord):
// Describe is answered from this node's image, Alter is forwarded to the active
// controller. Describe needs DESCRIBE_CONFIGS on the cluster, Alter ALTER_CONFIGS.
// The quotas are producer_byte_rate, consumer_byte_rate, request_percentage and
// controller_mutation_rate of users and client ids, and connection_creation_rate of
// IP entities (KIP-612), which the server enforces where it accepts connections
// (Broker.IPConnectionRate).

import (
	"context"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-streaming/samsa/internal/auth"
	"github.com/samsa-streaming/samsa/internal/controller"
	"github.com/samsa-streaming/samsa/internal/metadata"
	"github.com/samsa-streaming/samsa/internal/protocol"
)

func init() {
	register(kmsg.DescribeClientQuotas, 0, 1, (*Broker).handleDescribeClientQuotas)
	register(kmsg.AlterClientQuotas, 0, 1, (*Broker).handleAlterClientQuotas)
	registerController(kmsg.AlterClientQuotas, 0, 1, (*Broker).serveAlterClientQuotas)
}

func (b *Broker) handleDescribeClientQuotas(req *protocol.Request) <-chan protocol.Response {
	r := req.Body.(*kmsg.DescribeClientQuotasRequest)
	resp := kmsg.NewPtrDescribeClientQuotasResponse()
	resp.SetVersion(req.Version)
	if !b.authorizeCluster(req, auth.OpDescribeConfigs) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return reply(resp)
	}
	quotas := b.image().Quotas()
	for _, key := range slices.Sorted(mapKeys(quotas)) {
		q := quotas[key]
		if !quotaMatches(q.Entity, r.Components, r.Strict) {
			continue
		}
		e := kmsg.NewDescribeClientQuotasResponseEntry()
		for _, ent := range q.Entity {
			re := kmsg.NewDescribeClientQuotasResponseEntryEntity()
			re.Type, re.Name = ent.Type, ent.Name
			e.Entity = append(e.Entity, re)
		}
		for _, k := range slices.Sorted(mapKeys(q.Values)) {
			v := kmsg.NewDescribeClientQuotasResponseEntryValue()
			v.Key, v.Value = k, q.Values[k]
			e.Values = append(e.Values, v)
		}
		resp.Entries = append(resp.Entries, e)
	}
	return reply(resp)
}

// quotaMatches applies DescribeClientQuotas' filter: each component matches the
// entity's part of its type exactly (0), as the default (1) or any (2); with strict,
// the entity has no other parts.
func quotaMatches(entity []metadata.QuotaEntity, components []kmsg.DescribeClientQuotasRequestComponent, strict bool) bool {
	if strict && len(entity) != len(components) {
		return false
	}
	for _, c := range components {
		i := slices.IndexFunc(entity, func(e metadata.QuotaEntity) bool { return e.Type == c.EntityType })
		if i < 0 {
			return false
		}
		name := entity[i].Name
		switch c.MatchType {
		case kmsg.QuotasMatchTypeExact:
			if name == nil || c.Match == nil || *name != *c.Match {
				return false
			}
		case kmsg.QuotasMatchTypeDefault:
			if name != nil {
				return false
			}
		}
	}
	return true
}

func (b *Broker) handleAlterClientQuotas(req *protocol.Request) <-chan protocol.Response {
	r := req.Body.(*kmsg.AlterClientQuotasRequest)
	if b.authorizeCluster(req, auth.OpAlterConfigs) {
		return b.forward(req, 0, nil)
	}
	resp := kmsg.NewPtrAlterClientQuotasResponse()
	resp.SetVersion(req.Version)
	for _, e := range r.Entries {
		resp.Entries = append(resp.Entries, alterQuotasResult(e, kerr.ClusterAuthorizationFailed))
	}
	return reply(resp)
}

func alterQuotasResult(e kmsg.AlterClientQuotasRequestEntry, err error) kmsg.AlterClientQuotasResponseEntry {
	res := kmsg.NewAlterClientQuotasResponseEntry()
	for _, ent := range e.Entity {
		re := kmsg.NewAlterClientQuotasResponseEntryEntity()
		re.Type, re.Name = ent.Type, ent.Name
		res.Entity = append(res.Entity, re)
	}
	res.ErrorCode, res.ErrorMessage = errorCode(err), errorMessage(err)
	return res
}

// serveAlterClientQuotas is the controller side.
func (b *Broker) serveAlterClientQuotas(ctx context.Context, req kmsg.Request) kmsg.Response {
	r := req.(*kmsg.AlterClientQuotasRequest)
	resp := kmsg.NewPtrAlterClientQuotasResponse()
	resp.SetVersion(r.Version)
	changes := make([]controller.QuotaChange, len(r.Entries))
	for i, e := range r.Entries {
		ch := controller.QuotaChange{Values: map[string]float64{}}
		for _, ent := range e.Entity {
			ch.Entity = append(ch.Entity, metadata.QuotaEntity{Type: ent.Type, Name: ent.Name})
		}
		for _, op := range e.Ops {
			if op.Remove {
				ch.Removes = append(ch.Removes, op.Key)
			} else {
				ch.Values[op.Key] = op.Value
			}
		}
		changes[i] = ch
	}
	errs, err := b.controller.AlterClientQuotas(ctx, changes, r.ValidateOnly)
	for i, e := range r.Entries {
		ee := err
		if ee == nil {
			ee = errs[i]
		}
		resp.Entries = append(resp.Entries, alterQuotasResult(e, ee))
	}
	return resp
}
