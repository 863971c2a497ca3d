package auth

import (
	"bytes"
	"crypto/subtle"
	"errors"
	"fmt"
	"time"
)

// Mechanism is the server side of one SASL exchange on one connection. Step takes
// the client's next token and returns the server's answer; done reports that the
// client authenticated (Principal is then valid). An error ends the exchange: it
// wraps ErrAuthenticationFailed (wrong credentials: SASL_AUTHENTICATION_FAILED) or
// ErrIllegalSASLState (a token that does not follow the mechanism), and its message
// is fit to send to the client.
type Mechanism interface {
	Name() string
	Step(token []byte) (challenge []byte, done bool, err error)
	Principal() Principal
	// Expiry is when the credential the client authenticated with expires (an
	// OAUTHBEARER token's exp, a delegation token's expiry); zero when it does not.
	Expiry() time.Time
}

// ViaToken reports whether m authenticated its client with a delegation token: such
// a connection may not create, renew, expire or describe tokens (Kafka's
// tokenAuthenticated principals).
func ViaToken(m Mechanism) bool {
	t, ok := m.(interface{ ViaToken() bool })
	return ok && t.ViaToken()
}

// Errors of a SASL exchange.
var (
	ErrAuthenticationFailed = errors.New("Authentication failed")
	ErrIllegalSASLState     = errors.New("illegal SASL state")
)

// errBadCredentials is the one answer to a wrong password and an unknown user.
var errBadCredentials = fmt.Errorf("%w: Invalid username or password", ErrAuthenticationFailed)

func failed(why string) error  { return fmt.Errorf("%w: %s", ErrAuthenticationFailed, why) }
func illegal(why string) error { return fmt.Errorf("%w: %s", ErrIllegalSASLState, why) }

// Authenticator makes the mechanisms of one listener.
type Authenticator struct {
	// Enabled lists the listener's mechanisms, in the order SaslHandshake reports.
	Enabled []string
	// PlainUsers are the PLAIN users and passwords (the JAAS user_<name> options).
	PlainUsers map[string]string
	// Scram finds SCRAM credentials (in the metadata image).
	Scram ScramLookup
	// Tokens finds delegation tokens, which SCRAM clients authenticate with
	// (tokenauth=true); nil when delegation tokens are disabled.
	Tokens TokenLookup
	// OAuth validates OAUTHBEARER tokens; nil when the mechanism is not enabled.
	OAuth *OAuthValidator
}

// New starts an exchange of mechanism name; ok is false when the listener does not
// enable it.
func (a *Authenticator) New(name string) (Mechanism, bool) {
	enabled := false
	for _, m := range a.Enabled {
		enabled = enabled || m == name
	}
	if !enabled {
		return nil, false
	}
	switch name {
	case "PLAIN":
		return &plainServer{users: a.PlainUsers}, true
	case "SCRAM-SHA-256", "SCRAM-SHA-512":
		m, _ := ScramMechanismNamed(name)
		lookup := a.Scram
		if lookup == nil {
			lookup = func(ScramMechanism, string) (ScramCredential, bool) { return ScramCredential{}, false }
		}
		return &scramServer{mech: m, lookup: lookup, tokens: a.Tokens}, true
	case "OAUTHBEARER":
		if a.OAuth == nil {
			return nil, false
		}
		return &oauthServer{validator: a.OAuth}, true
	}
	return nil, false
}

// plainServer is PLAIN (RFC 4616): one token, [authzid] NUL user NUL password,
// checked against the listener's JAAS users, as Kafka's PlainServerCallbackHandler.
type plainServer struct {
	users map[string]string
	user  string
	done  bool
}

func (p *plainServer) Name() string { return "PLAIN" }

func (p *plainServer) Step(token []byte) ([]byte, bool, error) {
	if p.done {
		return nil, false, illegal("PLAIN exchange already finished")
	}
	p.done = true
	parts := bytes.Split(token, []byte{0})
	if len(parts) != 3 {
		return nil, false, illegal("PLAIN message is not [authzid] NUL user NUL password")
	}
	authzid, user, password := string(parts[0]), string(parts[1]), string(parts[2])
	if user == "" {
		return nil, false, failed("Authentication failed: username not specified")
	}
	if authzid != "" && authzid != user {
		return nil, false, failed("the authorization id must be the user name")
	}
	want, ok := p.users[user]
	// Compare even for an unknown user, so that timing does not tell them apart.
	if !ok {
		want = "\x00" + password
	}
	if !constantTimeEqual(want, password) || !ok {
		return nil, false, errBadCredentials
	}
	p.user = user
	return []byte{}, true, nil
}

func (p *plainServer) Principal() Principal { return User(p.user) }
func (p *plainServer) Expiry() time.Time    { return time.Time{} }

func constantTimeEqual(a, b string) bool {
	return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}
