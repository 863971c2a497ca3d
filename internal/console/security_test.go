package console

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/samsa-streaming/samsa/internal/testutil"
)

// TestConsoleWithSASLAndAuthorizer runs `samsa console` against a broker whose
// SASL_SSL listener needs credentials and whose authorizer allows alice one topic of
// two: with the security flags (and with a client properties file) the pages work and
// show what the principal may see; a wrong password is a page that says so.
func TestConsoleWithSASLAndAuthorizer(t *testing.T) {
	sb := testutil.StartSecureBroker(t, testutil.SecureOptions{
		PlainUsers: map[string]string{"admin": "admin-secret"},
		ScramUsers: map[string]string{"alice": "alice-secret"},
		Overrides: []string{
			"authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
			"super.users=User:admin",
			"broker.session.timeout.ms=60000", // as startTestBroker: no self-fencing on a loaded machine
		},
	})
	adminClient, err := kgo.NewClient(kgo.SeedBrokers(sb.SASLPlaintext), kgo.SASL(plain.Auth{User: "admin", Pass: "admin-secret"}.AsMechanism()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(adminClient.Close)
	adm := kadm.NewClient(adminClient)
	createTopic(t, adm, "visible", 2, nil)
	createTopic(t, adm, "hidden", 1, nil)
	acl := kadm.NewACLs().Allow("User:alice").Topics("visible").Operations(kadm.OpRead).ResourcePatternType(kadm.ACLPatternLiteral)
	if res, err := adm.CreateACLs(ctxFor(t, 30*time.Second), acl); err != nil || res[0].Err != nil {
		t.Fatalf("create ACL: %v %v", err, res)
	}
	produce(t, adminClient, &kgo.Record{Topic: "visible", Value: []byte("seen by alice")})
	_, port, _ := net.SplitHostPort(sb.SASLSSL)

	// get fetches a page and returns its status and body.
	get := func(t *testing.T, url string) (int, string) {
		t.Helper()
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, string(body)
	}
	// overview checks the Overview: one broker, reached through the SASL_SSL
	// listener (the endpoints Metadata answers are those of the listener asked),
	// and the user topics the principal may describe.
	overview := func(t *testing.T, url string, topics int) {
		t.Helper()
		status, body := get(t, url)
		for _, want := range []string{
			`data-testid="broker-count">1<`,
			fmt.Sprintf(`data-testid="topic-count">%d<`, topics),
			"<td>" + port + "</td>",
			"active controller",
		} {
			if status != http.StatusOK || !strings.Contains(body, want) {
				t.Fatalf("GET %s: %d, want 200 with %q:\n%.2000s", url, status, want, body)
			}
		}
	}

	t.Run("flags", func(t *testing.T) {
		p := startCommand(t, []string{"SAMSA_PASSWORD=alice-secret"},
			"-b", sb.SASLSSL, "--tls-ca", sb.CA.File, "--sasl-mechanism", "SCRAM-SHA-512", "--user", "alice")
		overview(t, p.url, 1)
		status, body := get(t, p.url+"topics")
		if status != http.StatusOK || !strings.Contains(body, ">visible<") || strings.Contains(body, ">hidden<") {
			t.Fatalf("topics as alice: %d, want visible and not hidden:\n%.2000s", status, body)
		}
		status, body = get(t, p.url+"topics/hidden")
		if status == http.StatusOK || !strings.Contains(body, "TOPIC_AUTHORIZATION_FAILED") {
			t.Fatalf("the topic alice may not describe: %d, want an error page naming TOPIC_AUTHORIZATION_FAILED:\n%.2000s", status, body)
		}
		status, body = get(t, p.url+"topics/visible/messages")
		if status != http.StatusOK || !strings.Contains(body, "seen by alice") {
			t.Fatalf("messages of visible as alice: %d:\n%.2000s", status, body)
		}
	})

	t.Run("command-config", func(t *testing.T) {
		props := filepath.Join(t.TempDir(), "admin.properties")
		if err := os.WriteFile(props, []byte(strings.Join([]string{
			"security.protocol=SASL_SSL",
			"sasl.mechanism=PLAIN",
			`sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="admin-secret";`,
			"ssl.truststore.type=PEM",
			"ssl.truststore.location=" + sb.CA.File,
		}, "\n")), 0o600); err != nil {
			t.Fatal(err)
		}
		p := startCommand(t, nil, "-b", sb.SASLSSL, "--command-config", props)
		overview(t, p.url, 2)
	})

	t.Run("wrong password", func(t *testing.T) {
		p := startCommand(t, nil, "-b", sb.SASLSSL, "--tls-ca", sb.CA.File,
			"--sasl-mechanism", "SCRAM-SHA-512", "--user", "alice", "--password", "not-her-password")
		status, body := get(t, p.url)
		if status == http.StatusOK || !strings.Contains(body, "SASL_AUTHENTICATION_FAILED") {
			t.Fatalf("GET / with a wrong password: %d, want an error page naming SASL_AUTHENTICATION_FAILED:\n%.2000s", status, body)
		}
	})
}

// The security flags are checked before anything starts, as for every client command:
// a usage error (exit code 2) names the flag.
func TestCommandRefusesBadSecurityFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--sasl-mechanism", "PLAIN", "--user", "alice"}, "--sasl-mechanism PLAIN needs --user and --password"},
		{[]string{"--tls-key", "key.pem"}, "--tls-key needs --tls-cert"},
		{[]string{"--sasl-mechanism", "GSSAPI", "--user", "alice", "--password", "x"}, "use PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER"},
	} {
		cmd := exec.Command(testutil.SamsaBinary(t), append([]string{"console", "--listen", "127.0.0.1:0"}, tc.args...)...)
		cmd.Env = append(os.Environ(), "SAMSA_PASSWORD=")
		out, err := cmd.CombinedOutput()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 2 || !strings.Contains(string(out), tc.want) {
			t.Errorf("samsa console %s: %v, want exit 2 naming %q:\n%s", strings.Join(tc.args, " "), err, tc.want, out)
		}
	}
}
