package console

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Config configures a console Server. The zero value of each field means its default.
type Config struct {
	// Brokers are the bootstrap brokers, host:port. Required.
	Brokers []string
	// ClientOpts are added to the options of the console's franz-go client: TLS and
	// SASL, as cli.ClientSecurity.Opts makes them from the client flags.
	ClientOpts []kgo.Opt
	// Listen is the HTTP listen address (default 127.0.0.1:8080; port 0 picks one).
	Listen string
	// AllowedHosts are the host names (of the Host header, without the port) the
	// console answers to besides IP literals, localhost and Listen's own host name;
	// "*" allows any. Against DNS rebinding: see Server.checkHost.
	AllowedHosts []string
	// Timeout bounds the Kafka requests behind one page (default 5s).
	Timeout time.Duration
	// RetryInterval is how often a page that could not reach the cluster reloads
	// itself (default 5s).
	RetryInterval time.Duration
	// LagInterval is how often every consumer group's lag is sampled (default 5s).
	LagInterval time.Duration
	// LagHistory is how many lag samples are kept per group (default 720: an hour at
	// the default interval).
	LagHistory int
	// PageSize is the number of rows in one page of a list (default 100).
	PageSize int
	// MessageLimit is the default number of records the message browser shows
	// (default 50); MaxMessageLimit caps what a request may ask for (default 500).
	MessageLimit    int
	MaxMessageLimit int
	// ValuePreview is how many bytes of a key, value or header are shown before
	// "show more" (default 1024).
	ValuePreview int
	// Logger receives the console's logs (default: discarded).
	Logger *slog.Logger
}

// Defaults.
const (
	DefaultListen          = "127.0.0.1:8080"
	defaultTimeout         = 5 * time.Second
	defaultRetryInterval   = 5 * time.Second
	defaultLagInterval     = 5 * time.Second
	defaultLagHistory      = 720
	defaultPageSize        = 100
	defaultMessageLimit    = 50
	defaultMaxMessageLimit = 500
	defaultValuePreview    = 1024
)

// withDefaults returns c with every zero field set to its default.
func (c Config) withDefaults() Config {
	set := func(v *int, def int) {
		if *v == 0 {
			*v = def
		}
	}
	setD := func(v *time.Duration, def time.Duration) {
		if *v == 0 {
			*v = def
		}
	}
	if c.Listen == "" {
		c.Listen = DefaultListen
	}
	setD(&c.Timeout, defaultTimeout)
	setD(&c.RetryInterval, defaultRetryInterval)
	setD(&c.LagInterval, defaultLagInterval)
	set(&c.LagHistory, defaultLagHistory)
	set(&c.PageSize, defaultPageSize)
	set(&c.MessageLimit, defaultMessageLimit)
	set(&c.MaxMessageLimit, defaultMaxMessageLimit)
	set(&c.ValuePreview, defaultValuePreview)
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Validate reports every problem with c at once, naming the setting. Zero values
// stand for their defaults and are not problems.
func (c Config) Validate() error {
	c = c.withDefaults()
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if len(c.Brokers) == 0 {
		bad("brokers: at least one host:port is required")
	}
	for _, b := range c.Brokers {
		if _, _, err := net.SplitHostPort(b); err != nil {
			bad("brokers: %q is not host:port", b)
		}
	}
	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		bad("listen: %q is not host:port", c.Listen)
	}
	for _, h := range c.AllowedHosts {
		if h == "" || strings.ContainsAny(h, ":/ ") {
			bad("allowed hosts: %q is not a host name (no port, no scheme)", h)
		}
	}
	positive := func(name string, d time.Duration) {
		if d < 0 {
			bad("%s must be positive, not %s", name, d)
		}
	}
	positive("timeout", c.Timeout)
	positive("retry interval", c.RetryInterval)
	if c.LagInterval < 0 || (c.LagInterval > 0 && c.LagInterval < 100*time.Millisecond) {
		bad("lag interval must be at least 100ms, not %s", c.LagInterval)
	}
	for _, f := range []struct {
		name string
		v    int
	}{
		{"lag history", c.LagHistory}, {"page size", c.PageSize}, {"message limit", c.MessageLimit},
		{"max message limit", c.MaxMessageLimit}, {"value preview", c.ValuePreview},
	} {
		if f.v < 0 {
			bad("%s must be positive, not %d", f.name, f.v)
		}
	}
	if c.MessageLimit > c.MaxMessageLimit && c.MaxMessageLimit > 0 {
		bad("message limit %d exceeds the max message limit %d", c.MessageLimit, c.MaxMessageLimit)
	}
	return errors.Join(errs...)
}
