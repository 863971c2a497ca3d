package auth

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/samsa-streaming/samsa/internal/config"
)

// KeyStore is a listener's certificate and private key, from a PEM file
// (ssl.keystore.location, re-read when the file changes) or inline PEM
// (ssl.keystore.key with ssl.keystore.certificate.chain).
type KeyStore struct {
	location    config.Setting
	keyPassword string
	logger      *slog.Logger

	mu struct {
		sync.Mutex
		cert      *tls.Certificate
		modTime   time.Time
		size      int64
		checkedAt time.Time
	}
}

// reloadCheckInterval bounds how often the key store file is looked at.
const reloadCheckInterval = time.Second

// LoadKeyStore reads a listener's key store; the error names the property.
func LoadKeyStore(t *config.TLSSettings, logger *slog.Logger) (*KeyStore, error) {
	ks := &KeyStore{location: t.KeystoreLocation, keyPassword: t.KeyPassword.Value, logger: logger}
	if !t.KeystoreLocation.Set() {
		cert, err := parseKeyPair([]byte(t.KeystoreCertificateChain.Value), []byte(t.KeystoreKey.Value), ks.keyPassword)
		if err != nil {
			return nil, fmt.Errorf("%s / %s: %w", t.KeystoreKey.Property, t.KeystoreCertificateChain.Property, err)
		}
		ks.mu.cert = cert
		return ks, nil
	}
	if err := ks.reload(time.Now()); err != nil {
		return nil, err
	}
	return ks, nil
}

// reload reads the key store file; the caller holds ks.mu or owns ks.
func (ks *KeyStore) reload(now time.Time) error {
	path := ks.location.Value
	fi, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("%s=%s: %w", ks.location.Property, path, err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("%s=%s: %w", ks.location.Property, path, err)
	}
	cert, err := parseKeyPair(data, data, ks.keyPassword)
	if err != nil {
		return fmt.Errorf("%s=%s: %w", ks.location.Property, path, err)
	}
	ks.mu.cert, ks.mu.modTime, ks.mu.size, ks.mu.checkedAt = cert, fi.ModTime(), fi.Size(), now
	return nil
}

// Certificate returns the current certificate, reloading the file first when it
// changed since it was last read (looked at no more than once a second). A file that
// fails to load keeps the previous certificate, with a log line.
func (ks *KeyStore) Certificate() *tls.Certificate {
	ks.mu.Lock()
	defer ks.mu.Unlock()
	if ks.location.Set() {
		now := time.Now()
		if now.Sub(ks.mu.checkedAt) >= reloadCheckInterval {
			ks.mu.checkedAt = now
			if fi, err := os.Stat(ks.location.Value); err == nil && (!fi.ModTime().Equal(ks.mu.modTime) || fi.Size() != ks.mu.size) {
				if err := ks.reload(now); err != nil {
					ks.logger.Error("key store changed but cannot be loaded; keeping the previous certificate", "err", err)
				} else {
					ks.logger.Info("key store reloaded", "file", ks.location.Value, "subject", ks.mu.cert.Leaf.Subject.String(),
						"not_after", ks.mu.cert.Leaf.NotAfter)
				}
			}
		}
	}
	return ks.mu.cert
}

// parseKeyPair reads the certificate chain from certPEM and the private key from
// keyPEM (the same bytes for a key store file holding both).
func parseKeyPair(certPEM, keyPEM []byte, password string) (*tls.Certificate, error) {
	var chain [][]byte
	for rest := certPEM; ; {
		var block *pem.Block
		if block, rest = pem.Decode(rest); block == nil {
			break
		}
		if block.Type == "CERTIFICATE" {
			chain = append(chain, block.Bytes)
		}
	}
	if len(chain) == 0 {
		return nil, errors.New("no CERTIFICATE block")
	}
	var keyDER []byte
	var keyType string
	for rest := keyPEM; ; {
		var block *pem.Block
		if block, rest = pem.Decode(rest); block == nil {
			break
		}
		if !strings.HasSuffix(block.Type, "PRIVATE KEY") {
			continue
		}
		if block.Type == "ENCRYPTED PRIVATE KEY" {
			return nil, errors.New("the private key is an encrypted PKCS#8 key, which Samsa cannot decrypt: decrypt it (openssl pkcs8 -in key.pem -out plain.pem) and protect the file instead")
		}
		keyDER, keyType = block.Bytes, block.Type
		//lint:ignore SA1019 legacy PEM encryption is what ssl.key.password can unlock
		if x509.IsEncryptedPEMBlock(block) { //nolint:staticcheck
			if password == "" {
				return nil, errors.New("the private key is encrypted: set ssl.key.password")
			}
			der, err := x509.DecryptPEMBlock(block, []byte(password)) //nolint:staticcheck
			if err != nil {
				return nil, fmt.Errorf("cannot decrypt the private key with ssl.key.password: %v", err)
			}
			keyDER = der
		}
		break
	}
	if keyDER == nil {
		return nil, errors.New("no PRIVATE KEY block")
	}
	cert, err := tls.X509KeyPair(
		pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: chain[0]}),
		pem.EncodeToMemory(&pem.Block{Type: keyType, Bytes: keyDER}))
	if err != nil {
		return nil, err
	}
	cert.Certificate = chain
	return &cert, nil
}

// LoadTrustStore reads a listener's trusted certificates; nil when none is set.
func LoadTrustStore(t *config.TLSSettings) (*x509.CertPool, error) {
	var data []byte
	var prop string
	switch {
	case t.TruststoreLocation.Set():
		prop = t.TruststoreLocation.Property + "=" + t.TruststoreLocation.Value
		var err error
		if data, err = os.ReadFile(t.TruststoreLocation.Value); err != nil {
			return nil, fmt.Errorf("%s: %w", prop, err)
		}
	case t.TruststoreCertificates.Set():
		prop, data = t.TruststoreCertificates.Property, []byte(t.TruststoreCertificates.Value)
	default:
		return nil, nil
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(data) {
		return nil, fmt.Errorf("%s: no PEM certificate", prop)
	}
	return pool, nil
}

// tlsVersions maps ssl.enabled.protocols to the range Go accepts.
func tlsVersions(enabled []string) (minVersion, maxVersion uint16) {
	minVersion, maxVersion = tls.VersionTLS13, tls.VersionTLS12
	for _, v := range enabled {
		switch v {
		case "TLSv1.2":
			minVersion, maxVersion = min(minVersion, tls.VersionTLS12), max(maxVersion, tls.VersionTLS12)
		case "TLSv1.3":
			minVersion, maxVersion = min(minVersion, tls.VersionTLS13), max(maxVersion, tls.VersionTLS13)
		}
	}
	return minVersion, maxVersion
}

// ServerTLS builds the tls.Config of a listener, with its principal mapper.
func ServerTLS(t *config.TLSSettings, logger *slog.Logger) (*tls.Config, *PrincipalMapper, error) {
	var errs []error
	ks, err := LoadKeyStore(t, logger)
	errs = append(errs, err)
	pool, err := LoadTrustStore(t)
	errs = append(errs, err)
	mapper, err := ParsePrincipalMappingRules(t.PrincipalMappingRules.Value)
	if err != nil {
		errs = append(errs, fmt.Errorf("%s: %w", t.PrincipalMappingRules.Property, err))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, nil, err
	}
	minV, maxV := tlsVersions(t.EnabledProtocols)
	cfg := &tls.Config{
		MinVersion:     minV,
		MaxVersion:     maxV,
		CipherSuites:   config.CipherSuiteIDs(t.CipherSuites),
		ClientCAs:      pool,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return ks.Certificate(), nil },
	}
	switch t.ClientAuth.Value {
	case "requested":
		cfg.ClientAuth = tls.VerifyClientCertIfGiven
	case "required":
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return cfg, mapper, nil
}

// ClientTLS builds the tls.Config a node dials another node's listener with: the
// listener's trust store verifies the server (its host name too when
// ssl.endpoint.identification.algorithm is https) and its key store is this node's
// client certificate.
func ClientTLS(t *config.TLSSettings, logger *slog.Logger) (*tls.Config, error) {
	ks, err := LoadKeyStore(t, logger)
	if err != nil {
		return nil, err
	}
	pool, err := LoadTrustStore(t)
	if err != nil {
		return nil, err
	}
	minV, maxV := tlsVersions(t.EnabledProtocols)
	cfg := &tls.Config{
		MinVersion:           minV,
		MaxVersion:           maxV,
		CipherSuites:         config.CipherSuiteIDs(t.CipherSuites),
		RootCAs:              pool,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return ks.Certificate(), nil },
	}
	if !t.EndpointIdentification {
		VerifyChainOnly(cfg)
	}
	return cfg, nil
}

// VerifyChainOnly makes a client config check the server's certificate chain
// against cfg.RootCAs (the system's when nil) but not the name it carries, as
// ssl.endpoint.identification.algorithm="" does.
func VerifyChainOnly(cfg *tls.Config) {
	pool := cfg.RootCAs
	cfg.InsecureSkipVerify = true // the chain is verified below
	cfg.VerifyConnection = func(cs tls.ConnectionState) error {
		if len(cs.PeerCertificates) == 0 {
			return errors.New("the server sent no certificate")
		}
		opts := x509.VerifyOptions{Roots: pool, Intermediates: x509.NewCertPool()}
		for _, c := range cs.PeerCertificates[1:] {
			opts.Intermediates.AddCert(c)
		}
		_, err := cs.PeerCertificates[0].Verify(opts)
		return err
	}
}
