package cli_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/samsa-streaming/samsa/internal/cli"
	"github.com/samsa-streaming/samsa/internal/testutil"
)

// The security commands and flags against a broker with an authorizer: the admin
// creates a SCRAM user, ACLs and a quota with samsa, and the new user reaches what
// the ACLs allow over SASL_SSL — with flags and with a Kafka client properties file.
func TestSecurityCommands(t *testing.T) {
	sb := testutil.StartSecureBroker(t, testutil.SecureOptions{
		PlainUsers: map[string]string{"admin": "admin-secret"},
		Overrides: []string{
			"authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
			"super.users=User:admin",
		},
	})
	admin := []string{"-b", sb.SASLPlaintext, "--sasl-mechanism", "PLAIN", "--user", "admin", "--password", "admin-secret"}
	samsa, must := cliRunners(t)
	must(append(admin, "topic", "create", "payments", "-p", "1")...)
	must(append(admin, "user", "scram", "set", "erin", "--mechanism", "SCRAM-SHA-512", "--scram-password", "erin-secret")...)
	if out := must(append(admin, "user", "scram", "describe", "erin")...); !strings.Contains(out, "SCRAM-SHA-512") {
		t.Fatalf("describe: %s", out)
	}
	must(append(admin, "acl", "create", "--allow", "User:erin", "--operation", "write,describe", "--topic", "pay", "--prefixed")...)
	must(append(admin, "acl", "create", "--deny", "User:erin", "--operation", "write", "--topic", "payments-audit")...)
	out := must(append(admin, "acl", "list", "--topic", "payments", "--pattern", "match")...)
	if !strings.Contains(out, "User:erin") || !strings.Contains(out, "Prefixed") || strings.Contains(out, "payments-audit") {
		t.Fatalf("acl list --pattern match:\n%s", out)
	}
	must(append(admin, "quota", "set", "--entity-user", "erin", "producer_byte_rate=1048576")...)
	if out := must(append(admin, "quota", "describe", "--entity-user", "erin")...); !strings.Contains(out, "producer_byte_rate") {
		t.Fatalf("quota describe: %s", out)
	}
	must(append(admin, "quota", "set", "--entity-ip", "192.0.2.10", "connection_creation_rate=5")...)
	must(append(admin, "quota", "set", "--entity-default-ip", "connection_creation_rate=50")...)
	if out := must(append(admin, "quota", "describe", "--entity-ip", "192.0.2.10")...); !strings.Contains(out, "ip=192.0.2.10") ||
		!strings.Contains(out, "connection_creation_rate") || strings.Contains(out, "<default>") {
		t.Fatalf("quota describe --entity-ip: %s", out)
	}
	if out := must(append(admin, "quota", "describe", "--entity-default-ip")...); !strings.Contains(out, "ip=<default>") || !strings.Contains(out, "50") {
		t.Fatalf("quota describe --entity-default-ip: %s", out)
	}
	if res := samsa(append(admin, "quota", "set", "--entity-ip", "192.0.2.10", "--entity-user", "erin", "connection_creation_rate=5")...); res.code != cli.ExitUsage ||
		!strings.Contains(res.stderr, "cannot be combined with a user or client id") {
		t.Fatalf("an IP entity with a user: exit %d %s", res.code, res.stderr)
	}
	if res := samsa(append(admin, "quota", "set", "--entity-ip", "192.0.2.10", "producer_byte_rate=5")...); res.code != cli.ExitFailed ||
		!strings.Contains(res.stderr, `quota "producer_byte_rate" does not apply to this entity (one of [connection_creation_rate])`) {
		t.Fatalf("a byte rate on an IP entity: exit %d %s", res.code, res.stderr)
	}

	erin := []string{"-b", sb.SASLSSL, "--tls-ca", sb.CA.File, "--sasl-mechanism", "SCRAM-SHA-512", "--user", "erin", "--password", "erin-secret"}
	must(append(erin, "produce", "payments")...)
	if res := samsa(append(erin, "acl", "list")...); res.code != cli.ExitFailed || !strings.Contains(res.stderr, "samsa acl list") {
		t.Fatalf("erin listing ACLs: exit %d %s", res.code, res.stderr)
	}
	wrong := []string{"-b", sb.SASLSSL, "--tls-ca", sb.CA.File, "--sasl-mechanism", "SCRAM-SHA-512", "--user", "erin", "--password", "nope"}
	if res := samsa(append(wrong, "topic", "list")...); res.code != cli.ExitFailed || !strings.Contains(res.stderr, "--password") {
		t.Fatalf("a wrong password: exit %d %s", res.code, res.stderr)
	}
	// The same through a Kafka client properties file.
	props := filepath.Join(t.TempDir(), "client.properties")
	if err := os.WriteFile(props, []byte(strings.Join([]string{
		"security.protocol=SASL_SSL",
		"sasl.mechanism=SCRAM-SHA-512",
		`sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="erin" password="erin-secret";`,
		"ssl.truststore.type=PEM",
		"ssl.truststore.location=" + sb.CA.File,
	}, "\n")), 0o600); err != nil {
		t.Fatal(err)
	}
	if out := must("-b", sb.SASLSSL, "--command-config", props, "topic", "list"); !strings.Contains(out, "payments") {
		t.Fatalf("topic list with --command-config: %s", out)
	}
	must(append(admin, "acl", "delete", "--allow", "User:erin", "--topic", "pay", "--pattern", "prefixed")...)
	if out := must(append(admin, "acl", "list", "-o", "json")...); strings.Contains(out, `"Allow"`) {
		t.Fatalf("after delete: %s", out)
	}
	must(append(admin, "user", "scram", "delete", "erin", "--mechanism", "SCRAM-SHA-512")...)
}

// runCmd runs the built binary with args (no broker environment).
func runCmd(t *testing.T, ctx context.Context, args ...string) cliResult {
	t.Helper()
	var b testutil.Broker
	b.Addr = "127.0.0.1:1"
	return runWith(t, ctx, &b, "", args...)
}

// The token commands: alice creates a delegation token renewable by bob, samsa
// authenticates with it (--token, and tokenauth=true in a properties file) as alice,
// bob renews it, alice expires it, and it no longer authenticates.
func TestTokenCommands(t *testing.T) {
	sb := testutil.StartSecureBroker(t, testutil.SecureOptions{
		PlainUsers: map[string]string{"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret"},
		Overrides:  []string{"delegation.token.secret.key=cli-secret"},
	})
	as := func(user string) []string {
		return []string{"-b", sb.SASLPlaintext, "--sasl-mechanism", "PLAIN", "--user", user, "--password", user + "-secret"}
	}
	samsa, must := cliRunners(t)
	must(append(as("admin"), "topic", "create", "tokens-topic", "-p", "1")...)
	var tok struct {
		TokenID  string   `json:"token_id"`
		HMAC     string   `json:"hmac"`
		Owner    string   `json:"owner"`
		Renewers []string `json:"renewers"`
	}
	if err := json.Unmarshal([]byte(must(append(as("alice"), "token", "create", "--renewer", "User:bob", "-o", "json")...)), &tok); err != nil {
		t.Fatal(err)
	}
	if tok.Owner != "User:alice" || len(tok.Renewers) != 1 || tok.Renewers[0] != "User:bob" || tok.HMAC == "" {
		t.Fatalf("created %+v", tok)
	}
	viaToken := []string{"-b", sb.SASLPlaintext, "--sasl-mechanism", "SCRAM-SHA-256", "--user", tok.TokenID, "--password", tok.HMAC, "--token"}
	if out := must(append(viaToken, "topic", "list")...); !strings.Contains(out, "tokens-topic") {
		t.Fatalf("topic list with the token: %s", out)
	}
	props := filepath.Join(t.TempDir(), "token.properties")
	if err := os.WriteFile(props, []byte(strings.Join([]string{
		"security.protocol=SASL_PLAINTEXT",
		"sasl.mechanism=SCRAM-SHA-512",
		`sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="` + tok.TokenID +
			`" password="` + tok.HMAC + `" tokenauth="true";`,
	}, "\n")), 0o600); err != nil {
		t.Fatal(err)
	}
	must("-b", sb.SASLPlaintext, "--command-config", props, "produce", "tokens-topic")
	if out := must(append(as("alice"), "token", "describe")...); !strings.Contains(out, tok.TokenID) || !strings.Contains(out, "User:bob") {
		t.Fatalf("token describe: %s", out)
	}
	if out := must(append(as("bob"), "token", "renew", tok.HMAC, "--period", "1h")...); !strings.Contains(out, "renewed: expires") {
		t.Fatalf("token renew: %s", out)
	}
	if res := samsa(append(as("admin"), "token", "renew", "not base64!")...); res.code != cli.ExitUsage || !strings.Contains(res.stderr, "base64") {
		t.Fatalf("renew with a bad HMAC: exit %d %s", res.code, res.stderr)
	}
	must(append(as("alice"), "token", "expire", tok.HMAC)...)
	if res := samsa(append(viaToken, "topic", "list")...); res.code != cli.ExitFailed {
		t.Fatalf("topic list with the expired token: exit %d %s%s", res.code, res.stdout, res.stderr)
	}
}

// cliRunners returns samsa, which runs a command (a minute at most), and must, which
// also fails the test unless it exits ExitOK and returns its output.
func cliRunners(t *testing.T) (samsa func(args ...string) cliResult, must func(args ...string) string) {
	samsa = func(args ...string) cliResult {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		return runCmd(t, ctx, args...)
	}
	must = func(args ...string) string {
		t.Helper()
		res := samsa(args...)
		if res.code != cli.ExitOK {
			t.Fatalf("samsa %s: exit %d\n%s%s", strings.Join(args, " "), res.code, res.stdout, res.stderr)
		}
		return res.stdout
	}
	return samsa, must
}
