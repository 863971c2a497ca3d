package server

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/oauth"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/samsa-streaming/samsa/internal/auth"
	"github.com/samsa-streaming/samsa/internal/config"
	"github.com/samsa-streaming/samsa/internal/peer"
	"github.com/samsa-streaming/samsa/internal/protocol"
	"github.com/samsa-streaming/samsa/internal/testutil"
)

// whoAmI answers Metadata with the request's principal and listener in ClusterID.
var whoAmI = apiVersionsHandler(func(req *protocol.Request) <-chan protocol.Response {
	resp := kmsg.NewPtrMetadataResponse()
	id := req.Principal.String() + "@" + req.Listener
	resp.ClusterID = &id
	return protocol.Ready(protocol.Response{Body: resp})
})

// securityVersions serves SaslHandshake and SaslAuthenticate too.
func securityVersions(key int16) (int16, int16, bool) {
	switch key {
	case saslHandshakeKey:
		return 0, 1, true
	case saslAuthenticateKey:
		return 0, 2, true
	}
	return servedVersions(key)
}

// secureServer starts a server whose listener is built from config properties.
func secureServer(t *testing.T, overrides []string, mutate func(*Config)) string {
	t.Helper()
	cfg, err := config.Load("", overrides)
	if err != nil {
		t.Fatal(err)
	}
	creds := map[string]auth.ScramCredential{}
	c, _ := auth.NewScramCredential(auth.ScramSHA256, "carol-secret", nil, 4096)
	creds["carol"] = c
	listeners, err := ConfigListeners(cfg, cfg.ClientListeners(), Security{
		Scram: func(m auth.ScramMechanism, u string) (auth.ScramCredential, bool) {
			c, ok := creds[u]
			return c, ok && m == auth.ScramSHA256
		},
		Logger: testLogger(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	_, addr := startServer(t, whoAmI, func(c *Config) {
		c.Listeners = listeners
		c.Versions = securityVersions
		if mutate != nil {
			mutate(c)
		}
	})
	return addr
}

// whoAmIOver asks Metadata through a peer connection with sec.
func whoAmIOver(t *testing.T, addr string, sec peer.Security) (string, error) {
	t.Helper()
	conn := peer.New(addr, peer.Options{Security: sec, DialTimeout: testDeadline})
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), testDeadline)
	defer cancel()
	req := kmsg.NewPtrMetadataRequest()
	req.SetVersion(9)
	resp, err := conn.Request(ctx, req)
	if err != nil {
		return "", err
	}
	return *resp.(*kmsg.MetadataResponse).ClusterID, nil
}

const saslPlainJAAS = `org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="alice-secret";`

func saslListener() []string {
	return []string{
		"listeners=SASL_PLAINTEXT://127.0.0.1:0",
		"sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256",
		"listener.name.sasl_plaintext.plain.sasl.jaas.config=" + saslPlainJAAS,
		"connection.failed.authentication.delay.ms=50",
	}
}

func TestTLSClientCertificatePrincipal(t *testing.T) {
	ca := testutil.NewCA(t)
	server, client := ca.Issue("broker"), ca.Issue("Alice")
	addr := secureServer(t, []string{
		"listeners=SSL://127.0.0.1:0",
		"ssl.keystore.location=" + server.KeyStore,
		"ssl.truststore.location=" + ca.File,
		"ssl.client.auth=required",
		`ssl.principal.mapping.rules=RULE:^CN=([^,]*),.*$/$1/L`,
	}, nil)
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	cert, err := tls.X509KeyPair(client.CertPEM, client.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	got, err := whoAmIOver(t, addr, peer.Security{TLS: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}}})
	if err != nil || got != "User:alice@SSL" {
		t.Fatalf("with a client certificate: %q, %v", got, err)
	}
	if _, err := whoAmIOver(t, addr, peer.Security{TLS: &tls.Config{RootCAs: pool}}); err == nil {
		t.Fatal("no client certificate with ssl.client.auth=required: no error")
	}
	// Random bytes on the TLS port close that connection only.
	c := dial(t, addr)
	junk := make([]byte, 4096)
	_, _ = rand.Read(junk)
	_, _ = c.Write(junk)
	expectTLSClosed(t, c)
	if got, err := whoAmIOver(t, addr, peer.Security{TLS: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}}}); err != nil || got != "User:alice@SSL" {
		t.Fatalf("after junk: %q, %v", got, err)
	}
}

func TestTLSWithoutClientAuthIsAnonymous(t *testing.T) {
	ca := testutil.NewCA(t)
	server := ca.Issue("broker")
	addr := secureServer(t, []string{"listeners=SSL://127.0.0.1:0", "ssl.keystore.location=" + server.KeyStore}, nil)
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	if got, err := whoAmIOver(t, addr, peer.Security{TLS: &tls.Config{RootCAs: pool}}); err != nil || got != "User:ANONYMOUS@SSL" {
		t.Fatalf("%q, %v", got, err)
	}
}

func TestSASLMechanisms(t *testing.T) {
	addr := secureServer(t, saslListener(), nil)
	for _, tt := range []struct {
		name string
		sec  peer.Security
		want string
	}{
		{"PLAIN", peer.Security{SASL: plain.Auth{User: "alice", Pass: "alice-secret"}.AsMechanism()}, "User:alice@SASL_PLAINTEXT"},
		{"SCRAM", peer.Security{SASL: scram.Auth{User: "carol", Pass: "carol-secret"}.AsSha256Mechanism()}, "User:carol@SASL_PLAINTEXT"},
		{"PLAIN wrong password", peer.Security{SASL: plain.Auth{User: "alice", Pass: "nope"}.AsMechanism()}, ""},
		{"PLAIN unknown user", peer.Security{SASL: plain.Auth{User: "mallory", Pass: "alice-secret"}.AsMechanism()}, ""},
		{"SCRAM wrong password", peer.Security{SASL: scram.Auth{User: "carol", Pass: "nope"}.AsSha256Mechanism()}, ""},
		{"SCRAM unknown user", peer.Security{SASL: scram.Auth{User: "mallory", Pass: "nope"}.AsSha256Mechanism()}, ""},
		{"mechanism not enabled", peer.Security{SASL: scram.Auth{User: "carol", Pass: "carol-secret"}.AsSha512Mechanism()}, ""},
	} {
		got, err := whoAmIOver(t, addr, tt.sec)
		switch {
		case tt.want != "" && (err != nil || got != tt.want):
			t.Errorf("%s: %q, %v; want %s", tt.name, got, err, tt.want)
		case tt.want == "" && err == nil:
			t.Errorf("%s: authenticated as %q", tt.name, got)
		case tt.want == "" && strings.Contains(tt.name, "wrong") || strings.Contains(tt.name, "unknown"):
			if !strings.Contains(err.Error(), "SASL_AUTHENTICATION_FAILED") || !strings.Contains(err.Error(), "Invalid username or password") {
				t.Errorf("%s: %v", tt.name, err)
			}
		}
	}
}

// kafka-python speaks SaslHandshake v0, then raw tokens without SaslAuthenticate.
func TestSASLHandshakeV0RawTokens(t *testing.T) {
	addr := secureServer(t, saslListener(), nil)
	c := dial(t, addr)
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Mechanism = "PLAIN"
	send(t, c, encodeRequest(hs, 0, 1, "kafka-python"))
	hsResp := kmsg.NewPtrSASLHandshakeResponse()
	readResponse(t, c, hsResp, 0, false)
	if hsResp.ErrorCode != 0 || !strings.Contains(strings.Join(hsResp.SupportedMechanisms, ","), "PLAIN") {
		t.Fatalf("handshake: %+v", hsResp)
	}
	token := []byte("\x00alice\x00alice-secret")
	send(t, c, binary.BigEndian.AppendUint32(nil, uint32(len(token))))
	send(t, c, token)
	var empty [4]byte
	if _, err := io.ReadFull(c, empty[:]); err != nil || empty != [4]byte{} {
		t.Fatalf("raw answer %x, %v", empty, err)
	}
	send(t, c, encodeRequest(kmsg.NewPtrMetadataRequest(), 9, 2, "kafka-python"))
	md := kmsg.NewPtrMetadataResponse()
	readResponse(t, c, md, 9, true)
	if *md.ClusterID != "User:alice@SASL_PLAINTEXT" {
		t.Fatalf("principal %q", *md.ClusterID)
	}

	// A wrong raw token closes the connection without an answer.
	c2 := dial(t, addr)
	send(t, c2, encodeRequest(hs, 0, 1, "kafka-python"))
	readResponse(t, c2, kmsg.NewPtrSASLHandshakeResponse(), 0, false)
	bad := []byte("\x00alice\x00wrong")
	send(t, c2, append(binary.BigEndian.AppendUint32(nil, uint32(len(bad))), bad...))
	expectClosed(t, c2)
}

func TestSASLRefusesBadInput(t *testing.T) {
	addr := secureServer(t, append(saslListener(), "sasl.server.max.receive.size=1024"), func(c *Config) {
		c.SetupTimeout = 300 * time.Millisecond
	})
	// A request other than ApiVersions before authenticating closes the connection.
	c := dial(t, addr)
	send(t, c, encodeRequest(kmsg.NewPtrMetadataRequest(), 9, 1, "x"))
	expectClosed(t, c)
	// ApiVersions is answered.
	c = dial(t, addr)
	send(t, c, encodeRequest(kmsg.NewPtrApiVersionsRequest(), 0, 1, "x"))
	readResponse(t, c, kmsg.NewPtrApiVersionsResponse(), 0, false)
	// A frame above sasl.server.max.receive.size before authenticating.
	c = dial(t, addr)
	send(t, c, binary.BigEndian.AppendUint32(nil, 4096))
	expectClosed(t, c)
	// SaslAuthenticate without a handshake.
	c = dial(t, addr)
	send(t, c, encodeRequest(kmsg.NewPtrSASLAuthenticateRequest(), 1, 1, "x"))
	ar := kmsg.NewPtrSASLAuthenticateResponse()
	readResponse(t, c, ar, 1, false)
	if ar.ErrorCode != kerr.IllegalSaslState.Code {
		t.Errorf("SaslAuthenticate first: error %d", ar.ErrorCode)
	}
	expectClosed(t, c)
	// Garbage tokens.
	for _, mech := range []string{"PLAIN", "SCRAM-SHA-256"} {
		c = dial(t, addr)
		hs := kmsg.NewPtrSASLHandshakeRequest()
		hs.Mechanism = mech
		send(t, c, encodeRequest(hs, 1, 1, "x"))
		readResponse(t, c, kmsg.NewPtrSASLHandshakeResponse(), 1, false)
		req := kmsg.NewPtrSASLAuthenticateRequest()
		req.SASLAuthBytes = []byte("\xff garbage \x00")
		send(t, c, encodeRequest(req, 1, 2, "x"))
		ar := kmsg.NewPtrSASLAuthenticateResponse()
		readResponse(t, c, ar, 1, false)
		if ar.ErrorCode == 0 {
			t.Errorf("%s garbage token accepted", mech)
		}
		expectClosed(t, c)
	}
	// An unknown mechanism.
	c = dial(t, addr)
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Mechanism = "GSSAPI"
	send(t, c, encodeRequest(hs, 1, 1, "x"))
	hsResp := kmsg.NewPtrSASLHandshakeResponse()
	readResponse(t, c, hsResp, 1, false)
	if hsResp.ErrorCode != kerr.UnsupportedSaslMechanism.Code {
		t.Errorf("GSSAPI: error %d", hsResp.ErrorCode)
	}
	// A connection that never authenticates is closed after connections.max.setup.ms.
	c = dial(t, addr)
	start := time.Now()
	expectClosed(t, c)
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("closed after %s", d)
	}
}

// Many failed logins, fifty at a time, are each answered and closed; the server goes
// on serving.
func TestManyFailedLogins(t *testing.T) {
	addr := secureServer(t, saslListener(), func(c *Config) { c.Logger = slog.New(slog.DiscardHandler) })
	const attempts, parallel = 1000, 50
	errs := make(chan error, attempts)
	slots := make(chan struct{}, parallel)
	for i := range attempts {
		slots <- struct{}{}
		go func() {
			defer func() { <-slots }()
			_, err := whoAmIOver(t, addr, peer.Security{SASL: scram.Auth{User: "carol", Pass: "guess" + string(rune('a'+i%26))}.AsSha256Mechanism()})
			errs <- err
		}()
	}
	for range attempts {
		if err := <-errs; err == nil || !strings.Contains(err.Error(), "SASL_AUTHENTICATION_FAILED") {
			t.Fatalf("failed login: %v", err)
		}
	}
	if got, err := whoAmIOver(t, addr, peer.Security{SASL: scram.Auth{User: "carol", Pass: "carol-secret"}.AsSha256Mechanism()}); err != nil || got != "User:carol@SASL_PLAINTEXT" {
		t.Fatalf("after the failures: %q, %v", got, err)
	}
}

func authenticatePlain(t *testing.T, c net.Conn, corr int32, user, pass string) *kmsg.SASLAuthenticateResponse {
	t.Helper()
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Mechanism = "PLAIN"
	send(t, c, encodeRequest(hs, 1, corr, "x"))
	readResponse(t, c, kmsg.NewPtrSASLHandshakeResponse(), 1, false)
	req := kmsg.NewPtrSASLAuthenticateRequest()
	req.SASLAuthBytes = []byte("\x00" + user + "\x00" + pass)
	send(t, c, encodeRequest(req, 2, corr+1, "x"))
	ar := kmsg.NewPtrSASLAuthenticateResponse()
	readResponse(t, c, ar, 2, true)
	return ar
}

// KIP-368: the session lifetime is announced; the client re-authenticates in time
// or its next request after the end closes the connection.
func TestReauthentication(t *testing.T) {
	addr := secureServer(t, append(saslListener(), "connections.max.reauth.ms=400"), nil)
	c := dial(t, addr)
	ar := authenticatePlain(t, c, 1, "alice", "alice-secret")
	if ar.ErrorCode != 0 || ar.SessionLifetimeMillis <= 0 || ar.SessionLifetimeMillis > 400 {
		t.Fatalf("authenticate: %+v", ar)
	}
	// Re-authenticate before the end, then use the connection past the first end.
	time.Sleep(200 * time.Millisecond)
	if ar := authenticatePlain(t, c, 3, "alice", "alice-secret"); ar.ErrorCode != 0 {
		t.Fatalf("re-authenticate: %+v", ar)
	}
	time.Sleep(250 * time.Millisecond)
	send(t, c, encodeRequest(kmsg.NewPtrMetadataRequest(), 9, 5, "x"))
	readResponse(t, c, kmsg.NewPtrMetadataResponse(), 9, true)
	// Let the session end: the next request closes the connection.
	time.Sleep(500 * time.Millisecond)
	send(t, c, encodeRequest(kmsg.NewPtrMetadataRequest(), 9, 6, "x"))
	expectClosed(t, c)
}

// Kafka re-authenticates only a session that ends (connections.max.reauth.ms or a
// token's lifetime) and at most once a second: any other SaslHandshake on an
// authenticated connection is answered ILLEGAL_SASL_STATE and starts no exchange.
func TestHandshakeAfterAuthentication(t *testing.T) {
	handshake := func(c net.Conn, corr int32) int16 {
		hs := kmsg.NewPtrSASLHandshakeRequest()
		hs.Mechanism = "PLAIN"
		send(t, c, encodeRequest(hs, 1, corr, "x"))
		resp := kmsg.NewPtrSASLHandshakeResponse()
		readResponse(t, c, resp, 1, false)
		return resp.ErrorCode
	}
	whoAmI := func(c net.Conn, corr int32) string {
		send(t, c, encodeRequest(kmsg.NewPtrMetadataRequest(), 9, corr, "x"))
		resp := kmsg.NewPtrMetadataResponse()
		readResponse(t, c, resp, 9, true)
		return *resp.ClusterID
	}
	t.Run("no session lifetime", func(t *testing.T) {
		c := dial(t, secureServer(t, saslListener(), nil))
		if ar := authenticatePlain(t, c, 1, "alice", "alice-secret"); ar.ErrorCode != 0 || ar.SessionLifetimeMillis != 0 {
			t.Fatalf("authenticate: %+v", ar)
		}
		if code := handshake(c, 3); code != kerr.IllegalSaslState.Code {
			t.Fatalf("second handshake: %v, want ILLEGAL_SASL_STATE", kerr.ErrorForCode(code))
		}
		if got := whoAmI(c, 4); got != "User:alice@SASL_PLAINTEXT" {
			t.Fatalf("after the refused handshake: %q", got)
		}
	})
	t.Run("twice within a second", func(t *testing.T) {
		c := dial(t, secureServer(t, append(saslListener(), "connections.max.reauth.ms=60000"), nil))
		authenticatePlain(t, c, 1, "alice", "alice-secret")
		if ar := authenticatePlain(t, c, 3, "alice", "alice-secret"); ar.ErrorCode != 0 {
			t.Fatalf("re-authenticate: %+v", ar)
		}
		if code := handshake(c, 5); code != kerr.IllegalSaslState.Code {
			t.Fatalf("re-authentication again at once: %v, want ILLEGAL_SASL_STATE", kerr.ErrorForCode(code))
		}
		if got := whoAmI(c, 6); got != "User:alice@SASL_PLAINTEXT" {
			t.Fatalf("after the refused handshake: %q", got)
		}
	})
}

func TestConnectionLimits(t *testing.T) {
	_, addr := startServer(t, whoAmI, func(c *Config) { c.MaxConnectionsPerIP = 2 })
	a, b := dial(t, addr), dial(t, addr)
	third := dial(t, addr)
	expectClosed(t, third)
	a.Close()
	waitFor(t, "a slot for a new connection", func() bool {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			return false
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(time.Second))
		if _, err := c.Write(encodeRequest(kmsg.NewPtrApiVersionsRequest(), 0, 1, "x")); err != nil {
			return false
		}
		_, err = c.Read(make([]byte, 4))
		return err == nil
	})
	_ = b
}

func TestMaxConnectionsStopsAccepting(t *testing.T) {
	srv, addr := startServer(t, whoAmI, func(c *Config) { c.MaxConnections = 1 })
	first := dial(t, addr)
	send(t, first, encodeRequest(kmsg.NewPtrApiVersionsRequest(), 0, 1, "x"))
	readResponse(t, first, kmsg.NewPtrApiVersionsResponse(), 0, false)
	second := dial(t, addr) // queued by the kernel, not accepted
	send(t, second, encodeRequest(kmsg.NewPtrApiVersionsRequest(), 0, 1, "x"))
	_ = second.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	if _, err := second.Read(make([]byte, 4)); err == nil {
		t.Fatal("a connection beyond max.connections was served")
	}
	if n := srv.Connections(); n != 1 {
		t.Fatalf("%d connections open", n)
	}
	first.Close()
	_ = second.SetReadDeadline(time.Now().Add(testDeadline))
	readResponse(t, second, kmsg.NewPtrApiVersionsResponse(), 0, false)
}

// Replacing the key store file reloads the certificate without a restart.
func TestCertificateReload(t *testing.T) {
	ca := testutil.NewCA(t)
	first, second := ca.Issue("broker-one"), ca.Issue("broker-two")
	keystore := filepath.Join(t.TempDir(), "server.pem")
	if err := os.WriteFile(keystore, append(first.KeyPEM, first.CertPEM...), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := secureServer(t, []string{"listeners=SSL://127.0.0.1:0", "ssl.keystore.location=" + keystore}, nil)
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	served := func() string {
		c, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: pool})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		return c.ConnectionState().PeerCertificates[0].Subject.CommonName
	}
	if got := served(); got != "broker-one" {
		t.Fatalf("serves %s", got)
	}
	if err := os.WriteFile(keystore, append(second.KeyPEM, second.CertPEM...), 0o600); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the new certificate", func() bool { return served() == "broker-two" })
	// A broken file keeps the certificate in use.
	if err := os.WriteFile(keystore, []byte("not PEM"), 0o600); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1100 * time.Millisecond)
	if got := served(); got != "broker-two" {
		t.Fatalf("after a broken key store: serves %s", got)
	}
}

func TestOAuthBearer(t *testing.T) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	jwksFile := filepath.Join(t.TempDir(), "jwks.json")
	set, _ := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &key.PublicKey, KeyID: "k1", Algorithm: "RS256", Use: "sig"}}})
	if err := os.WriteFile(jwksFile, set, 0o600); err != nil {
		t.Fatal(err)
	}
	signed := func(sub string) string {
		signer, _ := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: key}, (&jose.SignerOptions{}).WithHeader("kid", "k1"))
		tok, err := jwt.Signed(signer).Claims(map[string]any{"sub": sub, "exp": time.Now().Add(time.Hour).Unix(), "aud": "kafka"}).Serialize()
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	unsecured := func(sub string) string {
		enc := base64.RawURLEncoding.EncodeToString
		return enc([]byte(`{"alg":"none"}`)) + "." + enc(fmt.Appendf(nil, `{"sub":%q,"exp":%d}`, sub, time.Now().Add(time.Hour).Unix())) + "."
	}
	dev := secureServer(t, []string{"listeners=SASL_PLAINTEXT://127.0.0.1:0", "sasl.enabled.mechanisms=OAUTHBEARER",
		`listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;`}, nil)
	if got, err := whoAmIOver(t, dev, peer.Security{SASL: oauth.Auth{Token: unsecured("dev")}.AsMechanism()}); err != nil || got != "User:dev@SASL_PLAINTEXT" {
		t.Fatalf("unsecured token: %q %v", got, err)
	}
	prod := secureServer(t, []string{"listeners=SASL_PLAINTEXT://127.0.0.1:0", "sasl.enabled.mechanisms=OAUTHBEARER",
		"sasl.oauthbearer.jwks.endpoint.url=file://" + jwksFile, "sasl.oauthbearer.expected.audience=kafka",
		"connections.max.reauth.ms=600000"}, nil)
	if got, err := whoAmIOver(t, prod, peer.Security{SASL: oauth.Auth{Token: signed("svc")}.AsMechanism()}); err != nil || got != "User:svc@SASL_PLAINTEXT" {
		t.Fatalf("signed token: %q %v", got, err)
	}
	if _, err := whoAmIOver(t, prod, peer.Security{SASL: oauth.Auth{Token: unsecured("svc")}.AsMechanism()}); err == nil {
		t.Fatal("an unsecured token was accepted with a JWKS")
	}
}

// A key or trust store that cannot be read, or mapping rules that do not parse, stop
// the start with a message naming the property.
func TestConfigListenersNameTheProperty(t *testing.T) {
	ca := testutil.NewCA(t)
	good := ca.Issue("broker")
	cfg, err := config.Load("", []string{
		"listeners=SSL://127.0.0.1:0,INTERNAL://127.0.0.1:0",
		"listener.security.protocol.map=SSL:SSL,INTERNAL:SSL,CONTROLLER:PLAINTEXT",
		"ssl.keystore.location=/nonexistent/server.pem",
		"listener.name.internal.ssl.keystore.location=" + good.KeyStore,
		"listener.name.internal.ssl.truststore.location=/nonexistent/ca.pem",
		"listener.name.internal.ssl.client.auth=required",
		"listener.name.internal.ssl.principal.mapping.rules=RULE:(/x/",
	})
	if err != nil {
		t.Fatal(err)
	}
	_, err = ConfigListeners(cfg, cfg.ClientListeners(), Security{Logger: testLogger(t)})
	for _, want := range []string{"ssl.keystore.location=/nonexistent/server.pem", "listener.name.internal.ssl.truststore.location=/nonexistent/ca.pem",
		"listener.name.internal.ssl.principal.mapping.rules"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ConfigListeners = %v, want it to name %s", err, want)
		}
	}
	// Inline PEM works as well as a file.
	inline, err := config.Load("", []string{"listeners=SSL://127.0.0.1:0",
		"ssl.keystore.key=" + string(good.KeyPEM), "ssl.keystore.certificate.chain=" + string(good.CertPEM)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ConfigListeners(inline, inline.ClientListeners(), Security{Logger: testLogger(t)}); err != nil {
		t.Fatalf("inline key store: %v", err)
	}
}
