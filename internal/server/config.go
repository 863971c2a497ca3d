package server

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-streaming/samsa/internal/auth"
	"github.com/samsa-streaming/samsa/internal/protocol"
)

// Defaults, Kafka's values for the matching broker properties.
const (
	// DefaultMaxRequestSize is socket.request.max.bytes.
	DefaultMaxRequestSize int32 = 104857600
	// DefaultMaxInflightPerConn is how many requests of one connection may await their
	// response before the server stops reading that connection.
	DefaultMaxInflightPerConn = 100
	// DefaultIdleTimeout is connections.max.idle.ms.
	DefaultIdleTimeout = 10 * time.Minute
)

// Observer receives one call per request whose response was written (or, for a
// Response with None set, skipped). It is called from connection goroutines and must
// be safe for concurrent use.
type Observer interface {
	// RequestDone reports the api key and version of a request, the time from its
	// frame being read to its response being handed to the socket, and the frame
	// sizes in each direction (size prefixes included).
	RequestDone(key, version int16, d time.Duration, bytesIn, bytesOut int)
}

// Config configures a Server. Zero values of the optional fields take the defaults.
type Config struct {
	// Listeners are the addresses to listen on with their security (Listen makes
	// PLAINTEXT ones from bare addresses).
	Listeners []Listener
	// MaxRequestSize is socket.request.max.bytes (default 104857600).
	MaxRequestSize int32
	// Handler serves decoded requests. Required.
	Handler protocol.Handler
	// Versions reports the served version range of an API key (ok=false: not
	// served). Required.
	Versions func(key int16) (min, max int16, ok bool)
	// APIKeys lists served ranges, for the ApiVersions v0 fallback response.
	APIKeys func() []kmsg.ApiVersionsResponseApiKey
	// NewRequest returns an empty request body for an API key, nil for an unknown
	// key (default kmsg.RequestForKey). A listener that serves requests kmsg does not
	// know (Samsa's internal ones) supplies its own.
	NewRequest func(key int16) kmsg.Request
	// Logger receives connection and protocol logs (default: discard).
	Logger *slog.Logger
	// Observer is an optional metrics hook.
	Observer Observer
	// MaxInflightPerConn is the pipelining depth before the reader stops reading
	// (default 100).
	MaxInflightPerConn int
	// IdleTimeout is connections.max.idle.ms (default 10 min): a connection with no
	// request read and no response written for this long is closed.
	IdleTimeout time.Duration
	// ReusableFrames, if set, reports whether the frame of a request with this API
	// key may be reused as soon as Handle has returned, because the handler keeps no
	// reference into it (Produce, whose records are appended before Handle returns).
	// Large reusable frames then come from a pool instead of a fresh, zeroed
	// allocation per request.
	ReusableFrames func(key int16) bool
	// Produce, if set, takes Produce requests of the versions the server streams
	// (produce_stream.go) partition by partition as they are read; usually the Handler
	// itself. Other versions go to Handler whole.
	Produce protocol.ProduceHandler
	// Limits are the connection limits (ConnectionLimits reads them from a node's
	// configuration; SetLimits changes some at run time).
	Limits
	// IPConnectionRate, if set, returns the connection_creation_rate quota of an
	// address (ok=false: none). A connection over it is closed after the throttle
	// time. It is called once per accepted connection and must not block long.
	IPConnectionRate func(ip netip.Addr) (perSecond float64, ok bool)
	// ConnectionThrottled, if set, is told of each connection a connection-rate
	// quota delayed ("broker", "listener") or closed ("ip"), and for how long.
	ConnectionThrottled func(listener, quota string, d time.Duration)
	// ConnClosed, if set, is called once for each connection, when it has closed and
	// the handler has been given its last request, with the id its requests carried
	// (protocol.Request.ConnID): the handler can drop what it keeps for the
	// connection (Kafka's connection-disconnect listeners). It runs on a connection
	// goroutine and must not block.
	ConnClosed func(connID uint64)
	// Closed, if set, is called by Close once every connection is closed, before it
	// waits for the requests still in progress: the handler should end what they wait
	// for (their responses can no longer be written).
	Closed func()
}

// Limits bound the connections of every listener not Exempt.
type Limits struct {
	// MaxConnections (max.connections) bounds the connections open at once; 0 is
	// unlimited. At the limit a listener stops accepting until a connection closes.
	MaxConnections int
	// MaxConnectionsPerIP (max.connections.per.ip) bounds the connections from one
	// address, with PerIPOverrides (address → limit; max.connections.per.ip.overrides,
	// host names resolved); 0 is unlimited. A connection beyond it is closed at once.
	MaxConnectionsPerIP int
	PerIPOverrides      map[string]int
	// MaxConnectionRate (max.connection.creation.rate) bounds the connections
	// accepted per second; 0 is unlimited. Over it, a listener waits before serving
	// the connection it accepted (connrate.go).
	MaxConnectionRate int
	// QuotaSamples and QuotaWindow (quota.window.num, quota.window.size.seconds;
	// default 11 and 1 s) measure the connection rates.
	QuotaSamples int
	QuotaWindow  time.Duration
	// SetupTimeout (connections.max.setup.ms, default 10 s) bounds how long a new
	// connection may take to complete its TLS handshake and send its first request,
	// or on a SASL listener to authenticate.
	SetupTimeout time.Duration
}

// Listener is one address to listen on and its security.
type Listener struct {
	// Name is the listener name handed to the handler with each request.
	Name string
	// Addr is host:port, e.g. "127.0.0.1:9092" or "127.0.0.1:0".
	Addr string
	// TLS, if set, makes it an SSL (or SASL_SSL) listener; Mapper names the
	// principal of a verified client certificate.
	TLS    *tls.Config
	Mapper *auth.PrincipalMapper
	// SASL, if set, requires clients to authenticate with SASL first.
	SASL *SASL
	// MaxConnections is this listener's own limit; 0 is unlimited.
	MaxConnections int
	// MaxConnectionRate is this listener's own connections per second; 0 is
	// unlimited.
	MaxConnectionRate int
	// Exempt connections do not count towards Config.MaxConnections and
	// Config.MaxConnectionRate (the inter-broker listener, so that replication never
	// starves).
	Exempt bool
}

// SASL configures the SASL exchange of a listener.
type SASL struct {
	// Authenticator makes the mechanisms; Enabled lists them.
	Authenticator *auth.Authenticator
	// MaxReceiveSize (sasl.server.max.receive.size) bounds a frame before the
	// client authenticated (default 524288).
	MaxReceiveSize int32
	// Reauth (connections.max.reauth.ms) is the session lifetime per mechanism;
	// 0 or absent: sessions do not expire (KIP-368).
	Reauth map[string]time.Duration
	// FailedDelay (connection.failed.authentication.delay.ms) delays the answer to
	// a failed authentication, after which the connection is closed.
	FailedDelay time.Duration
}

// Listen returns PLAINTEXT listeners without names on addrs.
func Listen(addrs ...string) []Listener {
	ls := make([]Listener, len(addrs))
	for i, a := range addrs {
		ls[i] = Listener{Addr: a}
	}
	return ls
}

// DefaultSetupTimeout is connections.max.setup.ms's default.
const DefaultSetupTimeout = 10 * time.Second

// DefaultSASLMaxReceiveSize is sasl.server.max.receive.size's default.
const DefaultSASLMaxReceiveSize = 524288

// ErrInvalidConfig marks every Config validation failure.
var ErrInvalidConfig = errors.New("server: invalid config")

// withDefaults returns cfg with defaults filled in, or every problem found at once.
func (cfg Config) withDefaults() (Config, error) {
	var problems []error
	bad := func(format string, args ...any) {
		problems = append(problems, fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, args...)...))
	}
	if len(cfg.Listeners) == 0 {
		bad("listeners: at least one listener address is required")
	}
	switch {
	case cfg.MaxRequestSize == 0:
		cfg.MaxRequestSize = DefaultMaxRequestSize
	case cfg.MaxRequestSize < 0:
		bad("socket.request.max.bytes: must be positive, got %d", cfg.MaxRequestSize)
	}
	if cfg.Handler == nil {
		bad("handler: required")
	}
	if cfg.Versions == nil {
		bad("versions: required")
	}
	if cfg.NewRequest == nil {
		cfg.NewRequest = kmsg.RequestForKey
	}
	if cfg.APIKeys == nil {
		cfg.APIKeys = func() []kmsg.ApiVersionsResponseApiKey { return nil }
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	switch {
	case cfg.MaxInflightPerConn == 0:
		cfg.MaxInflightPerConn = DefaultMaxInflightPerConn
	case cfg.MaxInflightPerConn < 0:
		bad("max in-flight requests per connection: must be positive, got %d", cfg.MaxInflightPerConn)
	}
	cfg.Listeners = slices.Clone(cfg.Listeners)
	for i, l := range cfg.Listeners {
		if l.SASL != nil && l.SASL.Authenticator == nil {
			bad("listener %s: SASL without an authenticator", l.Name)
		}
		if l.SASL != nil && l.SASL.MaxReceiveSize <= 0 {
			sasl := *l.SASL
			sasl.MaxReceiveSize = DefaultSASLMaxReceiveSize
			cfg.Listeners[i].SASL = &sasl
		}
	}
	if cfg.QuotaSamples <= 0 {
		cfg.QuotaSamples = 11
	}
	if cfg.QuotaWindow <= 0 {
		cfg.QuotaWindow = time.Second
	}
	if cfg.SetupTimeout <= 0 {
		cfg.SetupTimeout = DefaultSetupTimeout
	}
	switch {
	case cfg.IdleTimeout == 0:
		cfg.IdleTimeout = DefaultIdleTimeout
	case cfg.IdleTimeout < 0:
		bad("connections.max.idle.ms: must be positive, got %s", cfg.IdleTimeout)
	}
	return cfg, errors.Join(problems...)
}
