package auth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"sync"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// JWKS verifies signed OAUTHBEARER tokens against a JSON Web Key Set fetched from
// sasl.oauthbearer.jwks.endpoint.url (http, https or file), as Kafka's
// OAuthBearerValidatorCallbackHandler does. The set is fetched again every refresh
// interval, and at once (at most once a second) when a token names a key id it does
// not hold, so that rotated keys are picked up.
type JWKS struct {
	url     string
	refresh time.Duration
	client  *http.Client
	logger  *slog.Logger

	mu struct {
		sync.Mutex
		keys      jose.JSONWebKeySet
		fetchedAt time.Time
	}
}

// jwksAlgorithms are the signature algorithms accepted (never "none", never HMAC:
// a key set holds public keys).
var jwksAlgorithms = []jose.SignatureAlgorithm{
	jose.RS256, jose.RS384, jose.RS512, jose.PS256, jose.PS384, jose.PS512,
	jose.ES256, jose.ES384, jose.ES512, jose.EdDSA,
}

// minJWKSRefetch bounds how often an unknown key id fetches the set again.
const minJWKSRefetch = time.Second

// NewJWKS fetches the key set once; an endpoint that cannot be read is an error.
func NewJWKS(endpoint string, refresh time.Duration, logger *slog.Logger) (*JWKS, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	j := &JWKS{url: endpoint, refresh: refresh, client: &http.Client{Timeout: 10 * time.Second}, logger: logger}
	if err := j.fetch(time.Now()); err != nil {
		return nil, err
	}
	return j, nil
}

// fetch reads the key set; the caller holds j.mu or owns j.
func (j *JWKS) fetch(now time.Time) error {
	data, err := j.read()
	if err != nil {
		return err
	}
	var set jose.JSONWebKeySet
	if err := json.Unmarshal(data, &set); err != nil {
		return fmt.Errorf("not a JSON Web Key Set: %w", err)
	}
	if len(set.Keys) == 0 {
		return errors.New("the JSON Web Key Set has no keys")
	}
	j.mu.keys, j.mu.fetchedAt = set, now
	return nil
}

func (j *JWKS) read() ([]byte, error) {
	u, err := url.Parse(j.url)
	if err != nil {
		return nil, err
	}
	switch u.Scheme {
	case "file":
		return os.ReadFile(u.Path)
	case "http", "https":
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, j.url, nil)
		if err != nil {
			return nil, err
		}
		resp, err := j.client.Do(req)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("GET %s: %s", j.url, resp.Status)
		}
		return io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	}
	return nil, fmt.Errorf("%q: the URL must be http, https or file", j.url)
}

// key returns the keys for kid, fetching the set again when it is stale or does
// not know kid.
func (j *JWKS) key(kid string) []jose.JSONWebKey {
	j.mu.Lock()
	defer j.mu.Unlock()
	now := time.Now()
	keys := j.lookup(kid)
	stale := now.Sub(j.mu.fetchedAt) >= j.refresh
	if stale || len(keys) == 0 && now.Sub(j.mu.fetchedAt) >= minJWKSRefetch {
		if err := j.fetch(now); err != nil {
			j.logger.Warn("cannot fetch the JWKS again; keeping the keys held", "url", j.url, "err", err)
			j.mu.fetchedAt = now // do not hammer a failing endpoint
		}
		keys = j.lookup(kid)
	}
	return keys
}

func (j *JWKS) lookup(kid string) []jose.JSONWebKey {
	if kid != "" {
		return j.mu.keys.Key(kid)
	}
	return j.mu.keys.Keys
}

// Verify checks a token's signature against the key set and returns its claims.
func (j *JWKS) Verify(token string) (map[string]any, error) {
	tok, err := jwt.ParseSigned(token, jwksAlgorithms)
	if err != nil {
		return nil, fmt.Errorf("the token is not a signed JWT: %v", err)
	}
	kid := ""
	if len(tok.Headers) > 0 {
		kid = tok.Headers[0].KeyID
	}
	keys := j.key(kid)
	if len(keys) == 0 {
		return nil, fmt.Errorf("no key %q in the JWKS", kid)
	}
	var lastErr error
	for _, k := range keys {
		var claims map[string]any
		if lastErr = tok.Claims(k.Key, &claims); lastErr == nil {
			return claims, nil
		}
	}
	return nil, fmt.Errorf("the token's signature does not verify: %v", lastErr)
}
