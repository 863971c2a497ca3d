package testutil

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"strings"
	"testing"
)

// SecureBroker is a `samsa serve` with four listeners — PLAINTEXT, SASL_PLAINTEXT,
// SSL and SASL_SSL — a certificate authority of its own, PLAIN users from the
// listeners' JAAS config and SCRAM users created at start-up (--add-scram).
type SecureBroker struct {
	*Broker
	Plaintext, SASLPlaintext, SSL, SASLSSL string // host:port of each listener
	CA                                     *CA
	Server                                 Issued
}

// SecureOptions choose a SecureBroker's users and extra properties.
type SecureOptions struct {
	// PlainUsers are PLAIN users and passwords; ScramUsers are created with both
	// SCRAM mechanisms.
	PlainUsers, ScramUsers map[string]string
	// ClientAuth is the SSL listener's ssl.client.auth (SASL_SSL keeps none).
	ClientAuth string
	// Overrides are extra properties (authorizer.class.name, super.users…).
	Overrides []string
}

// StartSecureBroker starts a SecureBroker.
func StartSecureBroker(t testing.TB, o SecureOptions) *SecureBroker {
	t.Helper()
	ca := NewCA(t)
	server := ca.Issue("broker")
	addr := func(p int) string { return fmt.Sprintf("127.0.0.1:%d", p) }
	var jaas strings.Builder
	jaas.WriteString("org.apache.kafka.common.security.plain.PlainLoginModule required")
	for u, p := range o.PlainUsers {
		fmt.Fprintf(&jaas, " user_%s=%q", u, p)
	}
	jaas.WriteString(";")
	var args []string
	for u, p := range o.ScramUsers {
		for _, m := range []string{"SCRAM-SHA-256", "SCRAM-SHA-512"} {
			args = append(args, "--add-scram", fmt.Sprintf("%s=[name=%s,password=%s]", m, u, p))
		}
	}
	clientAuth := o.ClientAuth
	if clientAuth == "" {
		clientAuth = "none"
	}
	overrides := append([]string{
		"sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
		"listener.name.sasl_plaintext.plain.sasl.jaas.config=" + jaas.String(),
		"listener.name.sasl_ssl.plain.sasl.jaas.config=" + jaas.String(),
		"ssl.keystore.location=" + server.KeyStore,
		"ssl.truststore.location=" + ca.File,
		"listener.name.ssl.ssl.client.auth=" + clientAuth,
		"connection.failed.authentication.delay.ms=10",
	}, o.Overrides...)
	b := &Broker{Dir: t.TempDir(), Args: args, t: t, bin: SamsaBinary(t)}
	var ports []int
	b.startOnFreePort(t, 3, func(extra []int) {
		// The PLAINTEXT listener's address first, then the others.
		ports = extra
		listeners := fmt.Sprintf("PLAINTEXT://%s,SASL_PLAINTEXT://%s,SSL://%s,SASL_SSL://%s", b.Addr, addr(ports[0]), addr(ports[1]), addr(ports[2]))
		b.Overrides = append([]string{"listeners=" + listeners}, overrides...)
	})
	return &SecureBroker{Broker: b, Plaintext: b.Addr, SASLPlaintext: addr(ports[0]), SSL: addr(ports[1]), SASLSSL: addr(ports[2]), CA: ca, Server: server}
}

// ClientTLS is a TLS configuration that trusts the broker's CA, with a client
// certificate for cn when cn is not empty.
func (s *SecureBroker) ClientTLS(t testing.TB, cn string) *tls.Config {
	pool := x509.NewCertPool()
	pool.AddCert(s.CA.Cert)
	cfg := &tls.Config{RootCAs: pool}
	if cn != "" {
		is := s.CA.Issue(cn)
		cert, err := tls.X509KeyPair(is.CertPEM, is.KeyPEM)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg
}
