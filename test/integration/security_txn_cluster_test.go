package integration

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/samsa-streaming/samsa/internal/testutil"
)

// TestSecuredClusterTransactions: on a three-node cluster whose client and
// inter-broker listener wants SASL and whose authorizer admits only ACLs and super
// users, the brokers' own
// requests for transactions — a partition leader asking the coordinator to verify or
// add a partition (AddPartitionsToTxn v5, CLUSTER_ACTION), the coordinator writing
// markers to the leaders (WriteTxnMarkers) — go over the inter-broker listener as the
// nodes' principal, a super user, so a producer allowed only its transactional id
// and topic commits transactions across partitions led by every node. The controller
// listener wants SASL too: the quorum and the brokers' registrations and heartbeats
// log in as the nodes' principal.
func TestSecuredClusterTransactions(t *testing.T) {
	jaas := `org.apache.kafka.common.security.plain.PlainLoginModule required username="broker" password="broker-secret"` +
		` user_broker="broker-secret" user_admin="admin-secret" user_alice="alice-secret";`
	c := testutil.StartCluster(t, testutil.ClusterOptions{Overrides: []string{
		"listener.security.protocol.map=PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:SASL_PLAINTEXT",
		"sasl.enabled.mechanisms=PLAIN",
		"sasl.mechanism.inter.broker.protocol=PLAIN",
		"sasl.mechanism.controller.protocol=PLAIN",
		"listener.name.plaintext.plain.sasl.jaas.config=" + jaas,
		"listener.name.controller.plain.sasl.jaas.config=" + jaas,
		"authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
		"super.users=User:broker;User:admin",
		"offsets.topic.num.partitions=3",
		"transaction.state.log.num.partitions=3",
	}})
	login := func(user string, o ...kgo.Opt) *kgo.Client {
		base := []kgo.Opt{kgo.SeedBrokers(c.BrokerAddrs()...), kgo.MetadataMinAge(100 * time.Millisecond),
			kgo.SASL(plain.Auth{User: user, Pass: user + "-secret"}.AsMechanism())}
		cl, err := kgo.NewClient(append(base, o...)...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return cl
	}
	ctx := ctxT(t, 120*time.Second)
	admin := kadm.NewClient(login("admin"))
	const topic = "secured-txn"
	res, err := admin.CreateTopics(ctx, 3, 3, nil, topic)
	if err == nil {
		err = res[topic].Err
	}
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range []*kadm.ACLBuilder{
		kadm.NewACLs().Allow("User:alice").TransactionalIDs("secured-tx").Operations(kadm.OpWrite),
		kadm.NewACLs().Allow("User:alice").Topics(topic).Operations(kadm.OpRead, kadm.OpWrite),
	} {
		results, err := admin.CreateACLs(ctx, b.ResourcePatternType(kadm.ACLPatternLiteral))
		checkACLResults(t, results, err)
	}
	// The partitions are led by more than one node, so some leader is not the
	// transaction's coordinator.
	var leaders []int32
	testutil.WaitFor(t, 30*time.Second, func() bool {
		md, err := admin.Metadata(ctx, topic)
		if err != nil || len(md.Topics[topic].Partitions) != 3 {
			return false
		}
		leaders = leaders[:0]
		for _, p := range md.Topics[topic].Partitions.Sorted() {
			if p.Leader < 0 {
				return false
			}
			leaders = append(leaders, p.Leader)
		}
		return true
	}, "leaders of "+topic)
	if slices.Min(leaders) == slices.Max(leaders) {
		t.Fatalf("every partition of %s is led by node %d", topic, leaders[0])
	}

	var want []string
	for _, tv := range txnVersions {
		p := login("alice", append([]kgo.Opt{kgo.TransactionalID("secured-tx"), kgo.TransactionTimeout(30 * time.Second),
			kgo.RecordPartitioner(kgo.ManualPartitioner())}, tv.opts...)...)
		for round, commit := range []bool{true, false, true} {
			var recs []*kgo.Record
			for part := range int32(3) {
				v := fmt.Sprintf("%s-%d-%d", tv.name, round, part)
				recs = append(recs, recordsTo(topic, part, v)...)
				if commit {
					want = append(want, v)
				}
			}
			inTxn(t, p, commit, recs...)
		}
	}
	consumer := login("alice", kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	var got []string
	for len(got) < len(want) {
		fs := consumer.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read_committed got %q of %q before the deadline", got, want)
		}
		fs.EachError(func(topic string, p int32, err error) { t.Fatalf("fetch %s/%d: %v", topic, p, err) })
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("read_committed: %q, want %q", got, want)
	}
	// The coordinator completes the commit once every leader wrote its marker.
	testutil.WaitFor(t, 30*time.Second, func() bool {
		described, err := admin.DescribeTransactions(ctx, "secured-tx")
		return err == nil && described["secured-tx"].State == "CompleteCommit"
	}, "secured-tx completing its commit")
}
