package testutil

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// CA is a certificate authority made for one test: it issues server and client
// certificates, written as PEM files into the test's temporary directory. Nothing
// is ever committed: every key is generated when the test runs.
type CA struct {
	Cert    *x509.Certificate
	key     *ecdsa.PrivateKey
	CertPEM []byte
	// File is the CA certificate as a PEM file (a trust store).
	File string
	dir  string
	t    testing.TB
}

// NewCA makes a certificate authority.
func NewCA(t testing.TB) *CA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "samsa test CA", Organization: []string{"Samsa"}},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	ca := &CA{Cert: cert, key: key, CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), dir: t.TempDir(), t: t}
	ca.File = filepath.Join(ca.dir, "ca.pem")
	if err := os.WriteFile(ca.File, ca.CertPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	return ca
}

// Issued is a certificate and its key, in PEM, and a key store file holding both.
type Issued struct {
	CertPEM, KeyPEM []byte
	// KeyStore is a PEM file with the private key and the certificate.
	KeyStore string
	// CertFile and KeyFile hold them apart (for clients that take two files).
	CertFile, KeyFile string
}

var serial = big.NewInt(100)

// Issue makes a certificate for cn, valid as a server for 127.0.0.1, ::1 and
// localhost (plus hosts) and as a client.
func (ca *CA) Issue(cn string, hosts ...string) Issued {
	t := ca.t
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial = new(big.Int).Add(serial, big.NewInt(1))
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: cn, Organization: []string{"Samsa"}},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("::1")},
		DNSNames:     append([]string{"localhost"}, hosts...),
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	is := Issued{
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
	}
	base := filepath.Join(ca.dir, cn+"-"+serial.String())
	is.KeyStore, is.CertFile, is.KeyFile = base+".keystore.pem", base+".cert.pem", base+".key.pem"
	for file, data := range map[string][]byte{
		is.KeyStore: append(append([]byte{}, is.KeyPEM...), is.CertPEM...),
		is.CertFile: is.CertPEM,
		is.KeyFile:  is.KeyPEM,
	} {
		if err := os.WriteFile(file, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return is
}
