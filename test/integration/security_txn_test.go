package integration

import (
	"errors"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/samsa-streaming/samsa/internal/testutil"
)

// TestTransactionAuthorization: the transaction APIs under the StandardAuthorizer
// check what Kafka's KafkaApis checks. alice may write transactional id tx-ok and
// topic txn-data and read group g-ok; she may only describe tx-describe and group
// g-describe; txn-secret and tx-admin are the admin's alone.
func TestTransactionAuthorization(t *testing.T) {
	opts := secureUsers
	opts.PlainUsers = map[string]string{"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret"}
	opts.Overrides = []string{
		"authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
		"super.users=User:admin",
	}
	sb := testutil.StartSecureBroker(t, opts)
	login := func(user string, o ...kgo.Opt) *kgo.Client {
		return secureClient(t, sb.SASLPlaintext, nil, plain.Auth{User: user, Pass: user + "-secret"}.AsMechanism(), o...)
	}
	admin := kadm.NewClient(login("admin"))
	ctx := ctxT(t, 120*time.Second)
	for _, topic := range []string{"txn-data", "txn-shown", "txn-secret", "txn-markers"} {
		createTopic(t, admin, topic, 1, nil)
	}
	for _, b := range []*kadm.ACLBuilder{
		kadm.NewACLs().Allow("User:alice").TransactionalIDs("tx-ok", "tx-raw").Operations(kadm.OpWrite),
		kadm.NewACLs().Allow("User:alice").TransactionalIDs("tx-describe").Operations(kadm.OpDescribe),
		kadm.NewACLs().Allow("User:alice").Topics("txn-data").Operations(kadm.OpRead, kadm.OpWrite),
		kadm.NewACLs().Allow("User:alice").Topics("txn-shown").Operations(kadm.OpRead),
		// Allowed, yet no client adds an internal topic to a transaction itself.
		kadm.NewACLs().Allow("User:alice").Topics("__consumer_offsets").Operations(kadm.OpWrite),
		kadm.NewACLs().Allow("User:alice").Groups("g-ok").Operations(kadm.OpRead),
		kadm.NewACLs().Allow("User:alice").Groups("g-describe").Operations(kadm.OpDescribe),
		kadm.NewACLs().Allow("User:bob").Clusters().Operations(kadm.OpAlter),
	} {
		results, err := admin.CreateACLs(ctx, b.ResourcePatternType(kadm.ACLPatternLiteral))
		checkACLResults(t, results, err)
	}
	alice := login("alice")
	// A client's AddPartitionsToTxn is v3 at most (franz-go sends a request at the
	// highest version both sides know).
	aliceV3 := login("alice", kgo.MaxVersions(func() *kversion.Versions {
		v := kversion.Stable()
		v.SetMaxKeyVersion(int16(kmsg.AddPartitionsToTxn), 3)
		return v
	}()))
	// Raw requests go straight to the single broker (no FindCoordinator first), so
	// each answer is the API's own.
	send := func(c *kgo.Client, req kmsg.Request) kmsg.Response {
		t.Helper()
		resp, err := c.SeedBrokers()[0].Request(ctx, req)
		if err != nil {
			t.Fatalf("%s: %v", kmsg.NameForKey(req.Key()), err)
		}
		return resp
	}

	// commit is a TxnOffsetCommit of offset 1 of partition 0 of topics into group.
	listed, err := admin.ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	commit := func(id string, producerID int64, epoch int16, group string, topics ...string) map[string]int16 {
		req := kmsg.NewPtrTxnOffsetCommitRequest()
		// Sent at v6 (transactions v2: the request adds the group's partition itself;
		// topics by id, authorized once resolved), as franz-go sends it.
		req.TransactionalID, req.Group, req.ProducerID, req.ProducerEpoch = id, group, producerID, epoch
		req.Generation = -1
		names := map[[16]byte]string{}
		for _, topic := range topics {
			rt := kmsg.NewTxnOffsetCommitRequestTopic()
			rt.Topic, rt.TopicID = topic, listed[topic].ID
			names[rt.TopicID] = topic
			rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
			rp.Partition, rp.Offset = 0, 1
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
		}
		codes := map[string]int16{}
		for _, rt := range send(alice, req).(*kmsg.TxnOffsetCommitResponse).Topics {
			for _, p := range rt.Partitions {
				codes[names[rt.TopicID]] = p.ErrorCode
			}
		}
		return codes
	}
	t.Run("commit-and-read-committed", func(t *testing.T) { // (a)
		for _, tv := range txnVersions {
			p := login("alice", append([]kgo.Opt{kgo.TransactionalID("tx-ok"), kgo.TransactionTimeout(30 * time.Second),
				kgo.RecordPartitioner(kgo.ManualPartitioner())}, tv.opts...)...)
			inTxn(t, p, true, recordsTo("txn-data", 0, tv.name+"-1", tv.name+"-2")...)
			inTxn(t, p, false, recordsTo("txn-data", 0, tv.name+"-aborted")...)
		}
		c := login("alice", kgo.ConsumeTopics("txn-data"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
			kgo.FetchIsolationLevel(kgo.ReadCommitted()))
		var got []string
		for len(got) < 4 {
			fs := c.PollFetches(ctx)
			if ctx.Err() != nil {
				t.Fatalf("read_committed got %q before the deadline", got)
			}
			fs.EachError(func(topic string, p int32, err error) { t.Fatalf("fetch %s/%d: %v", topic, p, err) })
			fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
		}
		if want := []string{"v2-1", "v2-2", "v1-1", "v1-2"}; !slices.Equal(got, want) {
			t.Fatalf("read_committed: %q, want %q", got, want)
		}
	})

	t.Run("transactional-id-write", func(t *testing.T) { // (b)
		init := kmsg.NewPtrInitProducerIDRequest()
		init.TransactionalID, init.TransactionTimeoutMillis = kmsg.StringPtr("tx-describe"), 30000
		if r := send(alice, init).(*kmsg.InitProducerIDResponse); r.ErrorCode != kerr.TransactionalIDAuthorizationFailed.Code || r.ProducerID != -1 {
			t.Fatalf("InitProducerId without WRITE on the transactional id: %v, producer id %d", kerr.ErrorForCode(r.ErrorCode), r.ProducerID)
		}
		p := login("alice", kgo.TransactionalID("tx-describe"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
		err := p.BeginTransaction() // franz-go asks for its producer id here
		if err == nil {
			err = p.ProduceSync(ctx, recordsTo("txn-data", 0, "never")...).FirstErr()
		}
		if !errors.Is(err, kerr.TransactionalIDAuthorizationFailed) {
			t.Fatalf("franz-go producer without WRITE on its transactional id: %v", err)
		}
		// Kafka checks the transactional id of a Produce only when it carries
		// transactional batches.
		noWrite := "tx-describe"
		if code := produceRawAs(t, alice, &noWrite, "txn-data", txnBatch(1, 0, 0, "never")).ErrorCode; code != kerr.TransactionalIDAuthorizationFailed.Code {
			t.Fatalf("transactional produce without WRITE on its transactional id: %v", kerr.ErrorForCode(code))
		}
		if code := produceRawAs(t, alice, &noWrite, "txn-data", rawBatch(-1, -1, -1, "plain")).ErrorCode; code != 0 {
			t.Fatalf("plain produce naming a transactional id it may not write: %v", kerr.ErrorForCode(code))
		}
		end := kmsg.NewPtrEndTxnRequest()
		end.TransactionalID, end.ProducerID, end.ProducerEpoch = "tx-describe", 1, 0
		if r := send(alice, end).(*kmsg.EndTxnResponse); r.ErrorCode != kerr.TransactionalIDAuthorizationFailed.Code {
			t.Fatalf("EndTxn without WRITE on the transactional id: %v", kerr.ErrorForCode(r.ErrorCode))
		}
		add := addPartitionsV3("tx-describe", 1, 0, "txn-data")
		if code := addPartitionCodes(send(aliceV3, add))["txn-data"]; code != kerr.TransactionalIDAuthorizationFailed.Code {
			t.Fatalf("AddPartitionsToTxn without WRITE on the transactional id: %v", kerr.ErrorForCode(code))
		}
		if got, want := commit("tx-describe", 1, 0, "g-ok", "txn-data"), map[string]int16{"txn-data": kerr.TransactionalIDAuthorizationFailed.Code}; !equalCodes(got, want) {
			t.Fatalf("TxnOffsetCommit without WRITE on the transactional id: %v", got)
		}
		offsets := kmsg.NewPtrAddOffsetsToTxnRequest()
		offsets.TransactionalID, offsets.ProducerID, offsets.Group = "tx-describe", 1, "g-ok"
		if r := send(alice, offsets).(*kmsg.AddOffsetsToTxnResponse); r.ErrorCode != kerr.TransactionalIDAuthorizationFailed.Code {
			t.Fatalf("AddOffsetsToTxn without WRITE on the transactional id: %v", kerr.ErrorForCode(r.ErrorCode))
		}
	})

	// tx-raw's producer, for the raw requests below.
	init := kmsg.NewPtrInitProducerIDRequest()
	init.TransactionalID, init.TransactionTimeoutMillis = kmsg.StringPtr("tx-raw"), 30000
	pid := send(alice, init).(*kmsg.InitProducerIDResponse)
	if pid.ErrorCode != 0 {
		t.Fatalf("InitProducerId tx-raw: %v", kerr.ErrorForCode(pid.ErrorCode))
	}

	t.Run("topic-write", func(t *testing.T) { // (c)
		add := addPartitionsV3("tx-raw", pid.ProducerID, pid.ProducerEpoch, "txn-secret", "txn-data", "__consumer_offsets")
		want := map[string]int16{
			"txn-secret":         kerr.TopicAuthorizationFailed.Code,
			"__consumer_offsets": kerr.TopicAuthorizationFailed.Code, // internal, whatever the ACLs say
			"txn-data":           kerr.OperationNotAttempted.Code,
		}
		if got := addPartitionCodes(send(aliceV3, add)); !equalCodes(got, want) {
			t.Fatalf("AddPartitionsToTxn with a topic alice may not write: %v, want %v", got, want)
		}
		// The batched versions are the brokers' own: CLUSTER_ACTION, even for one
		// client transaction.
		batched := kmsg.NewPtrAddPartitionsToTxnRequest() // sent at v5
		rt := kmsg.NewAddPartitionsToTxnRequestTransaction()
		rt.TransactionalID, rt.ProducerID, rt.ProducerEpoch = "tx-raw", pid.ProducerID, pid.ProducerEpoch
		rt.Topics = []kmsg.AddPartitionsToTxnRequestTransactionTopic{{Topic: "txn-data", Partitions: []int32{0}}}
		batched.Transactions = append(batched.Transactions, rt)
		if r := send(alice, batched).(*kmsg.AddPartitionsToTxnResponse); r.ErrorCode != kerr.ClusterAuthorizationFailed.Code || len(r.Transactions) != 0 {
			t.Fatalf("AddPartitionsToTxn v5 from a client: %v, %+v", kerr.ErrorForCode(r.ErrorCode), r.Transactions)
		}
		rt.VerifyOnly = true
		batched.Transactions = []kmsg.AddPartitionsToTxnRequestTransaction{rt}
		if r := send(login("admin"), batched).(*kmsg.AddPartitionsToTxnResponse); r.ErrorCode != 0 || len(r.Transactions) != 1 {
			t.Fatalf("AddPartitionsToTxn v5 from a super user: %v, %+v", kerr.ErrorForCode(r.ErrorCode), r.Transactions)
		}
	})

	t.Run("group-read", func(t *testing.T) { // (d)
		// The group coordinator is loaded once alice can fetch g-ok's offsets.
		if _, err := kadm.NewClient(alice).FetchOffsets(ctx, "g-ok"); err != nil {
			t.Fatal(err)
		}
		if got, want := commit("tx-raw", pid.ProducerID, pid.ProducerEpoch, "g-describe", "txn-data"), map[string]int16{"txn-data": kerr.GroupAuthorizationFailed.Code}; !equalCodes(got, want) {
			t.Fatalf("TxnOffsetCommit into a group alice may not read: %v", got)
		}
		offsets := kmsg.NewPtrAddOffsetsToTxnRequest()
		offsets.TransactionalID, offsets.ProducerID, offsets.ProducerEpoch, offsets.Group = "tx-raw", pid.ProducerID, pid.ProducerEpoch, "g-describe"
		if r := send(alice, offsets).(*kmsg.AddOffsetsToTxnResponse); r.ErrorCode != kerr.GroupAuthorizationFailed.Code {
			t.Fatalf("AddOffsetsToTxn for a group alice may not read: %v", kerr.ErrorForCode(r.ErrorCode))
		}
		// Her own group commits; a topic she may not read is refused alone.
		want := map[string]int16{"txn-data": 0, "txn-secret": kerr.TopicAuthorizationFailed.Code}
		if got := commit("tx-raw", pid.ProducerID, pid.ProducerEpoch, "g-ok", "txn-data", "txn-secret"); !equalCodes(got, want) {
			t.Fatalf("TxnOffsetCommit into g-ok: %v, want %v", got, want)
		}
		end := kmsg.NewPtrEndTxnRequest()
		end.SetVersion(5)
		end.TransactionalID, end.ProducerID, end.ProducerEpoch = "tx-raw", pid.ProducerID, pid.ProducerEpoch
		if r := send(alice, end).(*kmsg.EndTxnResponse); r.ErrorCode != 0 {
			t.Fatalf("EndTxn (abort) of tx-raw: %v", kerr.ErrorForCode(r.ErrorCode))
		}
	})

	t.Run("write-txn-markers", func(t *testing.T) { // (e)
		markers := kmsg.NewPtrWriteTxnMarkersRequest()
		m := kmsg.NewWriteTxnMarkersRequestMarker()
		m.ProducerID, m.ProducerEpoch, m.CoordinatorEpoch = pid.ProducerID, pid.ProducerEpoch, 0
		m.Topics = []kmsg.WriteTxnMarkersRequestMarkerTopic{{Topic: "txn-markers", Partitions: []int32{0}}}
		markers.Markers = append(markers.Markers, m)
		code := func(user string) int16 {
			r := send(login(user), markers).(*kmsg.WriteTxnMarkersResponse)
			if len(r.Markers) != 1 || len(r.Markers[0].Topics) != 1 || len(r.Markers[0].Topics[0].Partitions) != 1 {
				t.Fatalf("WriteTxnMarkers from %s: %+v", user, r.Markers)
			}
			return r.Markers[0].Topics[0].Partitions[0].ErrorCode
		}
		if c := code("alice"); c != kerr.ClusterAuthorizationFailed.Code {
			t.Fatalf("WriteTxnMarkers from alice: %v", kerr.ErrorForCode(c))
		}
		// ALTER on the cluster is what an administrator aborting a hanging
		// transaction has; the brokers have CLUSTER_ACTION.
		if c := code("bob"); c != 0 {
			t.Fatalf("WriteTxnMarkers from bob (ALTER on the cluster): %v", kerr.ErrorForCode(c))
		}
	})

	t.Run("describe-and-list", func(t *testing.T) { // (f)
		// tx-describe is open, in txn-shown (alice may describe it) and txn-secret
		// (she may not); tx-admin is the admin's.
		for _, id := range []string{"tx-describe", "tx-admin"} {
			p := login("admin", kgo.TransactionalID(id), kgo.RecordPartitioner(kgo.ManualPartitioner()))
			if err := p.BeginTransaction(); err != nil {
				t.Fatal(err)
			}
			produceSync(t, p, append(recordsTo("txn-shown", 0, "open"), recordsTo("txn-secret", 0, "open")...)...)
		}
		described, err := kadm.NewClient(alice).DescribeTransactions(ctx, "tx-describe")
		if err != nil {
			t.Fatal(err)
		}
		d := described["tx-describe"]
		if d.Err != nil || d.State != "Ongoing" || !slices.Equal(d.Topics.Topics(), []string{"txn-shown"}) {
			t.Fatalf("alice describing tx-describe: state %s, topics %v, %v", d.State, d.Topics.Topics(), d.Err)
		}
		req := kmsg.NewPtrDescribeTransactionsRequest()
		req.TransactionalIDs = []string{"tx-admin", "tx-ok"}
		r := send(alice, req).(*kmsg.DescribeTransactionsResponse)
		if len(r.TransactionStates) != 2 || r.TransactionStates[0].ErrorCode != kerr.TransactionalIDAuthorizationFailed.Code ||
			r.TransactionStates[1].ErrorCode != 0 || r.TransactionStates[1].ProducerID < 0 {
			t.Fatalf("alice describing tx-admin and tx-ok: %+v", r.TransactionStates)
		}
		adminSees, err := admin.DescribeTransactions(ctx, "tx-describe")
		if err != nil || len(adminSees["tx-describe"].Topics) != 2 {
			t.Fatalf("admin describing tx-describe: %+v, %v", adminSees, err)
		}
		listed, err := kadm.NewClient(alice).ListTransactions(ctx, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := slices.Sorted(maps.Keys(listed)), []string{"tx-describe", "tx-ok", "tx-raw"}; !slices.Equal(got, want) {
			t.Fatalf("alice lists %v, want %v", got, want)
		}
		all, err := admin.ListTransactions(ctx, nil, nil)
		if err != nil || len(all) != 4 {
			t.Fatalf("admin lists %v, %v", all, err)
		}
	})
}

// addPartitionsV3 is a client's AddPartitionsToTxn (v3) of partition 0 of topics.
func addPartitionsV3(id string, producerID int64, epoch int16, topics ...string) *kmsg.AddPartitionsToTxnRequest {
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	req.SetVersion(3)
	req.TransactionalID, req.ProducerID, req.ProducerEpoch = id, producerID, epoch
	for _, topic := range topics {
		req.Topics = append(req.Topics, kmsg.AddPartitionsToTxnRequestTopic{Topic: topic, Partitions: []int32{0}})
	}
	return req
}

// addPartitionCodes is the code of each topic's partition in a v3 answer.
func addPartitionCodes(resp kmsg.Response) map[string]int16 {
	codes := map[string]int16{}
	for _, t := range resp.(*kmsg.AddPartitionsToTxnResponse).Topics {
		for _, p := range t.Partitions {
			codes[t.Topic] = p.ErrorCode
		}
	}
	return codes
}

func equalCodes(got, want map[string]int16) bool {
	if len(got) != len(want) {
		return false
	}
	for k, v := range want {
		if c, ok := got[k]; !ok || c != v {
			return false
		}
	}
	return true
}
