package broker

// CreateDelegationToken (key 38) v1–3, RenewDelegationToken (39) v1–2,
// ExpireDelegationToken (40) v1–2 and DescribeDelegationToken (41) v1–3: delegation
// tokens (KIP-48), as Kafka's KafkaApis and controller serve them.
//
// A token is issued to an owner (the requester, or from v3 another principal when the
// requester has CREATE_TOKENS on that User resource) and may be renewed by its owner
// and its renewers. Its information lives in the metadata log; its HMAC, the SCRAM
// password a client authenticates with (SCRAM-SHA-256 or -512, the token id as the
// user name, the tokenauth=true extension), is HMAC-SHA512 of the id keyed with
// delegation.token.secret.key, which every node shares. A client authenticated with a
// token acts as its owner.
//
// Refused with DELEGATION_TOKEN_REQUEST_NOT_ALLOWED, as in Kafka: a connection
// authenticated with a token, one on a PLAINTEXT listener and one on an SSL listener
// without a client certificate. Without a secret every request is answered
// DELEGATION_TOKEN_AUTH_DISABLED. Create, renew and expire go to the active
// controller (SamsaDelegationToken carries the requester's principal, which the Kafka
// requests do not name); the answer waits until this node's image shows the change,
// so that the token authenticates here (or, expired, no longer does) at once.
// Describe lists the tokens the requester owns or renews, and those it may see by
// ACL: DESCRIBE on the DELEGATION_TOKEN resource of the token id, or DESCRIBE_TOKENS
// on the owner's User resource.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-streaming/samsa/internal/auth"
	"github.com/samsa-streaming/samsa/internal/config"
	"github.com/samsa-streaming/samsa/internal/metadata"
	"github.com/samsa-streaming/samsa/internal/protocol"
)

func init() {
	register(kmsg.CreateDelegationToken, 1, 3, (*Broker).handleCreateDelegationToken)
	register(kmsg.RenewDelegationToken, 1, 2, (*Broker).handleRenewDelegationToken)
	register(kmsg.ExpireDelegationToken, 1, 2, (*Broker).handleExpireDelegationToken)
	register(kmsg.DescribeDelegationToken, 1, 3, (*Broker).handleDescribeDelegationToken)
	registerController(protocol.DelegationTokenKey, 0, 0, (*Broker).serveDelegationToken)
}

// tokenRefusal is the error a token request is refused with before anything else,
// or 0.
func (b *Broker) tokenRefusal(req *protocol.Request) int16 {
	proto, _ := b.cfg.SecurityProtocol(req.Listener)
	switch {
	case req.ViaToken, proto == config.ProtocolPlaintext, proto == config.ProtocolSSL && req.Principal == auth.Anonymous:
		return kerr.DelegationTokenRequestNotAllowed.Code
	case b.cfg.DelegationTokenKey() == "":
		return kerr.DelegationTokenAuthDisabled.Code
	}
	return 0
}

func (b *Broker) handleCreateDelegationToken(req *protocol.Request) <-chan protocol.Response {
	r := req.Body.(*kmsg.CreateDelegationTokenRequest)
	owner := req.Principal
	if r.OwnerPrincipalName != nil && *r.OwnerPrincipalName != "" {
		owner = auth.Principal{Name: *r.OwnerPrincipalName, Type: auth.UserType}
		if r.OwnerPrincipalType != nil {
			owner.Type = *r.OwnerPrincipalType
		}
	}
	resp := r.ResponseKind().(*kmsg.CreateDelegationTokenResponse)
	resp.PrincipalType, resp.PrincipalName = owner.Type, owner.Name
	resp.TokenRequesterPrincipalType, resp.TokenRequesterPrincipalName = req.Principal.Type, req.Principal.Name
	resp.IssueTimestamp, resp.ExpiryTimestamp, resp.MaxTimestamp = -1, -1, -1
	resp.HMAC = []byte{}
	code := b.tokenRefusal(req)
	var renewers []string
	for _, rn := range r.Renewers {
		if rn.PrincipalType != auth.UserType && code == 0 {
			code = kerr.InvalidPrincipalType.Code
		}
		renewers = append(renewers, auth.Principal{Type: rn.PrincipalType, Name: rn.PrincipalName}.String())
	}
	if code == 0 && owner != req.Principal && !b.authorize(req, auth.OpCreateTokens, auth.ResourceUser, owner.String()) {
		code = kerr.DelegationTokenAuthorizationFailed.Code
	}
	if code != 0 {
		resp.ErrorCode = code
		return reply(resp)
	}
	return b.toController(req, &protocol.DelegationTokenRequest{Op: protocol.TokenCreate, Requester: req.Principal.String(),
		Owner: owner.String(), Renewers: renewers, PeriodMs: r.MaxLifetimeMillis},
		func(img *metadata.Image, out *protocol.DelegationTokenResponse) bool {
			_, ok := img.DelegationToken(out.TokenID)
			return ok
		},
		func(out *protocol.DelegationTokenResponse) kmsg.Response {
			resp.ErrorCode = out.ErrorCode
			if out.ErrorCode == 0 {
				resp.IssueTimestamp, resp.ExpiryTimestamp, resp.MaxTimestamp = out.IssueMs, out.ExpiryMs, out.MaxMs
				resp.TokenID, resp.HMAC = out.TokenID, out.HMAC
			}
			return resp
		})
}

func (b *Broker) handleRenewDelegationToken(req *protocol.Request) <-chan protocol.Response {
	r := req.Body.(*kmsg.RenewDelegationTokenRequest)
	return b.changeToken(req, protocol.TokenRenew, r.HMAC, r.RenewTimeMillis, func(code int16, expiry int64) kmsg.Response {
		resp := r.ResponseKind().(*kmsg.RenewDelegationTokenResponse)
		resp.ErrorCode, resp.ExpiryTimestamp = code, expiry
		return resp
	})
}

func (b *Broker) handleExpireDelegationToken(req *protocol.Request) <-chan protocol.Response {
	r := req.Body.(*kmsg.ExpireDelegationTokenRequest)
	return b.changeToken(req, protocol.TokenExpire, r.HMAC, r.ExpiryPeriodMillis, func(code int16, expiry int64) kmsg.Response {
		resp := r.ResponseKind().(*kmsg.ExpireDelegationTokenResponse)
		resp.ErrorCode, resp.ExpiryTimestamp = code, expiry
		return resp
	})
}

// changeToken renews or expires the token of hmac; answer makes the response (expiry
// -1 on an error, as Kafka answers).
func (b *Broker) changeToken(req *protocol.Request, op int8, hmac []byte, periodMs int64, answer func(code int16, expiry int64) kmsg.Response) <-chan protocol.Response {
	if code := b.tokenRefusal(req); code != 0 {
		return reply(answer(code, -1))
	}
	tok, _ := auth.TokenWithHMAC(b.image(), b.cfg.DelegationTokenKey(), hmac)
	id := tok.TokenID // "" when this node does not know the token
	return b.toController(req, &protocol.DelegationTokenRequest{Op: op, Requester: req.Principal.String(), PeriodMs: periodMs, HMAC: hmac},
		func(img *metadata.Image, out *protocol.DelegationTokenResponse) bool {
			tok, ok := img.DelegationToken(id)
			return id == "" || (ok && tok.ExpiryMs == out.ExpiryMs) || (!ok && op == protocol.TokenExpire && periodMs < 0)
		},
		func(out *protocol.DelegationTokenResponse) kmsg.Response {
			if out.ErrorCode != 0 {
				return answer(out.ErrorCode, -1)
			}
			return answer(0, out.ExpiryMs)
		})
}

// toController sends a token request to the active controller and answers with
// answer(its response) once visible holds for this node's image (or the request's
// time is up); a controller that does not answer in time is REQUEST_TIMED_OUT.
func (b *Broker) toController(req *protocol.Request, tr *protocol.DelegationTokenRequest,
	visible func(*metadata.Image, *protocol.DelegationTokenResponse) bool,
	answer func(*protocol.DelegationTokenResponse) kmsg.Response) <-chan protocol.Response {
	out := make(chan protocol.Response, 1)
	b.answerLater(req, out, func() {
		ctx, cancel := b.requestContext(0)
		defer cancel()
		r, err := b.channel.Send(ctx, tr)
		if err != nil {
			b.logger.Warn("no active controller answered a delegation token request", "api", kmsg.NameForKey(req.Key), "error", err)
			out <- protocol.Response{Body: answer(&protocol.DelegationTokenResponse{ErrorCode: kerr.RequestTimedOut.Code})}
			return
		}
		resp := r.(*protocol.DelegationTokenResponse)
		if resp.ErrorCode != 0 {
			b.logger.Debug("delegation token request refused", "api", kmsg.NameForKey(req.Key), "principal", req.Principal.String(),
				"error", kerr.ErrorForCode(resp.ErrorCode), "reason", resp.ErrorMessage)
		}
		if resp.ErrorCode == 0 {
			b.awaitImage(ctx, func(img *metadata.Image) bool { return visible(img, resp) })
		}
		out <- protocol.Response{Body: answer(resp)}
	})
	return out
}

// serveDelegationToken is the controller side of SamsaDelegationToken.
func (b *Broker) serveDelegationToken(ctx context.Context, req kmsg.Request) kmsg.Response {
	r := req.(*protocol.DelegationTokenRequest)
	resp := &protocol.DelegationTokenResponse{}
	var err error
	switch r.Op {
	case protocol.TokenCreate:
		var tok metadata.DelegationToken
		tok, resp.HMAC, err = b.controller.CreateDelegationToken(ctx, r.Requester, r.Owner, r.Renewers, r.PeriodMs)
		resp.TokenID, resp.IssueMs, resp.ExpiryMs, resp.MaxMs = tok.TokenID, tok.IssueMs, tok.ExpiryMs, tok.MaxMs
	case protocol.TokenRenew:
		resp.ExpiryMs, err = b.controller.RenewDelegationToken(ctx, r.Requester, r.HMAC, r.PeriodMs)
	case protocol.TokenExpire:
		resp.ExpiryMs, err = b.controller.ExpireDelegationToken(ctx, r.Requester, r.HMAC, r.PeriodMs)
	default:
		err = kerr.InvalidRequest
	}
	if err != nil {
		resp.ErrorCode, resp.ErrorMessage = errorCode(err), wireMessage(err)
	}
	return resp
}

func (b *Broker) handleDescribeDelegationToken(req *protocol.Request) <-chan protocol.Response {
	r := req.Body.(*kmsg.DescribeDelegationTokenRequest)
	resp := r.ResponseKind().(*kmsg.DescribeDelegationTokenResponse)
	if resp.ErrorCode = b.tokenRefusal(req); resp.ErrorCode != 0 || (r.Owners != nil && len(r.Owners) == 0) {
		return reply(resp)
	}
	var owners []string
	for _, o := range r.Owners {
		owners = append(owners, auth.Principal{Type: o.PrincipalType, Name: o.PrincipalName}.String())
	}
	requester, secret := req.Principal.String(), b.cfg.DelegationTokenKey()
	for _, tok := range b.image().DelegationTokens() {
		if !b.mayDescribeToken(req, requester, owners, tok) {
			continue
		}
		d := kmsg.NewDescribeDelegationTokenResponseTokenDetail()
		owner, _ := auth.ParsePrincipal(tok.Owner)
		d.PrincipalType, d.PrincipalName = owner.Type, owner.Name
		if rq, err := auth.ParsePrincipal(tok.Requester); err == nil {
			d.TokenRequesterPrincipalType, d.TokenRequesterPrincipalName = rq.Type, rq.Name
		}
		d.IssueTimestamp, d.ExpiryTimestamp, d.MaxTimestamp = tok.IssueMs, tok.ExpiryMs, tok.MaxMs
		d.TokenID, d.HMAC = tok.TokenID, auth.TokenHMAC(secret, tok.TokenID)
		for _, rn := range tok.Renewers {
			p, _ := auth.ParsePrincipal(rn)
			dr := kmsg.NewDescribeDelegationTokenResponseTokenDetailRenewer()
			dr.PrincipalType, dr.PrincipalName = p.Type, p.Name
			d.Renewers = append(d.Renewers, dr)
		}
		resp.TokenDetails = append(resp.TokenDetails, d)
	}
	return reply(resp)
}

// mayDescribeToken is Kafka's DelegationTokenManager.filterToken: a token of one of
// owners (owned or renewed by one; nil: any), which requester owns or renews, or may
// see by ACL.
func (b *Broker) mayDescribeToken(req *protocol.Request, requester string, owners []string, tok metadata.DelegationToken) bool {
	if owners != nil {
		named := false
		for _, o := range owners {
			named = named || tok.OwnerOrRenewer(o)
		}
		if !named {
			return false
		}
	}
	return tok.OwnerOrRenewer(requester) ||
		b.allowed(req, auth.OpDescribe, auth.ResourceDelegationToken, tok.TokenID) ||
		b.allowed(req, auth.OpDescribeTokens, auth.ResourceUser, tok.Owner)
}
