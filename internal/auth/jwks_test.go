package auth

import (
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/samsa-streaming/samsa/internal/clock"
)

func TestJWKSValidation(t *testing.T) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	other, _ := rsa.GenerateKey(rand.Reader, 2048)
	set := jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &key.PublicKey, KeyID: "k1", Algorithm: "RS256", Use: "sig"}}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _ = json.NewEncoder(w).Encode(set) }))
	defer srv.Close()
	jwks, err := NewJWKS(srv.URL, time.Hour, nil)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1_000_000, 0)
	v := &OAuthValidator{Clock: clock.NewFake(now), Keys: jwks, ExpectedAudience: []string{"kafka"}, ExpectedIssuer: "https://idp"}
	sign := func(k *rsa.PrivateKey, kid string, claims map[string]any) string {
		signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: k}, (&jose.SignerOptions{}).WithHeader("kid", kid))
		if err != nil {
			t.Fatal(err)
		}
		tok, err := jwt.Signed(signer).Claims(claims).Serialize()
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	good := map[string]any{"sub": "svc-1", "exp": now.Add(time.Hour).Unix(), "aud": "kafka", "iss": "https://idp"}
	if sub, exp, err := v.Validate(sign(key, "k1", good)); err != nil || sub != "svc-1" || !exp.Equal(time.Unix(now.Add(time.Hour).Unix(), 0)) {
		t.Fatalf("a good token: %q %v %v", sub, exp, err)
	}
	for name, tok := range map[string]string{
		"another key":    sign(other, "k1", good),
		"unknown key id": sign(key, "k9", good),
		"expired":        sign(key, "k1", map[string]any{"sub": "svc-1", "exp": now.Add(-time.Hour).Unix(), "aud": "kafka", "iss": "https://idp"}),
		"wrong audience": sign(key, "k1", map[string]any{"sub": "svc-1", "exp": now.Add(time.Hour).Unix(), "aud": "other", "iss": "https://idp"}),
		"wrong issuer":   sign(key, "k1", map[string]any{"sub": "svc-1", "exp": now.Add(time.Hour).Unix(), "aud": "kafka", "iss": "evil"}),
		"unsecured":      unsecuredToken(`{"sub":"svc-1","exp":2000000000}`),
	} {
		if _, _, err := v.Validate(tok); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	// A rotated key is fetched when a token names it.
	set.Keys = append(set.Keys, jose.JSONWebKey{Key: &other.PublicKey, KeyID: "k2", Algorithm: "RS256", Use: "sig"})
	time.Sleep(minJWKSRefetch)
	if _, _, err := v.Validate(sign(other, "k2", good)); err != nil {
		t.Fatalf("a rotated key: %v", err)
	}
	if _, err := NewJWKS("ftp://x", time.Hour, nil); err == nil || !strings.Contains(err.Error(), "http, https or file") {
		t.Fatalf("ftp: %v", err)
	}
}
