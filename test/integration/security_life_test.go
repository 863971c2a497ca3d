package integration

import (
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/samsa-streaming/samsa/internal/testutil"
)

// TestSecurityChangesReachOpenConnections: ACLs created and deleted while a SCRAM
// client is connected decide its very next request; a changed SCRAM password
// refuses new logins with the old one, and with connections.max.reauth.ms the
// connected client, which re-authenticates with the old one, is cut off (KIP-368).
func TestSecurityChangesReachOpenConnections(t *testing.T) {
	opts := secureUsers
	opts.Overrides = []string{
		"authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
		"super.users=User:admin",
		"connections.max.reauth.ms=2000",
	}
	sb := testutil.StartSecureBroker(t, opts)
	admin := kadm.NewClient(secureClient(t, sb.SASLPlaintext, nil, plain.Auth{User: "admin", Pass: "admin-secret"}.AsMechanism()))
	ctx := ctxT(t, 60*time.Second)
	const topic = "live"
	createTopic(t, admin, topic, 1, nil)
	if _, err := admin.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "erin", Mechanism: kadm.ScramSha256, Iterations: 4096, Password: "old-secret"}}); err != nil {
		t.Fatal(err)
	}
	write := kadm.NewACLs().Allow("User:erin").Topics(topic).Operations(kadm.OpWrite).ResourcePatternType(kadm.ACLPatternLiteral)
	results, err := admin.CreateACLs(ctx, write)
	checkACLResults(t, results, err)

	login := func(pass string) *kgo.Client {
		return secureClient(t, sb.SASLPlaintext, nil, scram.Auth{User: "erin", Pass: pass}.AsSha256Mechanism(),
			kgo.DisableIdempotentWrite(), kgo.RecordRetries(1), kgo.RequestRetries(0))
	}
	erin := login("old-secret")
	produce := func(c *kgo.Client) error {
		return c.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("x")}).FirstErr()
	}
	if err := produce(erin); err != nil {
		t.Fatalf("erin produces with her ACL: %v", err)
	}
	if _, err := admin.DeleteACLs(ctx, kadm.NewACLs().Allow("User:erin").AllowHosts().Topics(topic).Operations(kadm.OpWrite).
		ResourcePatternType(kadm.ACLPatternLiteral)); err != nil {
		t.Fatal(err)
	}
	if err := produce(erin); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("erin's next produce after DeleteAcls: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
	results, err = admin.CreateACLs(ctx, write)
	checkACLResults(t, results, err)
	if err := produce(erin); err != nil {
		t.Fatalf("erin's next produce after CreateAcls: %v", err)
	}

	// A new password: the old one logs in no more, the new one does.
	if _, err := admin.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "erin", Mechanism: kadm.ScramSha256, Iterations: 4096, Password: "new-secret"}}); err != nil {
		t.Fatal(err)
	}
	if err := produce(login("old-secret")); !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Fatalf("a login with the old password: %v, want SASL_AUTHENTICATION_FAILED", err)
	}
	if err := produce(login("new-secret")); err != nil {
		t.Fatalf("a login with the new password: %v", err)
	}
	// The open connection must re-authenticate within the session lifetime; with the
	// old password it cannot, and nothing more is served to it.
	testutil.WaitFor(t, 20*time.Second, func() bool { return produce(erin) != nil },
		"the client of the old password to be cut off once its session ends")
	if err := produce(erin); !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Fatalf("the client of the old password after its session: %v, want SASL_AUTHENTICATION_FAILED", err)
	}
}
