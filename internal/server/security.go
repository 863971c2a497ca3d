package server

import (
	"crypto/tls"
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-streaming/samsa/internal/auth"
	"github.com/samsa-streaming/samsa/internal/protocol"
)

// The security of a connection: the TLS handshake and the principal of a client
// certificate, the SASL exchange (SaslHandshake v0–1, SaslAuthenticate v0–2, and
// after a v0 handshake the raw tokens kafka-python still sends), re-authentication
// (KIP-368) and the bound on setting a connection up.
//
// A SASL listener serves nothing but ApiVersions, SaslHandshake and
// SaslAuthenticate until the client has authenticated; any other request closes the
// connection, as in Kafka. A failed authentication is answered, after
// connection.failed.authentication.delay.ms, with SASL_AUTHENTICATION_FAILED and a
// message that is the same for an unknown user and a wrong password, and the
// connection closes. When the listener's connections.max.reauth.ms is set, the
// SaslAuthenticate answer carries the session lifetime; the client re-authenticates
// (SaslHandshake and SaslAuthenticate again, same mechanism, same principal) before it
// ends, or its next request after the end closes the connection. As in Kafka, only a
// session that ends is re-authenticated, at most once a second; another SaslHandshake
// on an authenticated connection is answered ILLEGAL_SASL_STATE.
const (
	saslHandshakeKey    int16 = 17
	saslAuthenticateKey int16 = 36
)

// saslState is the SASL side of one connection, owned by its reader goroutine.
type saslState struct {
	cfg           *SASL
	mech          auth.Mechanism // the exchange in progress, nil between exchanges
	mechName      string         // of the last successful authentication
	raw           bool           // SaslHandshake v0: tokens arrive as raw frames
	authenticated bool
	expiry        time.Time // the session's end; zero: none
	reauthStart   time.Time // the last re-authentication's SaslHandshake; zero: none yet
}

// minReauthInterval is how often a connection may start re-authenticating, as in
// Kafka (KafkaChannel.MIN_REAUTH_INTERVAL_ONE_SECOND_NANOS).
const minReauthInterval = time.Second

// setUp reports whether the connection is past its setup: authenticated on a SASL
// listener, or having sent a request on any other.
func (c *conn) setUp() bool {
	if c.sasl != nil {
		return c.sasl.authenticated
	}
	return c.sawRequest
}

// handshake completes the TLS handshake of a TLS listener within the setup bound
// and takes the principal of a verified client certificate.
func (c *conn) handshake() bool {
	tc, ok := c.nc.(*tls.Conn)
	if !ok {
		return true
	}
	if err := tc.SetDeadline(c.setupDeadline); err != nil {
		return false
	}
	if err := tc.Handshake(); err != nil {
		c.log.Info("TLS handshake failed; closing connection", "remote", c.remote, "listener", c.listener.Name, "err", err)
		return false
	}
	if err := tc.SetDeadline(time.Time{}); err != nil {
		return false
	}
	state := tc.ConnectionState()
	if len(state.VerifiedChains) > 0 && c.listener.Mapper != nil {
		p, err := c.listener.Mapper.CertificatePrincipal(state.PeerCertificates[0])
		if err != nil {
			c.log.Info("client certificate maps to no principal; closing connection",
				"remote", c.remote, "listener", c.listener.Name, "err", err)
			return false
		}
		c.principal = p
		c.log.Debug("TLS client authenticated", "remote", c.remote, "principal", p.String())
	}
	return true
}

// admit decides whether a request of key may be served on a connection that is not
// ready (see conn.ready), and updates the state; false closes the connection.
func (c *conn) admit(key int16, clientID string) bool {
	if c.sasl == nil {
		c.sawRequest, c.ready = true, true
		return true
	}
	if !c.sasl.authenticated {
		if key == apiVersionsKey {
			return true
		}
		c.log.Info("request before SASL authentication; closing connection", "remote", c.remote,
			"listener", c.listener.Name, "api_key", key, "client_id", clientID)
		return false
	}
	if !c.sasl.expiry.IsZero() && !time.Now().Before(c.sasl.expiry) {
		c.log.Info("SASL session expired without re-authentication (connections.max.reauth.ms); closing connection",
			"remote", c.remote, "listener", c.listener.Name, "principal", c.principal.String())
		return false
	}
	return true
}

// saslRequest serves a SaslHandshake or SaslAuthenticate request on a SASL listener;
// false stops reading.
func (c *conn) saslRequest(req parsedRequest, in inbound) bool {
	p := pending{key: req.key, version: req.version, respVersion: req.version,
		correlationID: req.correlationID, flexibleHeader: req.body.IsFlexible(), start: in.start, bytesIn: in.bytesIn}
	if req.key == saslHandshakeKey {
		return c.saslHandshake(p, req.body.(*kmsg.SASLHandshakeRequest))
	}
	return c.saslAuthenticate(p, req.body.(*kmsg.SASLAuthenticateRequest))
}

func (c *conn) saslHandshake(p pending, r *kmsg.SASLHandshakeRequest) bool {
	s := c.sasl
	resp := kmsg.NewPtrSASLHandshakeResponse()
	resp.SupportedMechanisms = s.cfg.Authenticator.Enabled
	fail := func(code int16, why string) bool {
		resp.ErrorCode = code
		c.log.Info("SASL handshake refused; closing connection", "remote", c.remote, "listener", c.listener.Name,
			"mechanism", r.Mechanism, "reason", why)
		c.respond(p, resp)
		c.closeAfterPending()
		return false
	}
	now := time.Now()
	switch {
	case s.mech != nil:
		return fail(kerr.IllegalSaslState.Code, "a SASL exchange is already in progress")
	case s.authenticated && (s.expiry.IsZero() || !s.reauthStart.IsZero() && now.Sub(s.reauthStart) < minReauthInterval):
		// Not a re-authentication, as Kafka (KafkaChannel.maybeBeginServerReauthentication)
		// decides: the session does not end, or the last one began less than a second
		// ago. Kafka then serves the handshake as any request, with ILLEGAL_SASL_STATE.
		resp.ErrorCode = kerr.IllegalSaslState.Code
		c.log.Info("SaslHandshake on an authenticated connection that may not re-authenticate now", "remote", c.remote,
			"listener", c.listener.Name, "principal", c.principal.String(), "session_ends", !s.expiry.IsZero())
		return c.respond(p, resp)
	case s.authenticated && (p.version == 0 || r.Mechanism != s.mechName):
		return fail(kerr.IllegalSaslState.Code, "re-authentication must use SaslHandshake v1 and the same mechanism ("+s.mechName+")")
	}
	if s.authenticated {
		s.reauthStart = now
	}
	m, ok := s.cfg.Authenticator.New(r.Mechanism)
	if !ok {
		return fail(kerr.UnsupportedSaslMechanism.Code, "mechanism not enabled on this listener")
	}
	s.mech, s.raw = m, p.version == 0
	return c.respond(p, resp)
}

func (c *conn) saslAuthenticate(p pending, r *kmsg.SASLAuthenticateRequest) bool {
	s := c.sasl
	resp := kmsg.NewPtrSASLAuthenticateResponse()
	if s.mech == nil {
		resp.ErrorCode = kerr.IllegalSaslState.Code
		resp.ErrorMessage = kmsg.StringPtr("SaslAuthenticate without a SaslHandshake first")
		c.log.Info("SaslAuthenticate without a handshake; closing connection", "remote", c.remote)
		c.respond(p, resp)
		c.closeAfterPending()
		return false
	}
	challenge, done, err := s.mech.Step(r.SASLAuthBytes)
	if err == nil && done {
		err = c.authenticated(&resp.SessionLifetimeMillis)
	}
	if err != nil {
		resp.ErrorCode = kerr.SaslAuthenticationFailed.Code
		if errors.Is(err, auth.ErrIllegalSASLState) {
			resp.ErrorCode = kerr.IllegalSaslState.Code
		}
		resp.ErrorMessage = kmsg.StringPtr(err.Error())
		c.authFailed(err)
		c.respond(p, resp)
		c.closeAfterPending()
		return false
	}
	resp.SASLAuthBytes = challenge
	if p.version == 0 {
		resp.SessionLifetimeMillis = 0
	}
	return c.respond(p, resp)
}

// rawToken reads one raw SASL token (after SaslHandshake v0) and answers it with a
// raw frame. A failure closes the connection without an answer: v0 has no way to
// report one.
func (c *conn) rawToken(size int) bool {
	frame, err := c.readFrame(size)
	if err != nil {
		c.logReadError(err, true)
		c.close()
		return false
	}
	c.touch()
	s := c.sasl
	challenge, done, err := s.mech.Step(frame)
	if err == nil && done {
		var lifetime int64
		err = c.authenticated(&lifetime)
	}
	if err != nil {
		c.authFailed(err)
		c.close()
		return false
	}
	if done {
		s.raw = false
	}
	p := pending{key: -1, raw: true, start: time.Now(), bytesIn: 4 + size}
	return c.respond(p, &rawToken{challenge})
}

// authenticated completes a successful exchange: the principal (the same one on
// re-authentication) and the session lifetime.
func (c *conn) authenticated(lifetimeMs *int64) error {
	s := c.sasl
	principal := s.mech.Principal()
	if s.authenticated && principal != c.principal {
		return errors.New("re-authentication as " + principal.String() + " on a connection of " + c.principal.String())
	}
	reauth := s.cfg.Reauth[s.mech.Name()]
	now := time.Now()
	s.expiry = time.Time{}
	if reauth > 0 {
		s.expiry = now.Add(reauth)
	}
	if exp := s.mech.Expiry(); !exp.IsZero() && (s.expiry.IsZero() || exp.Before(s.expiry)) {
		s.expiry = exp
	}
	if !s.expiry.IsZero() {
		*lifetimeMs = max(s.expiry.Sub(now).Milliseconds(), 1)
	}
	if !s.authenticated {
		c.log.Debug("SASL authenticated", "remote", c.remote, "listener", c.listener.Name,
			"mechanism", s.mech.Name(), "principal", principal.String())
	}
	c.principal, c.viaToken = principal, auth.ViaToken(s.mech)
	s.authenticated, s.mechName, s.mech = true, s.mech.Name(), nil
	c.ready = s.expiry.IsZero()
	return nil
}

// authFailed logs a failed authentication and waits out the delay that slows down
// password guessing.
func (c *conn) authFailed(err error) {
	s := c.sasl
	c.log.Info("SASL authentication failed; closing connection", "remote", c.remote, "listener", c.listener.Name,
		"mechanism", s.mech.Name(), "err", err)
	s.mech = nil
	if d := s.cfg.FailedDelay; d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
		case <-c.done:
		}
	}
}

// respond passes a response the server made itself; false stops reading.
func (c *conn) respond(p pending, body kmsg.Response) bool {
	p.now, p.ready = protocol.Response{Body: body}, true
	return c.pass(p)
}

// rawToken is a SASL token written as a raw frame: it implements just enough of
// kmsg.Response for writeResponse.
type rawToken struct{ token []byte }

func (*rawToken) Key() int16                   { return -1 }
func (*rawToken) MaxVersion() int16            { return 0 }
func (*rawToken) SetVersion(int16)             {}
func (*rawToken) GetVersion() int16            { return 0 }
func (*rawToken) IsFlexible() bool             { return false }
func (r *rawToken) AppendTo(dst []byte) []byte { return append(dst, r.token...) }
func (r *rawToken) ReadFrom([]byte) error      { return nil }
func (*rawToken) RequestKind() kmsg.Request    { return nil }
func (r *rawToken) Throttle() (int32, bool)    { return 0, false }
func (r *rawToken) SetThrottle(int32)          {}
