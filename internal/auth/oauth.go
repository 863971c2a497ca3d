package auth

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/samsa-streaming/samsa/internal/clock"
)

// OAuthValidator checks OAUTHBEARER tokens (RFC 7628). Without Keys it accepts
// unsecured JWTs (alg "none"), as Kafka's default OAuthBearerUnsecuredValidator
// does — for development; with Keys it verifies each token's signature against
// the JWKS, as Kafka's OAuthBearerValidatorCallbackHandler. Either way the token
// must carry the subject claim and an exp in the future, and the audience and
// issuer when they are expected.
type OAuthValidator struct {
	Clock            clock.Clock
	SubClaim         string // default "sub"
	ExpectedAudience []string
	ExpectedIssuer   string
	ClockSkew        time.Duration
	// Keys verifies signed tokens; nil accepts only unsecured ones.
	Keys KeySet
}

// KeySet verifies a signed JWT and returns its claims.
type KeySet interface {
	Verify(token string) (map[string]any, error)
}

// Validate checks a token and returns its principal name and expiry.
func (v *OAuthValidator) Validate(token string) (string, time.Time, error) {
	var claims map[string]any
	var err error
	if v.Keys != nil {
		claims, err = v.Keys.Verify(token)
	} else {
		claims, err = unsecuredClaims(token)
	}
	if err != nil {
		return "", time.Time{}, err
	}
	now := clock.Real{}.Now()
	if v.Clock != nil {
		now = v.Clock.Now()
	}
	subClaim := v.SubClaim
	if subClaim == "" {
		subClaim = "sub"
	}
	sub, _ := claims[subClaim].(string)
	if sub == "" {
		return "", time.Time{}, fmt.Errorf("the token has no %q claim", subClaim)
	}
	exp, ok := numericClaim(claims, "exp")
	if !ok {
		return "", time.Time{}, fmt.Errorf("the token has no exp claim")
	}
	expiry := time.UnixMilli(int64(exp * 1000))
	if !now.Before(expiry.Add(v.ClockSkew)) {
		return "", time.Time{}, fmt.Errorf("the token expired at %s", expiry.UTC().Format(time.RFC3339))
	}
	if nbf, ok := numericClaim(claims, "nbf"); ok && now.Add(v.ClockSkew).Before(time.UnixMilli(int64(nbf*1000))) {
		return "", time.Time{}, fmt.Errorf("the token is not valid before %s", time.UnixMilli(int64(nbf*1000)).UTC().Format(time.RFC3339))
	}
	if v.ExpectedIssuer != "" {
		if iss, _ := claims["iss"].(string); iss != v.ExpectedIssuer {
			return "", time.Time{}, fmt.Errorf("the token's issuer %q is not %q", iss, v.ExpectedIssuer)
		}
	}
	if len(v.ExpectedAudience) > 0 && !audienceMatches(claims["aud"], v.ExpectedAudience) {
		return "", time.Time{}, fmt.Errorf("the token's audience is none of %s", strings.Join(v.ExpectedAudience, ","))
	}
	return sub, expiry, nil
}

func numericClaim(claims map[string]any, name string) (float64, bool) {
	f, ok := claims[name].(float64)
	return f, ok
}

func audienceMatches(aud any, expected []string) bool {
	var have []string
	switch a := aud.(type) {
	case string:
		have = []string{a}
	case []any:
		for _, x := range a {
			if s, ok := x.(string); ok {
				have = append(have, s)
			}
		}
	}
	for _, h := range have {
		for _, e := range expected {
			if h == e {
				return true
			}
		}
	}
	return false
}

// unsecuredClaims decodes an unsecured JWT: header {"alg":"none"}, claims, and an
// empty signature.
func unsecuredClaims(token string) (map[string]any, error) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return nil, fmt.Errorf("the token is not a JWT (header.claims.signature)")
	}
	var header map[string]any
	if err := decodeSegment(parts[0], &header); err != nil {
		return nil, fmt.Errorf("the token's header: %v", err)
	}
	if alg, _ := header["alg"].(string); alg != "none" || parts[2] != "" {
		return nil, fmt.Errorf("only unsecured tokens (alg none) are accepted: set sasl.oauthbearer.jwks.endpoint.url to verify signed ones")
	}
	var claims map[string]any
	if err := decodeSegment(parts[1], &claims); err != nil {
		return nil, fmt.Errorf("the token's claims: %v", err)
	}
	return claims, nil
}

func decodeSegment(seg string, v any) error {
	b, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(seg, "="))
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

// oauthServer is the server side of OAUTHBEARER: one client message
//
//	n,[a=<authzid>],\x01auth=Bearer <token>\x01[key=value\x01...]\x01
//
// answered with an empty token when the token is valid. An invalid token is
// answered with a JSON error, as RFC 7628 says; the client acknowledges with \x01
// and the exchange fails.
type oauthServer struct {
	validator *OAuthValidator
	step      int
	user      string
	expiry    time.Time
	failure   error
}

func (o *oauthServer) Name() string { return "OAUTHBEARER" }

func (o *oauthServer) Step(token []byte) ([]byte, bool, error) {
	o.step++
	switch {
	case o.step == 2 && o.failure != nil:
		return nil, false, o.failure
	case o.step != 1:
		return nil, false, illegal("OAUTHBEARER exchange already finished")
	}
	gs2, rest, ok := cutN(string(token), ',', 2)
	if !ok || !strings.HasPrefix(gs2, "n,") && !strings.HasPrefix(gs2, "y,") {
		return nil, false, illegal("OAUTHBEARER message without a GS2 header")
	}
	var bearer string
	for _, kv := range bytes.Split([]byte(rest), []byte{1}) {
		if k, v, ok := strings.Cut(string(kv), "="); ok && k == "auth" {
			scheme, tok, _ := strings.Cut(v, " ")
			if !strings.EqualFold(scheme, "Bearer") {
				return nil, false, illegal("OAUTHBEARER auth is not a Bearer token")
			}
			bearer = strings.TrimSpace(tok)
		}
	}
	if bearer == "" {
		return nil, false, illegal("OAUTHBEARER message without auth=Bearer <token>")
	}
	user, expiry, err := o.validator.Validate(bearer)
	if err != nil {
		o.failure = failed(err.Error())
		return []byte(`{"status":"invalid_token"}`), false, nil
	}
	if authzid := strings.TrimPrefix(gs2[2:len(gs2)-1], "a="); authzid != "" && authzid != user {
		return nil, false, failed("the authorization id must be the token's subject")
	}
	o.user, o.expiry = user, expiry
	return []byte{}, true, nil
}

func (o *oauthServer) Principal() Principal { return User(o.user) }
func (o *oauthServer) Expiry() time.Time    { return o.expiry }
