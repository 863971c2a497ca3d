package integration

import (
	"encoding/base64"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/samsa-streaming/samsa/internal/testutil"
)

// tokenAuth is the SCRAM mechanism of a client authenticating with a delegation
// token: the token id as user name, its HMAC in base64 as password, tokenauth=true.
func tokenAuth(tok kadm.DelegationToken, sha512 bool) sasl.Mechanism {
	a := scram.Auth{User: tok.TokenID, Pass: base64.StdEncoding.EncodeToString(tok.HMAC), IsToken: true}
	if sha512 {
		return a.AsSha512Mechanism()
	}
	return a.AsSha256Mechanism()
}

// allowOnUser grants principal op on the User resource of user (kadm's ACL builder
// has no User resources).
func allowOnUser(t *testing.T, c *kgo.Client, principal, user string, op kmsg.ACLOperation) {
	t.Helper()
	req := kmsg.NewPtrCreateACLsRequest()
	cr := kmsg.NewCreateACLsRequestCreation()
	cr.ResourceType, cr.ResourceName, cr.ResourcePatternType = kmsg.ACLResourceTypeUser, user, kmsg.ACLResourcePatternTypeLiteral
	cr.Principal, cr.Host, cr.Operation, cr.PermissionType = principal, "*", op, kmsg.ACLPermissionTypeAllow
	req.Creations = append(req.Creations, cr)
	resp, err := req.RequestWith(ctxT(t, 10*time.Second), c)
	if err != nil || resp.Results[0].ErrorCode != 0 {
		t.Fatalf("CreateAcls %s %v on User:%s: %+v %v", principal, op, user, resp, err)
	}
}

// TestDelegationTokens: KIP-48 delegation tokens with franz-go. alice creates a token
// renewable by bob; a client authenticating with it (both SCRAM mechanisms) acts as
// alice — her ACLs apply — and may not manage tokens itself. Describe shows the token
// to its owner and renewer, to a super user and to a principal granted DESCRIBE on
// it, and to nobody else. bob may renew it, carol may not; a super user and a
// principal with CREATE_TOKENS on User:alice may create tokens for alice, others may
// not. The token survives a restart; expired at once it no longer authenticates, and
// a token past its expiry is refused before the controller removes it. PLAINTEXT
// connections are refused every token request, and a broker without
// delegation.token.secret.key answers DELEGATION_TOKEN_AUTH_DISABLED.
func TestDelegationTokens(t *testing.T) {
	t.Parallel()
	opts := testutil.SecureOptions{
		PlainUsers: map[string]string{"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret", "carol": "carol-secret"},
		Overrides: []string{
			"authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
			"super.users=User:admin",
			"delegation.token.secret.key=the-cluster-secret",
		},
	}
	sb := testutil.StartSecureBroker(t, opts)
	user := func(name string, o ...kgo.Opt) *kgo.Client {
		return secureClient(t, sb.SASLPlaintext, nil, plain.Auth{User: name, Pass: name + "-secret"}.AsMechanism(), o...)
	}
	adminClient := user("admin")
	admin := kadm.NewClient(adminClient)
	ctx := ctxT(t, 90*time.Second)
	createTopic(t, admin, "tok-orders", 1, nil)
	createTopic(t, admin, "tok-secret", 1, nil)
	results, err := admin.CreateACLs(ctx, kadm.NewACLs().Allow("User:alice").Topics("tok-orders").
		Operations(kadm.OpRead, kadm.OpWrite, kadm.OpDescribe).ResourcePatternType(kadm.ACLPatternLiteral))
	checkACLResults(t, results, err)

	alice := kadm.NewClient(user("alice"))
	tok, err := alice.CreateDelegationToken(ctx, kadm.CreateDelegationToken{Renewers: []kadm.Principal{{Type: "User", Name: "bob"}}})
	if err != nil {
		t.Fatalf("alice creates a token: %v", err)
	}
	if tok.Owner.Name != "alice" || tok.TokenRequesterPrincipal.Name != "alice" || tok.TokenID == "" || len(tok.HMAC) != 64 ||
		!tok.IssueTimestamp.Before(tok.ExpiryTimestamp) || tok.MaxTimestamp.Before(tok.ExpiryTimestamp) {
		t.Fatalf("token %+v", tok)
	}

	// authenticates is the error of a new client's first request with tok.
	authenticates := func(t *testing.T, tok kadm.DelegationToken, sha512 bool) error {
		return secureClient(t, sb.SASLPlaintext, nil, tokenAuth(tok, sha512)).Ping(ctxT(t, 10*time.Second))
	}
	// asToken checks that a client of tok acts as alice: it writes to her topic and
	// sees only the topics she may describe. It returns the authentication's error.
	asToken := func(t *testing.T, tok kadm.DelegationToken, sha512 bool) error {
		if err := authenticates(t, tok, sha512); err != nil {
			return err
		}
		c := secureClient(t, sb.SASLPlaintext, nil, tokenAuth(tok, sha512), kgo.DisableIdempotentWrite())
		if err := c.ProduceSync(ctxT(t, 20*time.Second), &kgo.Record{Topic: "tok-orders", Value: []byte("via token")}).FirstErr(); err != nil {
			t.Fatalf("a token of alice writing to her topic: %v", err)
		}
		topics, err := kadm.NewClient(c).ListTopics(ctxT(t, 20*time.Second))
		if err != nil || !topics.Has("tok-orders") || topics.Has("tok-secret") {
			t.Fatalf("a token of alice lists %v (%v): want tok-orders, which alice may describe, and not tok-secret", topics.Names(), err)
		}
		return nil
	}
	for _, sha512 := range []bool{false, true} {
		if err := asToken(t, tok, sha512); err != nil {
			t.Fatalf("produce with the token (SCRAM-SHA-512 %t): %v", sha512, err)
		}
	}
	viaToken := kadm.NewClient(secureClient(t, sb.SASLPlaintext, nil, tokenAuth(tok, true)))
	if _, err := viaToken.CreateDelegationToken(ctx, kadm.CreateDelegationToken{}); !errors.Is(err, kerr.DelegationTokenRequestNotAllowed) {
		t.Errorf("a token creating a token: %v, want DELEGATION_TOKEN_REQUEST_NOT_ALLOWED", err)
	}
	if _, err := viaToken.DescribeDelegationTokens(ctx); !errors.Is(err, kerr.DelegationTokenRequestNotAllowed) {
		t.Errorf("a token describing tokens: %v, want DELEGATION_TOKEN_REQUEST_NOT_ALLOWED", err)
	}
	plaintext := kadm.NewClient(secureClient(t, sb.Plaintext, nil, nil))
	if _, err := plaintext.CreateDelegationToken(ctx, kadm.CreateDelegationToken{}); !errors.Is(err, kerr.DelegationTokenRequestNotAllowed) {
		t.Errorf("a token over PLAINTEXT: %v, want DELEGATION_TOKEN_REQUEST_NOT_ALLOWED", err)
	}

	// Who sees it.
	sees := func(who string, c *kadm.Client) bool {
		t.Helper()
		ts, err := c.DescribeDelegationTokens(ctx)
		if err != nil {
			t.Fatalf("%s describes: %v", who, err)
		}
		for _, d := range ts {
			if d.TokenID == tok.TokenID {
				if string(d.HMAC) != string(tok.HMAC) || d.Owner.Name != "alice" || len(d.Renewers) != 1 || d.Renewers[0].Name != "bob" {
					t.Fatalf("%s sees %+v", who, d)
				}
				return true
			}
		}
		return false
	}
	bob, carol := kadm.NewClient(user("bob")), kadm.NewClient(user("carol"))
	for who, c := range map[string]*kadm.Client{"alice": alice, "bob (renewer)": bob, "admin (super user)": admin} {
		if !sees(who, c) {
			t.Errorf("%s does not see the token", who)
		}
	}
	if sees("carol", carol) {
		t.Error("carol sees alice's token without an ACL")
	}
	results, err = admin.CreateACLs(ctx, kadm.NewACLs().Allow("User:carol").DelegationTokens(tok.TokenID).
		Operations(kadm.OpDescribe).ResourcePatternType(kadm.ACLPatternLiteral))
	checkACLResults(t, results, err)
	if !sees("carol with DESCRIBE on the token", carol) {
		t.Error("carol does not see the token she may describe")
	}
	if ts, err := alice.DescribeDelegationTokens(ctx, kadm.Principal{Type: "User", Name: "nobody"}); err != nil || len(ts) != 0 {
		t.Errorf("tokens of User:nobody: %+v %v", ts, err)
	}

	// Renewals.
	if _, err := carol.RenewDelegationToken(ctx, tok.HMAC, time.Hour); !errors.Is(err, kerr.DelegationTokenOwnerMismatch) {
		t.Errorf("carol renews: %v, want DELEGATION_TOKEN_OWNER_MISMATCH", err)
	}
	expiry, err := bob.RenewDelegationToken(ctx, tok.HMAC, time.Hour)
	if err != nil || expiry.After(time.Now().Add(time.Hour+time.Minute)) || !expiry.Before(tok.ExpiryTimestamp) {
		t.Errorf("bob renews for an hour: expiry %v (was %v), %v", expiry, tok.ExpiryTimestamp, err)
	}
	if _, err := bob.RenewDelegationToken(ctx, []byte("not an hmac"), time.Hour); !errors.Is(err, kerr.DelegationTokenNotFound) {
		t.Errorf("renew an unknown HMAC: %v, want DELEGATION_TOKEN_NOT_FOUND", err)
	}

	// Tokens for another owner.
	forAlice := kadm.CreateDelegationToken{Owner: &kadm.Principal{Type: "User", Name: "alice"}}
	if _, err := carol.CreateDelegationToken(ctx, forAlice); !errors.Is(err, kerr.DelegationTokenAuthorizationFailed) {
		t.Errorf("carol creates a token for alice: %v, want DELEGATION_TOKEN_AUTHORIZATION_FAILED", err)
	}
	allowOnUser(t, adminClient, "User:carol", "User:alice", kmsg.ACLOperationCreateTokens)
	other, err := carol.CreateDelegationToken(ctx, forAlice)
	if err != nil || other.Owner.Name != "alice" || other.TokenRequesterPrincipal.Name != "carol" {
		t.Fatalf("carol, with CREATE_TOKENS on User:alice, creates a token for alice: %+v %v", other, err)
	}
	if _, err := alice.CreateDelegationToken(ctx, kadm.CreateDelegationToken{Renewers: []kadm.Principal{{Type: "Group", Name: "g"}}}); !errors.Is(err, kerr.InvalidPrincipalType) {
		t.Errorf("a renewer that is not a User: %v, want INVALID_PRINCIPAL_TYPE", err)
	}

	// Kept across a restart: the metadata log has it, and the HMAC is derived again.
	sb.Restart(t)
	if err := asToken(t, tok, true); err != nil {
		t.Fatalf("the token after a restart: %v", err)
	}

	// Expired at once: no longer authenticates, no longer renews.
	if _, err := alice.ExpireDelegationToken(ctx, tok.HMAC, -time.Millisecond); err != nil {
		t.Fatalf("alice expires her token: %v", err)
	}
	if err := authenticates(t, tok, true); !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Errorf("the expired token authenticates: %v, want SASL_AUTHENTICATION_FAILED", err)
	}
	if _, err := bob.RenewDelegationToken(ctx, tok.HMAC, time.Hour); !errors.Is(err, kerr.DelegationTokenNotFound) {
		t.Errorf("renew the expired token: %v, want DELEGATION_TOKEN_NOT_FOUND", err)
	}

	// A token past its expiry is refused before the controller removes it (once an
	// hour by default).
	short, err := alice.CreateDelegationToken(ctx, kadm.CreateDelegationToken{MaxLifetime: 2 * time.Second})
	if err != nil || short.MaxTimestamp.Sub(short.IssueTimestamp) != 2*time.Second {
		t.Fatalf("a token of two seconds: %+v %v", short, err)
	}
	testutil.WaitFor(t, 20*time.Second, func() bool {
		return errors.Is(authenticates(t, short, false), kerr.SaslAuthenticationFailed)
	}, "the two-second token to be refused")
	if ts, err := alice.DescribeDelegationTokens(ctx); err != nil || len(ts) != 2 {
		t.Errorf("alice's tokens after the expiry: %d %v; want the expired one still listed (not yet removed) and carol's for her", len(ts), err)
	}
	if _, err := bob.RenewDelegationToken(ctx, short.HMAC, time.Hour); !errors.Is(err, kerr.DelegationTokenOwnerMismatch) {
		t.Errorf("bob renews a token he does not renew: %v, want DELEGATION_TOKEN_OWNER_MISMATCH", err)
	}
	if _, err := alice.RenewDelegationToken(ctx, short.HMAC, time.Hour); !errors.Is(err, kerr.DelegationTokenExpired) {
		t.Errorf("renew a token past its expiry: %v, want DELEGATION_TOKEN_EXPIRED", err)
	}

	t.Run("disabled", func(t *testing.T) {
		o := opts
		o.Overrides = []string{"authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer", "super.users=User:admin"}
		off := testutil.StartSecureBroker(t, o)
		c := kadm.NewClient(secureClient(t, off.SASLPlaintext, nil, plain.Auth{User: "alice", Pass: "alice-secret"}.AsMechanism()))
		if _, err := c.CreateDelegationToken(ctx, kadm.CreateDelegationToken{}); !errors.Is(err, kerr.DelegationTokenAuthDisabled) {
			t.Errorf("create without a secret: %v, want DELEGATION_TOKEN_AUTH_DISABLED", err)
		}
		if _, err := c.DescribeDelegationTokens(ctx); !errors.Is(err, kerr.DelegationTokenAuthDisabled) {
			t.Errorf("describe without a secret: %v, want DELEGATION_TOKEN_AUTH_DISABLED", err)
		}
		tc := secureClient(t, off.SASLPlaintext, nil, tokenAuth(other, true))
		if err := tc.Ping(ctxT(t, 10*time.Second)); !errors.Is(err, kerr.SaslAuthenticationFailed) {
			t.Errorf("a token on a node without a secret: %v, want SASL_AUTHENTICATION_FAILED", err)
		}
	})
}
