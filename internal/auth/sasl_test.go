package auth

import (
	"context"
	"encoding/base64"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/oauth"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/samsa-streaming/samsa/internal/clock"
)

// exchange runs a franz-go client mechanism against a server mechanism.
func exchange(t *testing.T, client sasl.Mechanism, server Mechanism) (Principal, error) {
	t.Helper()
	session, msg, err := client.Authenticate(context.Background(), "127.0.0.1:9092")
	if err != nil {
		t.Fatal(err)
	}
	for range 5 {
		challenge, done, err := server.Step(msg)
		if err != nil {
			return Principal{}, err
		}
		clientDone, next, cerr := session.Challenge(challenge)
		if done {
			if cerr != nil || !clientDone {
				t.Fatalf("server done, client: done %t, %v", clientDone, cerr)
			}
			return server.Principal(), nil
		}
		if cerr != nil {
			t.Fatalf("client: %v", cerr)
		}
		msg = next
	}
	t.Fatal("exchange did not finish")
	return Principal{}, nil
}

func scramAuthenticator(t testing.TB, users map[string]string) *Authenticator {
	creds := map[string]ScramCredential{}
	for _, m := range []ScramMechanism{ScramSHA256, ScramSHA512} {
		for u, p := range users {
			c, err := NewScramCredential(m, p, nil, 4096)
			if err != nil {
				t.Fatal(err)
			}
			creds[m.String()+"/"+u] = c
		}
	}
	return &Authenticator{
		Enabled:    []string{"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"},
		PlainUsers: users,
		Scram: func(m ScramMechanism, u string) (ScramCredential, bool) {
			c, ok := creds[m.String()+"/"+u]
			return c, ok
		},
		OAuth: &OAuthValidator{Clock: clock.NewFake(time.Unix(1000, 0))},
	}
}

func TestMechanismsAgainstFranzGo(t *testing.T) {
	a := scramAuthenticator(t, map[string]string{"alice": "alice-secret", "we,ird=": "p"})
	for _, tt := range []struct {
		name   string
		client sasl.Mechanism
		want   string // principal name, "" for failure
	}{
		{"PLAIN", plain.Auth{User: "alice", Pass: "alice-secret"}.AsMechanism(), "alice"},
		{"PLAIN", plain.Auth{User: "alice", Pass: "wrong"}.AsMechanism(), ""},
		{"PLAIN", plain.Auth{User: "nobody", Pass: "alice-secret"}.AsMechanism(), ""},
		{"SCRAM-SHA-256", scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha256Mechanism(), "alice"},
		{"SCRAM-SHA-512", scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha512Mechanism(), "alice"},
		{"SCRAM-SHA-512", scram.Auth{User: "we,ird=", Pass: "p"}.AsSha512Mechanism(), "we,ird="},
		{"SCRAM-SHA-256", scram.Auth{User: "alice", Pass: "wrong"}.AsSha256Mechanism(), ""},
		{"SCRAM-SHA-256", scram.Auth{User: "nobody", Pass: "alice-secret"}.AsSha256Mechanism(), ""},
		{"OAUTHBEARER", oauth.Auth{Token: unsecuredToken(`{"sub":"carol","exp":2000}`)}.AsMechanism(), "carol"},
	} {
		m, ok := a.New(tt.name)
		if !ok {
			t.Fatalf("%s not enabled", tt.name)
		}
		p, err := exchange(t, tt.client, m)
		switch {
		case tt.want != "" && (err != nil || p != User(tt.want)):
			t.Errorf("%s as %s: %v, %v", tt.name, tt.want, p, err)
		case tt.want == "" && (err == nil || err.Error() != errBadCredentials.Error()):
			t.Errorf("%s with bad credentials: %v, want %v", tt.name, err, errBadCredentials)
		}
	}
}

// An unknown user and a wrong password look the same all the way: the
// server-first message has a salt and the default iteration count either way.
func TestScramUnknownUserLooksKnown(t *testing.T) {
	a := scramAuthenticator(t, map[string]string{"alice": "x"})
	first := func(user string) string {
		m, _ := a.New("SCRAM-SHA-256")
		ch, _, err := m.Step([]byte("n,,n=" + user + ",r=abcdefgh"))
		if err != nil {
			t.Fatal(err)
		}
		return string(ch)
	}
	known, unknown := first("alice"), first("mallory")
	for _, ch := range []string{known, unknown} {
		if !strings.Contains(ch, ",s=") || !strings.HasSuffix(ch, ",i=4096") {
			t.Errorf("server-first %q", ch)
		}
	}
	if first("mallory") != unknown && strings.Split(first("mallory"), ",")[1] != strings.Split(unknown, ",")[1] {
		t.Error("an unknown user's salt changes between attempts, which tells it apart")
	}
}

func TestMalformedTokens(t *testing.T) {
	a := scramAuthenticator(t, map[string]string{"alice": "x"})
	for _, tt := range []struct{ mech, token string }{
		{"PLAIN", "no-nuls"},
		{"PLAIN", "\x00\x00"},
		{"SCRAM-SHA-256", ""},
		{"SCRAM-SHA-256", "garbage"},
		{"SCRAM-SHA-256", "n,,r=x"},
		{"SCRAM-SHA-256", "n,,n=a=zz,r=abc"},
		{"OAUTHBEARER", "n,,\x01auth=Basic x\x01\x01"},
		{"OAUTHBEARER", "\xff\xfe"},
	} {
		m, _ := a.New(tt.mech)
		_, _, err := m.Step([]byte(tt.token))
		if !errors.Is(err, ErrIllegalSASLState) && !errors.Is(err, ErrAuthenticationFailed) {
			t.Errorf("%s %q: %v", tt.mech, tt.token, err)
		}
	}
}

func TestOAuthRejectsExpiredAndSigned(t *testing.T) {
	a := scramAuthenticator(t, nil)
	for _, tok := range []string{
		unsecuredToken(`{"sub":"carol","exp":500}`),
		unsecuredToken(`{"exp":2000}`),
		"eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJjYXJvbCIsImV4cCI6MjAwMH0.c2ln",
	} {
		m, _ := a.New("OAUTHBEARER")
		ch, done, err := m.Step([]byte("n,,\x01auth=Bearer " + tok + "\x01\x01"))
		if err != nil || done || !strings.Contains(string(ch), "invalid_token") {
			t.Fatalf("first step: %q %t %v", ch, done, err)
		}
		if _, _, err := m.Step([]byte{1}); !errors.Is(err, ErrAuthenticationFailed) {
			t.Errorf("second step: %v", err)
		}
	}
}

func unsecuredToken(claims string) string {
	enc := base64.RawURLEncoding.EncodeToString
	return enc([]byte(`{"alg":"none"}`)) + "." + enc([]byte(claims)) + "."
}

func TestPrincipalMappingRules(t *testing.T) {
	m, err := ParsePrincipalMappingRules(`RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L, RULE:^CN=([^,]*),O=(.*)$/$1@$2/, DEFAULT`)
	if err != nil {
		t.Fatal(err)
	}
	for subject, want := range map[string]string{
		"CN=Kafka1,OU=ServiceUsers,O=Acme": "kafka1",
		"CN=alice,O=Acme":                  "alice@Acme",
		"CN=bob,OU=Eng,C=FR":               "CN=bob,OU=Eng,C=FR",
	} {
		if got, err := m.Name(subject); err != nil || got != want {
			t.Errorf("Name(%q) = %q, %v; want %q", subject, got, err, want)
		}
	}
	strict, _ := ParsePrincipalMappingRules(`RULE:^CN=(.*)$/$1/U`)
	if _, err := strict.Name("O=x"); !errors.Is(err, ErrNoMappingRule) {
		t.Errorf("no rule matching: %v", err)
	}
	for _, bad := range []string{"RULE:x", "RULE:(/y/", "NOPE"} {
		if _, err := ParsePrincipalMappingRules(bad); err == nil {
			t.Errorf("ParsePrincipalMappingRules(%q) = nil error", bad)
		}
	}
}

// TestScramWithDelegationToken: a SCRAM client with tokenauth=true authenticates
// with a token's id and HMAC (base64) and becomes the token's owner, its session
// ending with the token; a wrong HMAC, an unknown or expired token fail, a user's
// password is no token, and without a token lookup tokens are refused.
func TestScramWithDelegationToken(t *testing.T) {
	a := scramAuthenticator(t, map[string]string{"alice": "alice-secret"})
	expiry := time.Now().Add(time.Hour)
	hmac := TokenHMAC("secret", "tok1")
	a.Tokens = func(id string) (DelegationToken, bool) {
		switch id {
		case "tok1":
			return DelegationToken{Owner: User("alice"), HMAC: hmac, Expiry: expiry}, true
		case "old":
			return DelegationToken{Owner: User("alice"), HMAC: TokenHMAC("secret", "old"), Expiry: time.Now().Add(-time.Second)}, true
		}
		return DelegationToken{}, false
	}
	password := base64.StdEncoding.EncodeToString(hmac)
	for _, sha512 := range []bool{false, true} {
		for range 2 { // the second derives nothing: the credential is cached
			m, _ := a.New(map[bool]string{false: "SCRAM-SHA-256", true: "SCRAM-SHA-512"}[sha512])
			auth := scram.Auth{User: "tok1", Pass: password, IsToken: true}
			client := auth.AsSha256Mechanism()
			if sha512 {
				client = auth.AsSha512Mechanism()
			}
			p, err := exchange(t, client, m)
			if err != nil || p != User("alice") || !ViaToken(m) || !m.Expiry().Equal(expiry) {
				t.Fatalf("token exchange (SHA-512 %t): %v %v, via token %t, expiry %v", sha512, p, err, ViaToken(m), m.Expiry())
			}
		}
	}
	for _, tt := range []struct {
		name   string
		client scram.Auth
	}{
		{"wrong HMAC", scram.Auth{User: "tok1", Pass: base64.StdEncoding.EncodeToString(TokenHMAC("other", "tok1")), IsToken: true}},
		{"unknown token", scram.Auth{User: "nope", Pass: password, IsToken: true}},
		{"expired token", scram.Auth{User: "old", Pass: base64.StdEncoding.EncodeToString(TokenHMAC("secret", "old")), IsToken: true}},
		{"a user's password as a token", scram.Auth{User: "alice", Pass: "alice-secret", IsToken: true}},
	} {
		m, _ := a.New("SCRAM-SHA-256")
		if _, err := exchange(t, tt.client.AsSha256Mechanism(), m); !errors.Is(err, ErrAuthenticationFailed) {
			t.Errorf("%s: %v, want an authentication failure", tt.name, err)
		}
	}
	m, _ := a.New("SCRAM-SHA-256")
	if p, err := exchange(t, scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha256Mechanism(), m); err != nil || p != User("alice") || ViaToken(m) {
		t.Errorf("a password login: %v %v, via token %t", p, err, ViaToken(m))
	}
	a.Tokens = nil
	m, _ = a.New("SCRAM-SHA-256")
	if _, err := exchange(t, scram.Auth{User: "tok1", Pass: password, IsToken: true}.AsSha256Mechanism(), m); err == nil ||
		!strings.Contains(err.Error(), "delegation.token.secret.key") {
		t.Errorf("a token where tokens are disabled: %v", err)
	}
}
