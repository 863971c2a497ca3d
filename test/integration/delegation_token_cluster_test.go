package integration

import (
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/samsa-streaming/samsa/internal/testutil"
)

// TestClusterDelegationTokens: on a three-node cluster sharing
// delegation.token.secret.key, a token created through one node authenticates on
// every node (the token is in the metadata log, each node derives its HMAC); with
// the active controller killed (kill -9) it still authenticates on the others and is
// renewed through them by the new active controller; expired at once, it is refused
// by every node.
func TestClusterDelegationTokens(t *testing.T) {
	t.Parallel()
	jaas := `org.apache.kafka.common.security.plain.PlainLoginModule required username="broker" password="broker-secret"` +
		` user_broker="broker-secret" user_alice="alice-secret";`
	c := testutil.StartCluster(t, testutil.ClusterOptions{Overrides: []string{
		"listener.security.protocol.map=PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT",
		"sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-512",
		"sasl.mechanism.inter.broker.protocol=PLAIN",
		"listener.name.plaintext.plain.sasl.jaas.config=" + jaas,
		"delegation.token.secret.key=shared-by-all-nodes",
	}})
	client := func(addr string, o ...kgo.Opt) *kgo.Client {
		cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.RequestRetries(2), kgo.RetryTimeout(5 * time.Second)}, o...)...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return cl
	}
	alice := func(addr string) *kadm.Client {
		return kadm.NewClient(client(addr, kgo.SASL(plain.Auth{User: "alice", Pass: "alice-secret"}.AsMechanism())))
	}
	ctx := ctxT(t, 120*time.Second)
	tok, err := alice(c.Node(1).Addr).CreateDelegationToken(ctx, kadm.CreateDelegationToken{})
	if err != nil {
		t.Fatal(err)
	}
	// onNode is the error of a token client's first request to node id alone.
	onNode := func(id int32) error {
		_, err := kadm.NewClient(client(c.Node(id).Addr, kgo.SASL(tokenAuth(tok, true)))).BrokerMetadata(ctxT(t, 10*time.Second))
		return err
	}
	for _, n := range c.Nodes() {
		testutil.WaitFor(t, 30*time.Second, func() bool { return onNode(n.ID) == nil }, "the token to authenticate on a node")
	}

	q := kmsg.NewPtrDescribeQuorumRequest()
	qt := kmsg.NewDescribeQuorumRequestTopic()
	qt.Topic = "__cluster_metadata"
	qt.Partitions = []kmsg.DescribeQuorumRequestTopicPartition{kmsg.NewDescribeQuorumRequestTopicPartition()}
	q.Topics = append(q.Topics, qt)
	qr, err := q.RequestWith(ctx, client(c.Node(1).Addr, kgo.SASL(plain.Auth{User: "broker", Pass: "broker-secret"}.AsMechanism())))
	if err != nil || qr.ErrorCode != 0 || qr.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("DescribeQuorum: %+v %v", qr, err)
	}
	leader := qr.Topics[0].Partitions[0].LeaderID
	t.Logf("kill -9 node %d, the active controller", leader)
	c.Node(leader).Kill()
	var others []int32
	for _, n := range c.Nodes() {
		if n.ID != leader {
			others = append(others, n.ID)
		}
	}
	for _, id := range others {
		if err := onNode(id); err != nil {
			t.Errorf("the token on node %d with the controller down: %v", id, err)
		}
	}
	var renewed time.Time
	testutil.WaitFor(t, 60*time.Second, func() bool {
		renewed, err = alice(c.Node(others[0]).Addr).RenewDelegationToken(ctxT(t, 10*time.Second), tok.HMAC, time.Hour)
		return err == nil
	}, "a renewal through a surviving node, by the new active controller")
	if renewed.After(time.Now().Add(time.Hour + time.Minute)) {
		t.Errorf("renewed for an hour: expiry %v", renewed)
	}
	c.StartAgain(t, leader)
	if _, err := alice(c.Node(others[1]).Addr).ExpireDelegationToken(ctx, tok.HMAC, -time.Millisecond); err != nil {
		t.Fatal(err)
	}
	for _, n := range c.Nodes() {
		testutil.WaitFor(t, 30*time.Second, func() bool { return errors.Is(onNode(n.ID), kerr.SaslAuthenticationFailed) },
			"the expired token to be refused by a node")
	}
}
