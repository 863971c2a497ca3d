package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"time"

	"github.com/samsa-streaming/samsa/internal/auth"
	"github.com/samsa-streaming/samsa/internal/clock"
	"github.com/samsa-streaming/samsa/internal/config"
)

// Security is what the listeners of a node need from outside the server: SCRAM
// credentials and delegation tokens (from the metadata image).
type Security struct {
	Scram  auth.ScramLookup
	Tokens auth.TokenLookup // nil: delegation tokens are disabled
	Clock  clock.Clock
	Logger *slog.Logger
}

// ConfigListeners builds the server listeners for ls from the node's configuration:
// each one's TLS (key store, trust store, client authentication, principal mapping)
// and SASL (mechanisms, PLAIN users from its JAAS config, re-authentication). Every
// problem is reported at once, naming the property.
func ConfigListeners(cfg *config.Broker, ls []config.Listener, sec Security) ([]Listener, error) {
	var out []Listener
	var errs []error
	for _, l := range ls {
		s, ok := cfg.ListenerSecurity(l.Name)
		if !ok {
			errs = append(errs, fmt.Errorf("listener %s has no security protocol in listener.security.protocol.map", l.Name))
			continue
		}
		// The inter-broker listener is exempt from the broker-wide limits only
		// beside other listeners, as Kafka's ConnectionQuotas.protectedListener.
		sl := Listener{Name: l.Name, Addr: l.Addr(), MaxConnections: unlimited(s.MaxConnections),
			MaxConnectionRate: unlimited(s.MaxConnectionCreationRate), Exempt: l.Name == cfg.InterBrokerListenerName && len(ls) > 1}
		if s.TLS != nil {
			tlsCfg, mapper, err := auth.ServerTLS(s.TLS, sec.Logger.With("listener", l.Name))
			if err != nil {
				errs = append(errs, fmt.Errorf("listener %s: %w", l.Name, err))
			}
			sl.TLS, sl.Mapper = tlsCfg, mapper
		}
		if s.SASL != nil {
			sasl, err := saslFromConfig(cfg, s, sec)
			if err != nil {
				errs = append(errs, fmt.Errorf("listener %s: %w", l.Name, err))
			}
			sl.SASL = sasl
		}
		out = append(out, sl)
	}
	return out, errors.Join(errs...)
}

func saslFromConfig(cfg *config.Broker, s config.ListenerSecurity, sec Security) (*SASL, error) {
	a := &auth.Authenticator{Enabled: s.SASL.Mechanisms, PlainUsers: map[string]string{}, Scram: sec.Scram, Tokens: sec.Tokens}
	var errs []error
	if j, ok := s.SASL.JAAS[config.MechanismPlain]; ok {
		parsed, err := config.ParseJAAS(j.Value)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", j.Property, err))
		}
		for k, v := range parsed.Options {
			if user, ok := strings.CutPrefix(k, "user_"); ok {
				a.PlainUsers[user] = v
			}
		}
	}
	for _, m := range s.SASL.Mechanisms {
		if m != config.MechanismOAuthBearer {
			continue
		}
		o := s.SASL.OAuth
		v := &auth.OAuthValidator{Clock: sec.Clock, SubClaim: o.SubClaim, ExpectedAudience: o.ExpectedAudience,
			ExpectedIssuer: o.ExpectedIssuer, ClockSkew: time.Duration(o.ClockSkewSeconds) * time.Second}
		if s.SASL.UsesJWKS() {
			keys, err := auth.NewJWKS(o.JWKSURL.Value, time.Duration(o.JWKSRefreshMs)*time.Millisecond, sec.Logger)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s=%s: %w", o.JWKSURL.Property, o.JWKSURL.Value, err))
			} else {
				v.Keys = keys
			}
		}
		a.OAuth = v
	}
	reauth := map[string]time.Duration{}
	for m, ms := range s.SASL.ReauthMs {
		reauth[m] = time.Duration(ms) * time.Millisecond
	}
	return &SASL{
		Authenticator:  a,
		MaxReceiveSize: cfg.Security.SaslServerMaxReceiveSize,
		Reauth:         reauth,
		FailedDelay:    time.Duration(cfg.Security.FailedAuthenticationDelayMs) * time.Millisecond,
	}, errors.Join(errs...)
}

// unlimited maps Kafka's Integer.MaxValue ("no limit") to 0.
func unlimited(n int32) int {
	if n == 1<<31-1 {
		return 0
	}
	return int(n)
}

// ConnectionLimits returns the connection limits of a node's configuration that
// bind all its client listeners (a listener's own come with ConfigListeners).
func ConnectionLimits(cfg *config.Broker) (Limits, error) {
	var err error
	overrides := map[string]int{}
	for host, n := range cfg.Security.MaxConnectionsPerIPOverrides {
		if net.ParseIP(host) != nil {
			overrides[host] = int(n)
			continue
		}
		// Bounded: with dynamic limits this runs where the node applies metadata.
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		addrs, lerr := net.DefaultResolver.LookupHost(ctx, host)
		cancel()
		if lerr != nil {
			err = errors.Join(err, fmt.Errorf("max.connections.per.ip.overrides: %s: %w", host, lerr))
		}
		for _, a := range addrs {
			overrides[a] = int(n)
		}
	}
	return Limits{
		MaxConnections:      unlimited(cfg.Security.MaxConnections),
		MaxConnectionsPerIP: unlimited(cfg.Security.MaxConnectionsPerIP),
		PerIPOverrides:      overrides,
		MaxConnectionRate:   unlimited(cfg.Security.MaxConnectionCreationRate),
		QuotaSamples:        int(cfg.Security.QuotaWindowNum),
		QuotaWindow:         time.Duration(cfg.Security.QuotaWindowSizeSeconds) * time.Second,
		SetupTimeout:        time.Duration(cfg.Security.ConnectionsMaxSetupMs) * time.Millisecond,
	}, err
}
