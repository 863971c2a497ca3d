package cli

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"os"
	"strings"

	"github.com/spf13/pflag"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/oauth"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/samsa-streaming/samsa/internal/auth"
	"github.com/samsa-streaming/samsa/internal/config"
)

// PasswordEnv names the environment variable --password defaults to, so that a
// password need not appear in the process list.
const PasswordEnv = "SAMSA_PASSWORD"

// ClientSecurity holds the TLS and SASL settings every client command takes: flags,
// or a Kafka client properties file (--command-config, as Kafka's tools take), whose
// settings the flags override.
type ClientSecurity struct {
	commandConfig string
	tls           bool
	tlsCA         string
	tlsCert       string
	tlsKey        string
	tlsServerName string
	mechanism     string
	user          string
	password      string
	token         bool // SCRAM with a delegation token (tokenauth=true)
}

// AddFlags registers the security flags.
func (s *ClientSecurity) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&s.commandConfig, "command-config", "", "Kafka client properties file: security.protocol, sasl.mechanism, sasl.jaas.config, ssl.truststore.location, ssl.keystore.location (PEM), ssl.endpoint.identification.algorithm")
	fs.BoolVar(&s.tls, "tls", false, "connect with TLS, trusting the system's certificate authorities (implied by the other --tls flags)")
	fs.StringVar(&s.tlsCA, "tls-ca", "", "PEM file of the certificate authorities the brokers' certificates are checked against")
	fs.StringVar(&s.tlsCert, "tls-cert", "", "PEM file with this client's certificate (mutual TLS); may also hold the key")
	fs.StringVar(&s.tlsKey, "tls-key", "", "PEM file with this client's private key (default: --tls-cert)")
	fs.StringVar(&s.tlsServerName, "tls-server-name", "", "name the brokers' certificates must carry (default: the host dialled)")
	fs.StringVar(&s.mechanism, "sasl-mechanism", "", "authenticate with SASL: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER (--password is the token)")
	fs.StringVar(&s.user, "user", "", "SASL user name")
	fs.StringVar(&s.password, "password", "", "SASL password (env "+PasswordEnv+")")
	fs.BoolVar(&s.token, "token", false, "authenticate with a delegation token over SCRAM: --user is the token id, --password its HMAC (base64)")
}

// Opts returns the franz-go options for the settings.
func (s *ClientSecurity) Opts() ([]kgo.Opt, error) {
	eff, err := s.effective()
	if err != nil {
		return nil, err
	}
	var opts []kgo.Opt
	if eff.tls {
		cfg, err := eff.tlsConfig()
		if err != nil {
			return nil, err
		}
		opts = append(opts, kgo.DialTLSConfig(cfg))
	}
	if eff.mechanism != "" {
		m, err := eff.saslMechanism()
		if err != nil {
			return nil, err
		}
		opts = append(opts, kgo.SASL(m))
	}
	return opts, nil
}

// effective merges the properties file under the flags.
func (s *ClientSecurity) effective() (ClientSecurity, error) {
	eff := *s
	if eff.password == "" {
		eff.password = os.Getenv(PasswordEnv)
	}
	verifyNames := true
	if s.commandConfig != "" {
		data, err := os.ReadFile(s.commandConfig)
		if err != nil {
			return eff, usagef("--command-config: %v", err)
		}
		props := map[string]string{}
		for _, kv := range config.ParseProperties(string(data)) {
			props[kv.Key] = kv.Value
		}
		proto := strings.ToUpper(props["security.protocol"])
		switch proto {
		case "", config.ProtocolPlaintext, config.ProtocolSSL, config.ProtocolSASLPlaintext, config.ProtocolSASLSSL:
		default:
			return eff, usagef("--command-config %s: security.protocol=%s is not PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL", s.commandConfig, proto)
		}
		if strings.HasSuffix(proto, "SSL") {
			eff.tls = true
		}
		for prop, field := range map[string]*string{"ssl.truststore.location": &eff.tlsCA, "ssl.keystore.location": &eff.tlsCert, "sasl.mechanism": &eff.mechanism} {
			if *field == "" {
				*field = props[prop]
			}
		}
		for _, prop := range []string{"ssl.truststore.type", "ssl.keystore.type"} {
			if t := props[prop]; t != "" && !strings.EqualFold(t, "PEM") {
				return eff, usagef("--command-config %s: %s=%s: samsa reads PEM files only", s.commandConfig, prop, t)
			}
		}
		if v, ok := props["ssl.endpoint.identification.algorithm"]; ok && v == "" {
			verifyNames = false
		}
		if strings.HasPrefix(proto, "SASL") && eff.mechanism == "" {
			eff.mechanism = "GSSAPI" // Kafka's default, refused below with a message
		}
		if j, ok := props["sasl.jaas.config"]; ok && (eff.user == "" || eff.password == "") {
			parsed, err := config.ParseJAAS(j)
			if err != nil {
				return eff, usagef("--command-config %s: sasl.jaas.config: %v", s.commandConfig, err)
			}
			if eff.user == "" {
				eff.user = parsed.Options["username"]
			}
			if strings.EqualFold(parsed.Options["tokenauth"], "true") {
				eff.token = true
			}
			if eff.password == "" {
				eff.password = parsed.Options["password"]
				if tok := parsed.Options["unsecuredLoginStringClaim_sub"]; eff.password == "" && tok != "" {
					eff.user = tok
				}
			}
		}
	}
	if eff.tlsCA != "" || eff.tlsCert != "" || eff.tlsKey != "" || eff.tlsServerName != "" {
		eff.tls = true
	}
	if !verifyNames {
		eff.tlsServerName = "\x00skip"
	}
	eff.mechanism = strings.ToUpper(eff.mechanism)
	return eff, nil
}

func (s *ClientSecurity) tlsConfig() (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if s.tlsCA != "" {
		data, err := os.ReadFile(s.tlsCA)
		if err != nil {
			return nil, usagef("--tls-ca: %v", err)
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(data) {
			return nil, usagef("--tls-ca %s: no PEM certificate in it", s.tlsCA)
		}
	}
	if s.tlsCert != "" {
		keyFile := s.tlsKey
		if keyFile == "" {
			keyFile = s.tlsCert
		}
		certPEM, err := os.ReadFile(s.tlsCert)
		if err != nil {
			return nil, usagef("--tls-cert: %v", err)
		}
		keyPEM, err := os.ReadFile(keyFile)
		if err != nil {
			return nil, usagef("--tls-key: %v", err)
		}
		cert, err := tls.X509KeyPair(onlyBlocks(certPEM, "CERTIFICATE"), onlyBlocks(keyPEM, "PRIVATE KEY"))
		if err != nil {
			return nil, usagef("--tls-cert/--tls-key: %v", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	} else if s.tlsKey != "" {
		return nil, usagef("--tls-key needs --tls-cert")
	}
	switch s.tlsServerName {
	case "\x00skip":
		auth.VerifyChainOnly(cfg)
	case "":
	default:
		cfg.ServerName = s.tlsServerName
	}
	return cfg, nil
}

// onlyBlocks keeps the PEM blocks whose type ends with suffix (a key store file
// holds both the key and the certificates).
func onlyBlocks(data []byte, suffix string) []byte {
	var out []byte
	for rest := data; ; {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			return out
		}
		if strings.HasSuffix(b.Type, suffix) {
			out = append(out, pem.EncodeToMemory(b)...)
		}
	}
}

func (s *ClientSecurity) saslMechanism() (sasl.Mechanism, error) {
	if s.mechanism != "OAUTHBEARER" && (s.user == "" || s.password == "") {
		return nil, usagef("--sasl-mechanism %s needs --user and --password (or %s)", s.mechanism, PasswordEnv)
	}
	if s.token && !strings.HasPrefix(s.mechanism, "SCRAM-") {
		return nil, usagef("--token needs --sasl-mechanism SCRAM-SHA-256 or SCRAM-SHA-512, not %s", s.mechanism)
	}
	switch s.mechanism {
	case "PLAIN":
		return plain.Auth{User: s.user, Pass: s.password}.AsMechanism(), nil
	case "SCRAM-SHA-256":
		return scram.Auth{User: s.user, Pass: s.password, IsToken: s.token}.AsSha256Mechanism(), nil
	case "SCRAM-SHA-512":
		return scram.Auth{User: s.user, Pass: s.password, IsToken: s.token}.AsSha512Mechanism(), nil
	case "OAUTHBEARER":
		if s.password == "" {
			return nil, usagef("--sasl-mechanism OAUTHBEARER needs the token in --password (or %s)", PasswordEnv)
		}
		return oauth.Auth{Token: s.password}.AsMechanism(), nil
	}
	return nil, usagef("--sasl-mechanism %s: use PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER", s.mechanism)
}
