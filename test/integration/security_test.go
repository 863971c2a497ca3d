package integration

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	kafkago "github.com/segmentio/kafka-go"
	kgoplain "github.com/segmentio/kafka-go/sasl/plain"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/samsa-streaming/samsa/internal/testutil"
)

// secureClient is a franz-go client for one listener of a SecureBroker.
func secureClient(t testing.TB, addr string, tlsCfg *tls.Config, mech sasl.Mechanism, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	base := []kgo.Opt{kgo.SeedBrokers(addr), kgo.MetadataMinAge(100 * time.Millisecond), kgo.RequestRetries(2),
		kgo.RetryTimeout(5 * time.Second)}
	if tlsCfg != nil {
		base = append(base, kgo.DialTLSConfig(tlsCfg))
	}
	if mech != nil {
		base = append(base, kgo.SASL(mech))
	}
	c, err := kgo.NewClient(append(base, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func roundTripOn(t *testing.T, c *kgo.Client, topic string) {
	t.Helper()
	var recs []*kgo.Record
	for i := range 20 {
		recs = append(recs, &kgo.Record{Topic: topic, Key: fmt.Appendf(nil, "k%d", i), Value: make([]byte, 1024)})
	}
	produceSync(t, c, recs...)
	c.AddConsumeTopics(topic)
	got := 0
	ctx := ctxT(t, 20*time.Second)
	for got < len(recs) {
		fs := c.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %d of %d records: %v", got, len(recs), err)
		}
		fs.EachError(func(topic string, p int32, err error) { t.Fatalf("fetch %s/%d: %v", topic, p, err) })
		got += fs.NumRecords()
	}
}

var secureUsers = testutil.SecureOptions{
	PlainUsers: map[string]string{"admin": "admin-secret", "alice": "alice-secret"},
	ScramUsers: map[string]string{"carol": "carol-secret"},
}

// Every listener and mechanism carries produce and consume for franz-go; sarama and
// kafka-go authenticate too.
func TestSecureListenersWithGoClients(t *testing.T) {
	sb := testutil.StartSecureBroker(t, secureUsers)
	adm := kadm.NewClient(secureClient(t, sb.Plaintext, nil, nil))
	cases := []struct {
		name string
		addr string
		tls  bool
		mech sasl.Mechanism
	}{
		{"SASL_PLAINTEXT-PLAIN", sb.SASLPlaintext, false, plain.Auth{User: "alice", Pass: "alice-secret"}.AsMechanism()},
		{"SASL_PLAINTEXT-SCRAM-SHA-256", sb.SASLPlaintext, false, scram.Auth{User: "carol", Pass: "carol-secret"}.AsSha256Mechanism()},
		{"SASL_SSL-SCRAM-SHA-512", sb.SASLSSL, true, scram.Auth{User: "carol", Pass: "carol-secret"}.AsSha512Mechanism()},
		{"SASL_SSL-PLAIN", sb.SASLSSL, true, plain.Auth{User: "alice", Pass: "alice-secret"}.AsMechanism()},
		{"SSL", sb.SSL, true, nil},
	}
	for _, tc := range cases {
		t.Run("franz-go/"+tc.name, func(t *testing.T) {
			topic := "sec-" + tc.name
			createTopic(t, adm, topic, 2, nil)
			var tlsCfg *tls.Config
			if tc.tls {
				tlsCfg = sb.ClientTLS(t, "")
			}
			roundTripOn(t, secureClient(t, tc.addr, tlsCfg, tc.mech), topic)
		})
	}
	t.Run("franz-go/wrong-password", func(t *testing.T) {
		c := secureClient(t, sb.SASLPlaintext, nil, scram.Auth{User: "carol", Pass: "nope"}.AsSha256Mechanism())
		err := c.Ping(ctxT(t, 10*time.Second))
		if !errors.Is(err, kerr.SaslAuthenticationFailed) {
			t.Fatalf("ping with a wrong password: %v", err)
		}
	})
	t.Run("sarama/SASL_SSL-SCRAM-SHA-256", func(t *testing.T) {
		topic := "sec-sarama"
		createTopic(t, adm, topic, 1, nil)
		cfg := sarama.NewConfig()
		cfg.Version = sarama.V2_8_0_0
		cfg.Producer.Return.Successes = true
		cfg.Net.TLS.Enable, cfg.Net.TLS.Config = true, sb.ClientTLS(t, "")
		cfg.Net.SASL.Enable, cfg.Net.SASL.Mechanism = true, sarama.SASLTypeSCRAMSHA256
		cfg.Net.SASL.User, cfg.Net.SASL.Password = "carol", "carol-secret"
		cfg.Net.SASL.SCRAMClientGeneratorFunc = func() sarama.SCRAMClient { return &saramaScram{} }
		p, err := sarama.NewSyncProducer([]string{sb.SASLSSL}, cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		if _, _, err := p.SendMessage(&sarama.ProducerMessage{Topic: topic, Value: sarama.StringEncoder("from sarama")}); err != nil {
			t.Fatal(err)
		}
		cfg.Net.SASL.Mechanism, cfg.Net.SASL.User, cfg.Net.SASL.Password = sarama.SASLTypePlaintext, "alice", "alice-secret"
		cons, err := sarama.NewConsumer([]string{sb.SASLSSL}, cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer cons.Close()
		pc, err := cons.ConsumePartition(topic, 0, sarama.OffsetOldest)
		if err != nil {
			t.Fatal(err)
		}
		defer pc.Close()
		select {
		case m := <-pc.Messages():
			if string(m.Value) != "from sarama" {
				t.Fatalf("read %q", m.Value)
			}
		case <-time.After(20 * time.Second):
			t.Fatal("no message")
		}
	})
	t.Run("kafka-go/SASL_SSL-PLAIN", func(t *testing.T) {
		topic := "sec-kafka-go"
		createTopic(t, adm, topic, 1, nil)
		transport := &kafkago.Transport{TLS: sb.ClientTLS(t, ""), SASL: kgoplain.Mechanism{Username: "alice", Password: "alice-secret"}}
		w := &kafkago.Writer{Addr: kafkago.TCP(sb.SASLSSL), Topic: topic, Transport: transport, RequiredAcks: kafkago.RequireAll}
		defer w.Close()
		if err := w.WriteMessages(ctxT(t, 20*time.Second), kafkago.Message{Value: []byte("from kafka-go")}); err != nil {
			t.Fatal(err)
		}
		dialer := &kafkago.Dialer{Timeout: 10 * time.Second, TLS: sb.ClientTLS(t, ""), SASLMechanism: kgoplain.Mechanism{Username: "alice", Password: "alice-secret"}}
		r := kafkago.NewReader(kafkago.ReaderConfig{Brokers: []string{sb.SASLSSL}, Topic: topic, Dialer: dialer, MaxWait: 100 * time.Millisecond})
		defer r.Close()
		m, err := r.ReadMessage(ctxT(t, 20*time.Second))
		if err != nil || string(m.Value) != "from kafka-go" {
			t.Fatalf("read %q, %v", m.Value, err)
		}
	})
	t.Run("metadata-answers-the-listener-asked", func(t *testing.T) {
		c := secureClient(t, sb.SASLSSL, sb.ClientTLS(t, ""), plain.Auth{User: "alice", Pass: "alice-secret"}.AsMechanism())
		brokers, err := kadm.NewClient(c).ListBrokers(ctxT(t, 10*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		if len(brokers) != 1 || net.JoinHostPort(brokers[0].Host, fmt.Sprint(brokers[0].Port)) != sb.SASLSSL {
			t.Fatalf("brokers %+v, want the SASL_SSL listener %s", brokers, sb.SASLSSL)
		}
	})
}

// saramaScram adapts franz-go's SCRAM-SHA-256 client to sarama's SCRAMClient.
type saramaScram struct {
	session sasl.Session
	user    string
	pass    string
	done    bool
}

func (s *saramaScram) Begin(user, pass, _ string) error { s.user, s.pass = user, pass; return nil }

func (s *saramaScram) Step(challenge string) (string, error) {
	if s.session == nil {
		auth := scram.Auth{User: s.user, Pass: s.pass}
		session, first, err := auth.AsSha256Mechanism().Authenticate(context.Background(), "")
		s.session = session
		return string(first), err
	}
	done, next, err := s.session.Challenge([]byte(challenge))
	s.done = done
	return string(next), err
}

func (s *saramaScram) Done() bool { return s.done }

// With the StandardAuthorizer: allow, deny, prefixed and DENY-wins cases per API
// family, mTLS principals, SCRAM users made with AlterUserScramCredentials, quotas —
// and all of it still there after a restart.
func TestAuthorizationAndPersistence(t *testing.T) {
	t.Parallel()
	opts := secureUsers
	opts.ClientAuth = "required"
	opts.Overrides = []string{
		"authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
		"super.users=User:admin",
	}
	sb := testutil.StartSecureBroker(t, opts)
	adminClient := secureClient(t, sb.SASLPlaintext, nil, plain.Auth{User: "admin", Pass: "admin-secret"}.AsMechanism())
	admin := kadm.NewClient(adminClient)
	ctx := ctxT(t, 60*time.Second)
	for _, topic := range []string{"orders", "logs-app", "logs-deny", "secret"} {
		createTopic(t, admin, topic, 1, nil)
	}
	frank := "User:CN=frank,O=Samsa"
	acls := kadm.NewACLs().Allow("User:alice").Topics("orders").Operations(kadm.OpRead, kadm.OpWrite).ResourcePatternType(kadm.ACLPatternLiteral)
	results, err := admin.CreateACLs(ctx, acls)
	checkACLResults(t, results, err)
	more := []*kadm.ACLBuilder{
		kadm.NewACLs().Allow("User:alice").Topics("logs-").Operations(kadm.OpAll).ResourcePatternType(kadm.ACLPatternPrefixed),
		kadm.NewACLs().Deny("User:alice").Topics("logs-deny").Operations(kadm.OpWrite).ResourcePatternType(kadm.ACLPatternLiteral),
		kadm.NewACLs().Allow("User:alice").Groups("g1", "k848", "sg-ok").Operations(kadm.OpRead).ResourcePatternType(kadm.ACLPatternLiteral),
		kadm.NewACLs().Allow(frank).Topics("orders").Operations(kadm.OpWrite).ResourcePatternType(kadm.ACLPatternLiteral),
	}
	for _, b := range more {
		results, err := admin.CreateACLs(ctx, b)
		checkACLResults(t, results, err)
	}
	if _, err := admin.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "dave", Mechanism: kadm.ScramSha512, Iterations: 8192, Password: "dave-secret"}}); err != nil {
		t.Fatal(err)
	}
	quota := 1048576.0
	if _, err := admin.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{
		Entity: []kadm.ClientQuotaEntityComponent{{Type: "user", Name: kadm.StringPtr("alice")}},
		Ops:    []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: quota}},
	}}); err != nil {
		t.Fatal(err)
	}

	// Share group sg-ok starts at the earliest offset (the admin may alter group configs).
	shareCfg := kmsg.NewPtrIncrementalAlterConfigsRequest()
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeGroupConfig, "sg-ok"
	cfg := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	cfg.Name, cfg.Value = "share.auto.offset.reset", kmsg.StringPtr("earliest")
	res.Configs = append(res.Configs, cfg)
	shareCfg.Resources = append(shareCfg.Resources, res)
	if resp, err := shareCfg.RequestWith(ctx, adminClient); err != nil || resp.Resources[0].ErrorCode != 0 {
		t.Fatalf("share group config: %+v, %v", resp, err)
	}

	check := func(t *testing.T) {
		alice := secureClient(t, sb.SASLPlaintext, nil, plain.Auth{User: "alice", Pass: "alice-secret"}.AsMechanism(),
			kgo.ConsumerGroup("g1"), kgo.ConsumeTopics("orders"), kgo.DisableIdempotentWrite())
		actx := ctxT(t, 30*time.Second)
		produce := func(topic string) error {
			return alice.ProduceSync(actx, &kgo.Record{Topic: topic, Value: []byte("x")}).FirstErr()
		}
		if err := produce("orders"); err != nil {
			t.Fatalf("literal ALLOW: %v", err)
		}
		if err := produce("logs-app"); err != nil {
			t.Fatalf("prefixed ALLOW ALL: %v", err)
		}
		if err := produce("logs-deny"); !errors.Is(err, kerr.TopicAuthorizationFailed) {
			t.Fatalf("DENY wins over a prefixed ALLOW: %v", err)
		}
		if err := produce("secret"); !errors.Is(err, kerr.TopicAuthorizationFailed) {
			t.Fatalf("no ACL: %v", err)
		}
		// Metadata hides what alice may not describe.
		topics, err := kadm.NewClient(alice).ListTopics(actx)
		if err != nil {
			t.Fatal(err)
		}
		if topics.Has("secret") || !topics.Has("orders") || !topics.Has("logs-app") {
			t.Fatalf("alice sees %v", topics.Names())
		}
		// Her group consumes; another group is refused.
		fs := alice.PollRecords(actx, 1)
		if errs := fs.Errors(); len(errs) > 0 || fs.NumRecords() == 0 {
			t.Fatalf("consume in g1: %d records, %v", fs.NumRecords(), errs)
		}
		if err := alice.CommitUncommittedOffsets(actx); err != nil {
			t.Fatalf("commit in g1: %v", err)
		}
		_, err = kadm.NewClient(alice).FetchOffsets(actx, "g2")
		if !errors.Is(err, kerr.GroupAuthorizationFailed) {
			t.Fatalf("offsets of g2: %v", err)
		}
		// KIP-848 and share groups: READ on the group.
		for _, tc := range []struct {
			name  string
			opts  []kgo.Opt
			allow bool
		}{
			{"KIP-848 group k848", []kgo.Opt{kgo.ConsumerGroup("k848"), kgo.ServerSideBalancer()}, true},
			{"KIP-848 group k849", []kgo.Opt{kgo.ConsumerGroup("k849"), kgo.ServerSideBalancer()}, false},
			{"share group sg-ok", []kgo.Opt{kgo.ShareGroup("sg-ok")}, true},
			{"share group sg-no", []kgo.Opt{kgo.ShareGroup("sg-no")}, false},
		} {
			c := secureClient(t, sb.SASLPlaintext, nil, plain.Auth{User: "alice", Pass: "alice-secret"}.AsMechanism(),
				append(tc.opts, kgo.ConsumeTopics("orders"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))...)
			gctx := ctxT(t, 20*time.Second)
			var got int
			var gerr error
			for got == 0 && gerr == nil && gctx.Err() == nil {
				fs := c.PollRecords(gctx, 10)
				got = fs.NumRecords()
				fs.EachError(func(_ string, _ int32, err error) {
					if !errors.Is(err, context.DeadlineExceeded) {
						gerr = err
					}
				})
			}
			switch {
			case tc.allow && got == 0:
				t.Errorf("%s: no records (%v)", tc.name, gerr)
			case !tc.allow && !errors.Is(gerr, kerr.GroupAuthorizationFailed):
				t.Errorf("%s: %d records, error %v; want GROUP_AUTHORIZATION_FAILED", tc.name, got, gerr)
			}
			c.Close()
		}
		// Admin APIs need the cluster.
		describe := kmsg.NewPtrDescribeACLsRequest()
		describe.ResourceType, describe.ResourcePatternType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny
		describe.Operation, describe.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
		if dr, err := describe.RequestWith(actx, alice); err != nil || dr.ErrorCode != kerr.ClusterAuthorizationFailed.Code {
			t.Fatalf("alice describing ACLs: %+v, %v", dr, err)
		}
		// UnregisterBroker needs ALTER on the cluster; the admin's reaches the controller.
		unregister := kmsg.NewPtrUnregisterBrokerRequest()
		unregister.BrokerID = 99
		if ur, err := unregister.RequestWith(actx, alice); err != nil || ur.ErrorCode != kerr.ClusterAuthorizationFailed.Code {
			t.Fatalf("alice unregistering broker 99: %+v, %v", ur, err)
		}
		if ur, err := unregister.RequestWith(actx, adminClient); err != nil || ur.ErrorCode != kerr.BrokerIDNotRegistered.Code {
			t.Fatalf("admin unregistering broker 99: %+v, %v; want BROKER_ID_NOT_REGISTERED", ur, err)
		}
		res, err := kadm.NewClient(alice).CreateTopics(actx, 1, 1, nil, "alices-own")
		if err != nil || !errors.Is(res["alices-own"].Err, kerr.TopicAuthorizationFailed) {
			t.Fatalf("alice creating a topic: %v %v", err, res["alices-own"].Err)
		}
		// dave, made with AlterUserScramCredentials, logs in with SCRAM and has no ACL.
		dave := secureClient(t, sb.SASLSSL, sb.ClientTLS(t, ""), scram.Auth{User: "dave", Pass: "dave-secret"}.AsSha512Mechanism(), kgo.DisableIdempotentWrite())
		if err := dave.ProduceSync(actx, &kgo.Record{Topic: "orders", Value: []byte("x")}).FirstErr(); !errors.Is(err, kerr.TopicAuthorizationFailed) {
			t.Fatalf("dave without ACLs: %v", err)
		}
		// frank's certificate is his principal on the SSL listener.
		frankClient := secureClient(t, sb.SSL, sb.ClientTLS(t, "frank"), nil, kgo.DisableIdempotentWrite())
		if err := frankClient.ProduceSync(actx, &kgo.Record{Topic: "orders", Value: []byte("x")}).FirstErr(); err != nil {
			t.Fatalf("frank (mTLS) writing orders: %v", err)
		}
		if err := frankClient.ProduceSync(actx, &kgo.Record{Topic: "logs-app", Value: []byte("x")}).FirstErr(); !errors.Is(err, kerr.TopicAuthorizationFailed) {
			t.Fatalf("frank writing logs-app: %v", err)
		}
		// The admin sees the ACLs, the credential and the quota.
		described, err := describe.RequestWith(actx, adminClient)
		if err != nil || described.ErrorCode != 0 {
			t.Fatalf("describe ACLs: %+v, %v", described, err)
		}
		n := 0
		for _, r := range described.Resources {
			n += len(r.ACLs)
		}
		if n != 8 {
			t.Fatalf("%d ACLs described, want 8: %+v", n, described.Resources)
		}
		users, err := admin.DescribeUserSCRAMs(actx, "dave")
		if err != nil || len(users["dave"].CredInfos) != 1 || users["dave"].CredInfos[0].Iterations != 8192 {
			t.Fatalf("dave's SCRAM credentials: %+v, %v", users, err)
		}
		quotas, err := admin.DescribeClientQuotas(actx, false, []kadm.DescribeClientQuotaComponent{{Type: "user", MatchName: kadm.StringPtr("alice"), MatchType: 0}})
		if err != nil || len(quotas) != 1 || quotas[0].Values[0].Value != quota {
			t.Fatalf("alice's quota: %+v, %v", quotas, err)
		}
	}
	t.Run("before-restart", check)
	sb.Restart(t)
	adminClient = secureClient(t, sb.SASLPlaintext, nil, plain.Auth{User: "admin", Pass: "admin-secret"}.AsMechanism())
	admin = kadm.NewClient(adminClient)
	t.Run("after-restart", check)
	if log := sb.Log(); !strings.Contains(log, "logger=kafka.authorizer.logger") || !strings.Contains(log, "result=Denied") {
		t.Errorf("no denial in the authorization log")
	}
}

func checkACLResults(t *testing.T, results kadm.CreateACLsResults, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range results {
		if r.Err != nil {
			t.Fatalf("create ACL %+v: %v", r, r.Err)
		}
	}
}

// franz-go's own SCRAM tests (pkg/kgo TestSCRAMAuth, TestSCRAMAuthBadCredentials),
// run against Samsa through the environment variables they read.
func TestFranzGoOwnSCRAMTests(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs franz-go's kgo tests")
	}
	sb := testutil.StartSecureBroker(t, secureUsers)
	for _, bits := range []string{"256", "512"} {
		cmd := exec.Command("go", "test", "github.com/twmb/franz-go/pkg/kgo", "-run", "^TestSCRAMAuth", "-count=1", "-v")
		cmd.Dir = testutil.RepoRoot()
		cmd.Env = append(os.Environ(), "KGO_SEEDS="+sb.Plaintext, "KGO_TEST_SCRAM_SEEDS="+sb.SASLPlaintext,
			"KGO_TEST_SCRAM=carol:carol-secret:"+bits)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("franz-go's SCRAM tests (SHA-%s): %v\n%s", bits, err, out)
		}
		for _, test := range []string{"--- PASS: TestSCRAMAuth ", "--- PASS: TestSCRAMAuthBadCredentials "} {
			if !strings.Contains(string(out), test) {
				t.Fatalf("franz-go's SCRAM tests (SHA-%s) did not pass %s:\n%s", bits, test, out)
			}
		}
	}
}
