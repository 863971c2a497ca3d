package broker

// BrokerRegistration (key 62), versions 0–4, on the controller listener.
//
// Registers a broker: its advertised listeners, rack and incarnation id. A new
// incarnation gets a new broker epoch and starts fenced (the previous incarnation
// leaves every ISR and leadership first); the same incarnation registering again
// keeps its epoch. Errors: DUPLICATE_BROKER_REGISTRATION while another incarnation
// still heartbeats, INCONSISTENT_CLUSTER_ID, NOT_CONTROLLER. Features, log
// directory ids and the ZooKeeper migration flag are ignored (so v4, which only lists
// features of minimum version 0 too, KAFKA-17011, is served as v3 is).

import (
	"context"
	"encoding/hex"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-streaming/samsa/internal/controller"
	"github.com/samsa-streaming/samsa/internal/metadata"
)

func init() { registerController(kmsg.BrokerRegistration, 0, 4, (*Broker).serveBrokerRegistration) }

func (b *Broker) serveBrokerRegistration(ctx context.Context, req kmsg.Request) kmsg.Response {
	r := req.(*kmsg.BrokerRegistrationRequest)
	resp := kmsg.NewPtrBrokerRegistrationResponse()
	resp.SetVersion(r.Version)
	reg := controller.Registration{
		NodeID:        r.BrokerID,
		ClusterID:     r.ClusterID,
		IncarnationID: hex.EncodeToString(r.IncarnationID[:]),
	}
	for _, l := range r.Listeners {
		reg.Endpoints = append(reg.Endpoints, metadata.Endpoint{Name: l.Name, Host: l.Host, Port: int32(l.Port)})
	}
	if r.Rack != nil {
		reg.Rack = *r.Rack
	}
	epoch, err := b.controller.RegisterBroker(ctx, reg)
	if err != nil {
		resp.ErrorCode = errorCode(err)
		return resp
	}
	resp.BrokerEpoch = epoch
	return resp
}
