package broker

// SaslHandshake (key 17) versions 0–1 and SaslAuthenticate (key 36) versions 0–2.
//
// On a SASL listener the server (internal/server) runs the exchange itself and never
// passes these requests on; they reach the broker only on a listener without SASL,
// where Kafka answers ILLEGAL_SASL_STATE, and so does Samsa. They are registered
// here so that ApiVersions advertises them.

import (
	"context"
	"net/netip"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-streaming/samsa/internal/auth"
	"github.com/samsa-streaming/samsa/internal/protocol"
)

func init() {
	register(kmsg.SASLHandshake, 0, 1, (*Broker).handleSASLHandshake)
	register(kmsg.SASLAuthenticate, 0, 2, (*Broker).handleSASLAuthenticate)
	// The controller listener advertises them too: nodes dialling a SASL controller
	// listener check its ApiVersions before authenticating.
	registerController(kmsg.SASLHandshake, 0, 1, func(*Broker, context.Context, kmsg.Request) kmsg.Response {
		resp := kmsg.NewPtrSASLHandshakeResponse()
		resp.ErrorCode = kerr.IllegalSaslState.Code
		return resp
	})
	registerController(kmsg.SASLAuthenticate, 0, 2, func(*Broker, context.Context, kmsg.Request) kmsg.Response {
		resp := kmsg.NewPtrSASLAuthenticateResponse()
		resp.ErrorCode = kerr.IllegalSaslState.Code
		resp.ErrorMessage = kmsg.StringPtr("the controller listener does not use SASL")
		return resp
	})
}

func (b *Broker) handleSASLHandshake(req *protocol.Request) <-chan protocol.Response {
	resp := kmsg.NewPtrSASLHandshakeResponse()
	resp.ErrorCode = kerr.IllegalSaslState.Code
	return reply(resp)
}

func (b *Broker) handleSASLAuthenticate(req *protocol.Request) <-chan protocol.Response {
	resp := kmsg.NewPtrSASLAuthenticateResponse()
	resp.ErrorCode = kerr.IllegalSaslState.Code
	resp.ErrorMessage = kmsg.StringPtr("listener " + req.Listener + " does not use SASL")
	return reply(resp)
}

// ScramCredential finds a SCRAM credential in this node's metadata image; it is the
// lookup the server's SASL listeners use.
func (b *Broker) ScramCredential(m auth.ScramMechanism, user string) (auth.ScramCredential, bool) {
	c, ok := b.image().ScramCredential(int8(m), user)
	if !ok {
		return auth.ScramCredential{}, false
	}
	return auth.ScramCredential{Mechanism: m, Salt: c.Salt, StoredKey: c.StoredKey, ServerKey: c.ServerKey, Iterations: c.Iterations}, true
}

// IPConnectionRate is the connection_creation_rate quota of ip in this node's
// metadata image (KIP-612); the server asks it for each connection it accepts.
func (b *Broker) IPConnectionRate(ip netip.Addr) (float64, bool) {
	return b.ipRates.Lookup(b.image(), ip)
}

// DelegationToken is the server's auth.TokenLookup: the token with id, its HMAC
// derived from delegation.token.secret.key.
func (b *Broker) DelegationToken(id string) (auth.DelegationToken, bool) {
	t, ok := b.image().DelegationToken(id)
	if !ok {
		return auth.DelegationToken{}, false
	}
	owner, err := auth.ParsePrincipal(t.Owner)
	if err != nil {
		return auth.DelegationToken{}, false
	}
	return auth.DelegationToken{Owner: owner, HMAC: auth.TokenHMAC(b.cfg.DelegationTokenKey(), id),
		Expiry: time.UnixMilli(min(t.ExpiryMs, t.MaxMs))}, true
}
