package controller

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/samsa-streaming/samsa/internal/auth"
	"github.com/samsa-streaming/samsa/internal/metadata"
)

// Delegation tokens (KIP-48), as Kafka's DelegationTokenControlManager keeps them: a
// create, renewal or expiry is a record in the metadata log, checked against the
// image; every node derives a token's HMAC from its id and the shared secret.

// TokenOptions configures delegation tokens.
type TokenOptions struct {
	// Secret is delegation.token.secret.key; "" disables the tokens
	// (DELEGATION_TOKEN_AUTH_DISABLED).
	Secret string
	// MaxLifetime (delegation.token.max.lifetime.ms) bounds a token's life from its
	// creation; 0 means 7 days.
	MaxLifetime time.Duration
	// ExpiryTime (delegation.token.expiry.time.ms) is a token's life from its
	// creation or renewal; 0 means 1 day.
	ExpiryTime time.Duration
	// CheckInterval (delegation.token.expiry.check.interval.ms) is how often expired
	// tokens are removed; 0 means 1 hour.
	CheckInterval time.Duration
}

func (o *TokenOptions) defaults() {
	if o.MaxLifetime <= 0 {
		o.MaxLifetime = 7 * 24 * time.Hour
	}
	if o.ExpiryTime <= 0 {
		o.ExpiryTime = 24 * time.Hour
	}
	if o.CheckInterval <= 0 {
		o.CheckInterval = time.Hour
	}
}

// CreateDelegationToken issues a token for owner, asked for by requester (both
// principals, "User:alice"), renewable by renewers. maxLifetimeMs > 0 asks for a
// shorter life than delegation.token.max.lifetime.ms. It returns the token and its
// HMAC.
func (c *Controller) CreateDelegationToken(ctx context.Context, requester, owner string, renewers []string, maxLifetimeMs int64) (metadata.DelegationToken, []byte, error) {
	type created struct {
		tok  metadata.DelegationToken
		hmac []byte
	}
	out, err := run(ctx, c, func(ctx context.Context) (created, error) {
		if err := c.requireLeader(); err != nil {
			return created{}, err
		}
		if err := c.tokensEnabled(); err != nil {
			return created{}, err
		}
		for _, r := range renewers {
			p, err := auth.ParsePrincipal(r)
			if err != nil || p.Type != auth.UserType {
				return created{}, fmt.Errorf("%w: renewer %q is not a User principal", kerr.InvalidPrincipalType, r)
			}
		}
		now := c.opts.Clock.Now().UnixMilli()
		life := c.opts.Tokens.MaxLifetime.Milliseconds()
		if maxLifetimeMs > 0 {
			life = min(life, maxLifetimeMs)
		}
		maxMs := addMs(now, life)
		rec := metadata.DelegationTokenRecord{TokenID: NewClusterID(), Owner: owner, Requester: requester,
			Renewers: renewers, IssueMs: now, MaxMs: maxMs, ExpiryMs: min(maxMs, addMs(now, c.opts.Tokens.ExpiryTime.Milliseconds()))}
		if err := c.propose(ctx, []metadata.Record{rec}); err != nil {
			return created{}, err
		}
		c.logger.Info("delegation token created", "token_id", rec.TokenID, "owner", owner, "requester", requester)
		return created{metadata.DelegationToken(rec), auth.TokenHMAC(c.opts.Tokens.Secret, rec.TokenID)}, nil
	})
	return out.tok, out.hmac, err
}

// RenewDelegationToken extends the token of hmac by delegation.token.expiry.time.ms
// (or periodMs when shorter and positive), never past its maximum lifetime; only its
// owner and renewers may. It returns the new expiry.
func (c *Controller) RenewDelegationToken(ctx context.Context, requester string, hmac []byte, periodMs int64) (int64, error) {
	return c.changeToken(ctx, requester, hmac, func(tok metadata.DelegationToken, now int64) (metadata.Record, int64, error) {
		if tok.Expired(now) {
			return nil, 0, fmt.Errorf("%w: token %s expired at %s", kerr.DelegationTokenExpired, tok.TokenID, time.UnixMilli(tok.ExpiryMs).UTC().Format(time.RFC3339))
		}
		period := c.opts.Tokens.ExpiryTime.Milliseconds()
		if periodMs > 0 {
			period = min(period, periodMs)
		}
		tok.ExpiryMs = min(tok.MaxMs, addMs(now, period))
		return metadata.DelegationTokenRecord(tok), tok.ExpiryMs, nil
	})
}

// ExpireDelegationToken sets the token of hmac to expire periodMs from now (never
// later than it would), or removes it at once when periodMs is negative; only its
// owner and renewers may. It returns the new expiry.
func (c *Controller) ExpireDelegationToken(ctx context.Context, requester string, hmac []byte, periodMs int64) (int64, error) {
	return c.changeToken(ctx, requester, hmac, func(tok metadata.DelegationToken, now int64) (metadata.Record, int64, error) {
		switch {
		case periodMs < 0:
			return metadata.RemoveDelegationTokenRecord{TokenID: tok.TokenID}, now, nil
		case tok.Expired(now):
			return nil, 0, fmt.Errorf("%w: token %s expired at %s", kerr.DelegationTokenExpired, tok.TokenID, time.UnixMilli(tok.ExpiryMs).UTC().Format(time.RFC3339))
		}
		tok.ExpiryMs = min(tok.MaxMs, addMs(now, periodMs))
		return metadata.DelegationTokenRecord(tok), tok.ExpiryMs, nil
	})
}

// changeToken finds the token of hmac, checks that requester owns or renews it, and
// proposes the record change makes of it.
func (c *Controller) changeToken(ctx context.Context, requester string, hmac []byte,
	change func(tok metadata.DelegationToken, nowMs int64) (metadata.Record, int64, error)) (int64, error) {
	return run(ctx, c, func(ctx context.Context) (int64, error) {
		if err := c.requireLeader(); err != nil {
			return 0, err
		}
		if err := c.tokensEnabled(); err != nil {
			return 0, err
		}
		tok, ok := auth.TokenWithHMAC(c.Image(), c.opts.Tokens.Secret, hmac)
		if !ok {
			return 0, fmt.Errorf("%w: no delegation token has this HMAC", kerr.DelegationTokenNotFound)
		}
		if !tok.OwnerOrRenewer(requester) {
			return 0, fmt.Errorf("%w: %s is neither the owner of token %s nor one of its renewers", kerr.DelegationTokenOwnerMismatch, requester, tok.TokenID)
		}
		tok.Renewers = append([]string(nil), tok.Renewers...)
		rec, expiry, err := change(tok, c.opts.Clock.Now().UnixMilli())
		if err != nil {
			return 0, err
		}
		if err := c.propose(ctx, []metadata.Record{rec}); err != nil {
			return 0, err
		}
		return expiry, nil
	})
}

func (c *Controller) tokensEnabled() error {
	if c.opts.Tokens.Secret == "" {
		return fmt.Errorf("%w: set delegation.token.secret.key on every node", kerr.DelegationTokenAuthDisabled)
	}
	return nil
}

// sweepTokens removes the delegation tokens expired at now (maintain); false when
// the proposal failed.
func (c *Controller) sweepTokens(ctx context.Context, now time.Time) bool {
	var recs []metadata.Record
	for _, tok := range c.Image().DelegationTokens() {
		if tok.Expired(now.UnixMilli()) {
			recs = append(recs, metadata.RemoveDelegationTokenRecord{TokenID: tok.TokenID})
		}
	}
	if len(recs) == 0 {
		return true
	}
	if err := c.propose(ctx, recs); err != nil {
		c.logger.Warn("could not remove expired delegation tokens", "error", err)
		return false
	}
	c.logger.Info("removed expired delegation tokens", "count", len(recs))
	return true
}

// addMs is a+b, saturated at MaxInt64 (Kafka's sum: a lifetime of Long.MAX_VALUE
// must not wrap).
func addMs(a, b int64) int64 {
	if b > 0 && a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}
