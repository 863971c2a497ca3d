package controller

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/samsa-streaming/samsa/internal/auth"
	"github.com/samsa-streaming/samsa/internal/clock"
)

// TestDelegationTokenLifetimes: a token lives delegation.token.expiry.time.ms from
// its creation or renewal, never past its maximum lifetime (the broker's, or a
// shorter one asked for); only its owner and renewers renew or expire it; an expired
// token is not renewed and maintain removes it once the check interval has passed
// since its last sweep; a
// negative expiry period removes it at once.
func TestDelegationTokenLifetimes(t *testing.T) {
	o := testOptions(t, t.TempDir())
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	o.Clock = clk
	o.Tokens = TokenOptions{Secret: "s3cret", MaxLifetime: 10 * time.Hour, ExpiryTime: time.Hour, CheckInterval: 20 * time.Hour}
	c := startController(t, o)
	t0 := clk.Now().UnixMilli()
	ms := func(d time.Duration) int64 { return d.Milliseconds() }

	tok, hmac, err := c.CreateDelegationToken(ctx(t), "User:admin", "User:owner", []string{"User:renewer"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if tok.IssueMs != t0 || tok.ExpiryMs != t0+ms(time.Hour) || tok.MaxMs != t0+ms(10*time.Hour) || tok.Owner != "User:owner" ||
		tok.Requester != "User:admin" || string(hmac) != string(auth.TokenHMAC("s3cret", tok.TokenID)) {
		t.Fatalf("created %+v", tok)
	}
	if got, ok := c.Image().DelegationToken(tok.TokenID); !ok || got.ExpiryMs != tok.ExpiryMs {
		t.Fatalf("image has %+v %t", got, ok)
	}
	short, _, err := c.CreateDelegationToken(ctx(t), "User:owner", "User:owner", nil, ms(30*time.Minute))
	if err != nil || short.MaxMs != t0+ms(30*time.Minute) || short.ExpiryMs != short.MaxMs {
		t.Fatalf("a token asking for 30 minutes: %+v %v", short, err)
	}
	if _, _, err := c.CreateDelegationToken(ctx(t), "User:owner", "User:owner", []string{"Group:g"}, 0); !errors.Is(err, kerr.InvalidPrincipalType) {
		t.Errorf("a Group renewer: %v", err)
	}

	renew := func(who string, period time.Duration) (int64, error) {
		return c.RenewDelegationToken(ctx(t), who, hmac, ms(period))
	}
	if _, err := renew("User:stranger", 0); !errors.Is(err, kerr.DelegationTokenOwnerMismatch) {
		t.Errorf("a stranger renews: %v", err)
	}
	if _, err := c.RenewDelegationToken(ctx(t), "User:owner", []byte("no such hmac"), 0); !errors.Is(err, kerr.DelegationTokenNotFound) {
		t.Errorf("an unknown HMAC: %v", err)
	}
	clk.Advance(50 * time.Minute)
	if exp, err := renew("User:renewer", 0); err != nil || exp != clk.Now().UnixMilli()+ms(time.Hour) {
		t.Errorf("the renewer renews: %d %v, want an hour from now", exp, err)
	}
	if exp, err := renew("User:owner", 2*time.Hour); err != nil || exp != clk.Now().UnixMilli()+ms(time.Hour) {
		t.Errorf("a renewal asking for more than the expiry time: %d %v, want an hour from now", exp, err)
	}
	if exp, err := renew("User:owner", time.Minute); err != nil || exp != clk.Now().UnixMilli()+ms(time.Minute) {
		t.Errorf("a renewal of a minute: %d %v", exp, err)
	}
	clk.Advance(9*time.Hour + 5*time.Minute) // past the minute, so expired
	if _, err := renew("User:owner", 0); !errors.Is(err, kerr.DelegationTokenExpired) {
		t.Errorf("renew an expired token: %v", err)
	}
	if _, err := c.ExpireDelegationToken(ctx(t), "User:owner", hmac, ms(time.Minute)); !errors.Is(err, kerr.DelegationTokenExpired) {
		t.Errorf("expire an expired token later: %v", err)
	}

	// maintain removes the expired tokens once the check interval has passed since
	// the last sweep (at the start).
	maintain := func() {
		if _, err := run(ctx(t), c, func(context.Context) (struct{}, error) { c.maintain(); return struct{}{}, nil }); err != nil {
			t.Fatal(err)
		}
	}
	maintain()
	if toks := c.Image().DelegationTokens(); len(toks) != 2 {
		t.Errorf("expired tokens removed within the check interval: %+v", toks)
	}
	clk.Advance(11 * time.Hour)
	maintain()
	if toks := c.Image().DelegationTokens(); len(toks) != 0 {
		t.Errorf("after the sweep: %+v", toks)
	}

	// Renewals stop at the maximum lifetime; a negative expiry removes at once.
	tok, hmac, err = c.CreateDelegationToken(ctx(t), "User:owner", "User:owner", nil, ms(90*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	clk.Advance(59 * time.Minute)
	if exp, err := renew("User:owner", 0); err != nil || exp != tok.MaxMs {
		t.Errorf("a renewal past the maximum lifetime: %d %v, want the maximum %d", exp, err, tok.MaxMs)
	}
	if exp, err := c.ExpireDelegationToken(ctx(t), "User:owner", hmac, ms(5*time.Minute)); err != nil || exp != clk.Now().UnixMilli()+ms(5*time.Minute) {
		t.Errorf("expire in 5 minutes: %d %v", exp, err)
	}
	if _, err := c.ExpireDelegationToken(ctx(t), "User:owner", hmac, -1); err != nil {
		t.Fatal(err)
	}
	if _, ok := c.Image().DelegationToken(tok.TokenID); ok {
		t.Error("a token expired at once is still there")
	}
}

// TestDelegationTokensDisabled: without a secret every token command is
// DELEGATION_TOKEN_AUTH_DISABLED.
func TestDelegationTokensDisabled(t *testing.T) {
	c := startController(t, testOptions(t, t.TempDir()))
	if _, _, err := c.CreateDelegationToken(ctx(t), "User:a", "User:a", nil, 0); !errors.Is(err, kerr.DelegationTokenAuthDisabled) {
		t.Errorf("create: %v", err)
	}
	if _, err := c.RenewDelegationToken(ctx(t), "User:a", []byte("x"), 0); !errors.Is(err, kerr.DelegationTokenAuthDisabled) {
		t.Errorf("renew: %v", err)
	}
}
