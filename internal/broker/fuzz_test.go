package broker

import (
	"errors"
	"fmt"
	"os"
	"reflect"
	"runtime/metrics"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-streaming/samsa/internal/auth"
	"github.com/samsa-streaming/samsa/internal/config"
	"github.com/samsa-streaming/samsa/internal/protocol"
	"github.com/samsa-streaming/samsa/internal/record"
	"github.com/samsa-streaming/samsa/internal/testutil"
)

// FuzzHandle sends well-framed but hostile requests through the broker's handlers in
// process: the input's key and version choose one of the served APIs (taken modulo
// the served ones when they are not; a negative key, its complement, goes to a second
// broker that checks ACLs, as principal User:fuzz), its body is decoded with kmsg as
// the server does (inputs that do not decode are skipped). Every answer must come
// within a few seconds of the longest wait the request may ask for (waits are capped
// at fuzzMaxWait), must encode at its version and decode again, and a request of at
// most fuzzGuardedSize bytes must not make the process allocate more than
// fuzzAllocLimit while it is served. Answers must also keep a few of Kafka's rules:
// no error code that is UNKNOWN_SERVER_ERROR or no Kafka error, exactly the
// partitions asked for the APIs Kafka answers partition by partition, nothing written
// with acks outside -1, 0 and 1, malformed DeleteTopics entries and repeated config
// resources refused.
//
// One broker serves a whole fuzzing process (a worker), with two topics, a classic
// group with a member, a share group with a member and a transactional producer, so
// that handlers get past their first checks; the authorizing one has the two topics,
// and User:fuzz may do everything on fuzz-a, fuzz-group and fuzz-txn and nothing
// else, so that requests are split between what is allowed and what is not.
// fuzzFixture.refresh keeps them alive and drops the topics inputs created. State
// carries over from one input to the next, so a crasher may need the inputs before
// it: each finding gets its own unit test.
func FuzzHandle(f *testing.F) {
	fx := newFuzzFixture(f)
	for _, key := range servedKeys() {
		e := registry[key]
		for _, version := range []int16{e.min, e.max} {
			body := fx.seed(key, version)
			f.Add(key, version, body)
			f.Add(^key, version, body) // the same to the authorizing broker
			if e.min == e.max {
				break
			}
		}
	}
	f.Fuzz(func(t *testing.T, key, version int16, body []byte) {
		b := fx.b
		if key < 0 {
			b, key = fx.authz, ^key
		}
		key, version = pickAPI(key, version)
		req := kmsg.RequestForKey(key)
		req.SetVersion(version)
		if err := req.ReadFrom(body); err != nil {
			t.Skip("does not decode")
		}
		fx.refresh(t)
		capWaits(reflect.ValueOf(req))
		fx.handle(t, b, req, len(body) <= fuzzGuardedSize)
	})
}

const (
	// fuzzMaxWait caps every wait a fuzzed request may ask for (MaxWaitMillis,
	// TimeoutMillis, rebalance and session timeouts), in milliseconds.
	fuzzMaxWait = 200
	// fuzzSlack is how long after its longest wait an answer must have come.
	fuzzSlack = 5 * time.Second
	// fuzzGuardedSize is the largest request whose allocations are bounded.
	fuzzGuardedSize = 4 << 10
	// fuzzAllocLimit is how much the process may allocate while serving one request
	// of at most fuzzGuardedSize bytes: far above what any such request needs, far
	// below what the background goroutines of an idle broker allocate in fuzzSlack.
	fuzzAllocLimit = 64 << 20
)

// servedKeys lists the served API keys in order.
func servedKeys() []int16 {
	var keys []int16
	for k := range registry {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// pickAPI maps any key and version onto a served key and one of its versions.
func pickAPI(key, version int16) (int16, int16) {
	e, ok := registry[key]
	if !ok {
		keys := servedKeys()
		key = keys[int(uint16(key))%len(keys)]
		e = registry[key]
	}
	if version < e.min || version > e.max {
		version = e.min + int16(int(uint16(version))%int(e.max-e.min+1))
	}
	return key, version
}

// fuzzFixture is the broker a fuzzing process sends its inputs to and what was made
// on it for the handlers to find.
type fuzzFixture struct {
	b     *Broker
	authz *Broker // with an authorizer (authzSetUp)

	mu          sync.Mutex
	refreshed   time.Time
	topicIDs    map[string][16]byte
	member      string // classic group member
	generation  int32
	shareMember string
	shareEpoch  int32
	producerID  int64
	epoch       int16
}

const (
	fuzzTopicA     = "fuzz-a"
	fuzzTopicB     = "fuzz-b"
	fuzzGroup      = "fuzz-group"
	fuzzShareGroup = "fuzz-share"
	fuzzTxn        = "fuzz-txn"
	fuzzConn       = 7
)

func newFuzzFixture(tb testing.TB) *fuzzFixture {
	b := startTestBrokerWith(tb, nil, []string{
		"group.initial.rebalance.delay.ms=0",
		"group.min.session.timeout.ms=" + fmt.Sprint(fuzzMaxWait/2),
	}, tb.TempDir())
	authz := startTestBrokerWith(tb, nil, []string{
		"authorizer.class.name=" + config.StandardAuthorizer, "super.users=User:" + fuzzAdmin.Name,
		"group.initial.rebalance.delay.ms=0",
		"group.min.session.timeout.ms=" + fmt.Sprint(fuzzMaxWait/2),
	}, tb.TempDir())
	fx := &fuzzFixture{b: b, authz: authz, topicIDs: map[string][16]byte{}, shareMember: "fuzzsharemember0000000"}
	fx.setUp(tb)
	return fx
}

var (
	fuzzAdmin     = auth.Principal{Type: auth.UserType, Name: "admin"}
	fuzzPrincipal = auth.Principal{Type: auth.UserType, Name: "fuzz"}
)

// callAs sends req to b as principal p and waits for its answer (10 s at most).
func callAs[T kmsg.Response](tb testing.TB, b *Broker, p auth.Principal, req kmsg.Request) T {
	tb.Helper()
	select {
	case r := <-b.Handle(&protocol.Request{Key: req.Key(), Version: req.GetVersion(), Body: req, Principal: p}):
		return r.Body.(T)
	case <-time.After(10 * time.Second):
		tb.Fatalf("no answer to %s", kmsg.NameForKey(req.Key()))
		panic("unreachable")
	}
}

// authzSetUp makes (again) the topics of the authorizing broker and User:fuzz's ACLs.
func (fx *fuzzFixture) authzSetUp(tb testing.TB) {
	for topic, partitions := range map[string]int32{fuzzTopicA: 2, fuzzTopicB: 1} {
		if _, ok := fx.authz.image().Topic(topic); ok {
			continue
		}
		req := kmsg.NewPtrCreateTopicsRequest()
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, partitions, 1
		req.Topics = append(req.Topics, rt)
		req.SetVersion(7)
		if code := callAs[*kmsg.CreateTopicsResponse](tb, fx.authz, fuzzAdmin, req).Topics[0].ErrorCode; code != 0 {
			tb.Fatalf("fuzz fixture: create %s: %v", topic, kerr.ErrorForCode(code))
		}
	}
	if len(fx.authz.image().ACLs()) > 0 {
		return
	}
	acls := kmsg.NewPtrCreateACLsRequest()
	acls.SetVersion(3)
	for _, r := range []struct {
		typ  kmsg.ACLResourceType
		name string
	}{{kmsg.ACLResourceTypeTopic, fuzzTopicA}, {kmsg.ACLResourceTypeGroup, fuzzGroup},
		{kmsg.ACLResourceTypeGroup, fuzzShareGroup}, {kmsg.ACLResourceTypeTransactionalId, fuzzTxn}} {
		c := kmsg.NewCreateACLsRequestCreation()
		c.ResourceType, c.ResourceName, c.ResourcePatternType = r.typ, r.name, kmsg.ACLResourcePatternTypeLiteral
		c.Principal, c.Host, c.Operation, c.PermissionType = fuzzPrincipal.String(), "*", kmsg.ACLOperationAll, kmsg.ACLPermissionTypeAllow
		acls.Creations = append(acls.Creations, c)
	}
	for _, res := range callAs[*kmsg.CreateACLsResponse](tb, fx.authz, fuzzAdmin, acls).Results {
		if res.ErrorCode != 0 {
			tb.Fatalf("fuzz fixture: create ACLs: %v", kerr.ErrorForCode(res.ErrorCode))
		}
	}
	testutil.WaitFor(tb, 10*time.Second, func() bool { return len(fx.authz.image().ACLs()) == len(acls.Creations) }, "the ACLs")
}

// setUp makes (again) what the handlers should find: the topics, a record, the
// members of both groups and the producer.
func (fx *fuzzFixture) setUp(tb testing.TB) {
	fx.refreshed = time.Now()
	fx.authzSetUp(tb)
	for topic, partitions := range map[string]int32{fuzzTopicA: 2, fuzzTopicB: 1} {
		if _, ok := fx.b.image().Topic(topic); !ok {
			createTestTopic(tb, fx.b, topic, partitions)
			produceTo(tb, fx.b, topic)
		}
		tp, _ := fx.b.image().Topic(topic)
		fx.topicIDs[topic] = [16]byte(tp.ID)
	}
	// The coordinators' topics are made at the first FindCoordinator, as in Kafka.
	for _, keyType := range []int8{0, 1} {
		fc := kmsg.NewPtrFindCoordinatorRequest()
		fc.CoordinatorType, fc.CoordinatorKeys = keyType, []string{fuzzGroup}
		if keyType == 1 {
			fc.CoordinatorKeys = []string{fuzzTxn}
		}
		untilDone(tb, "FindCoordinator", func() int16 {
			return call[*kmsg.FindCoordinatorResponse](tb, fx.b, fc).Coordinators[0].ErrorCode
		})
	}
	// The classic member: a join (member id required), another, a sync as leader.
	join := kmsg.NewPtrJoinGroupRequest()
	join.Group, join.SessionTimeoutMillis, join.RebalanceTimeoutMillis = fuzzGroup, 30_000, fuzzMaxWait
	join.ProtocolType = "consumer"
	p := kmsg.NewJoinGroupRequestProtocol()
	p.Name = "range"
	join.Protocols = append(join.Protocols, p)
	var jr *kmsg.JoinGroupResponse
	untilDone(tb, "JoinGroup", func() int16 {
		jr = call[*kmsg.JoinGroupResponse](tb, fx.b, join)
		if jr.ErrorCode == kerr.MemberIDRequired.Code {
			join.MemberID = jr.MemberID
		}
		return jr.ErrorCode
	})
	fx.member, fx.generation = jr.MemberID, jr.Generation
	syncReq := kmsg.NewPtrSyncGroupRequest()
	syncReq.Group, syncReq.MemberID, syncReq.Generation = fuzzGroup, fx.member, fx.generation
	syncReq.ProtocolType, syncReq.Protocol = kmsg.StringPtr("consumer"), kmsg.StringPtr("range")
	untilDone(tb, "SyncGroup", func() int16 { return call[*kmsg.SyncGroupResponse](tb, fx.b, syncReq).ErrorCode })

	hb := kmsg.NewPtrShareGroupHeartbeatRequest()
	hb.GroupID, hb.MemberID, hb.MemberEpoch = fuzzShareGroup, fx.shareMember, 0
	hb.SubscribedTopicNames = []string{fuzzTopicA}
	untilDone(tb, "ShareGroupHeartbeat", func() int16 {
		hr := call[*kmsg.ShareGroupHeartbeatResponse](tb, fx.b, hb)
		fx.shareEpoch = hr.MemberEpoch
		return hr.ErrorCode
	})

	initReq := kmsg.NewPtrInitProducerIDRequest()
	initReq.TransactionalID, initReq.TransactionTimeoutMillis = kmsg.StringPtr(fuzzTxn), 60_000
	untilDone(tb, "InitProducerID", func() int16 {
		ir := call[*kmsg.InitProducerIDResponse](tb, fx.b, initReq)
		fx.producerID, fx.epoch = ir.ProducerID, ir.ProducerEpoch
		return ir.ErrorCode
	})
}

// untilDone repeats a request while its error is retriable (the coordinators load
// after the broker starts), or is CONCURRENT_TRANSACTIONS (an InitProducerID while a
// transaction an input began is still ending, which Kafka's producers retry too), for
// at most 10 s; it fails on any other error.
func untilDone(tb testing.TB, what string, send func() int16) {
	tb.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		code := send()
		err := kerr.ErrorForCode(code)
		if code == 0 {
			return
		}
		var ke *kerr.Error
		again := code == kerr.MemberIDRequired.Code || code == kerr.ConcurrentTransactions.Code || errors.As(err, &ke) && ke.Retriable
		if again && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
			continue
		}
		tb.Fatalf("fuzz fixture: %s: %v", what, err)
	}
}

// refresh, every few seconds, drops the topics inputs created and makes the fixture
// again (the members' sessions end, inputs delete topics, fence the producer...).
func (fx *fuzzFixture) refresh(tb testing.TB) {
	fx.mu.Lock()
	defer fx.mu.Unlock()
	if time.Since(fx.refreshed) < 10*time.Second {
		return
	}
	for _, b := range []*Broker{fx.b, fx.authz} {
		del := kmsg.NewPtrDeleteTopicsRequest()
		del.SetVersion(6)
		for _, tp := range b.image().Topics() {
			if tp.Name != fuzzTopicA && tp.Name != fuzzTopicB && !strings.HasPrefix(tp.Name, "__") {
				rt := kmsg.NewDeleteTopicsRequestTopic()
				rt.Topic = kmsg.StringPtr(tp.Name)
				del.Topics = append(del.Topics, rt)
			}
		}
		if len(del.Topics) > 0 {
			del.TimeoutMillis = 5000
			callAs[*kmsg.DeleteTopicsResponse](tb, b, fuzzAdmin, del)
		}
	}
	fx.setUp(tb)
}

// handle sends req and checks its answer.
func (fx *fuzzFixture) handle(t *testing.T, b *Broker, req kmsg.Request, guard bool) {
	before := heapAllocated()
	answer := make(chan protocol.Response, 1)
	go func() { // a handler that blocks before it returns its channel is a hang too
		answer <- <-b.Handle(&protocol.Request{
			Key: req.Key(), Version: req.GetVersion(), Body: req, ConnID: fuzzConn,
			ClientID: "fuzz", ClientAddr: "127.0.0.1:9", Size: 1024, Principal: fuzzPrincipal,
		})
	}()
	var r protocol.Response
	select {
	case r = <-answer:
	case <-time.After(fuzzMaxWait*time.Millisecond + fuzzSlack):
		t.Fatalf("no answer to %s v%d within %v: %s", kmsg.NameForKey(req.Key()), req.GetVersion(),
			fuzzMaxWait*time.Millisecond+fuzzSlack, describe(req))
	}
	if allocated := heapAllocated() - before; guard && allocated > fuzzAllocLimit {
		t.Fatalf("%s v%d allocated %d MiB: %s", kmsg.NameForKey(req.Key()), req.GetVersion(), allocated>>20, describe(req))
	}
	if r.Written != nil {
		defer r.Written()
	}
	var encoded []byte
	switch {
	case r.Body != nil:
		r.Body.SetVersion(req.GetVersion())
		encoded = r.Body.AppendTo(nil)
	case len(r.Chunks) > 0:
		encoded = flatten(t, r.Chunks)
	default:
		return // no answer (acks=0) or the connection closes
	}
	resp := kmsg.ResponseForKey(req.Key())
	resp.SetVersion(req.GetVersion())
	if err := resp.ReadFrom(encoded); err != nil {
		t.Fatalf("%s v%d: the answer does not decode: %v; request %s", kmsg.NameForKey(req.Key()), req.GetVersion(), err, describe(req))
	}
	if path, code, ok := unknownErrorCode(reflect.ValueOf(resp), ""); !ok {
		t.Fatalf("%s v%d answers error code %d at %s (%v): a malformed request has a Kafka error of its own; request %s",
			kmsg.NameForKey(req.Key()), req.GetVersion(), code, path, kerr.ErrorForCode(code), describe(req))
	}
	if pr, ok := req.(*kmsg.ProduceRequest); ok && pr.Acks != -1 && pr.Acks != 0 && pr.Acks != 1 {
		for _, rt := range resp.(*kmsg.ProduceResponse).Topics {
			for _, rp := range rt.Partitions {
				if rp.ErrorCode == 0 {
					t.Fatalf("Produce v%d with acks=%d was written to partition %d", req.GetVersion(), pr.Acks, rp.Partition)
				}
			}
		}
	}
	if dt, ok := req.(*kmsg.DeleteTopicsRequest); ok && dt.Version >= 6 {
		malformed, refused := 0, 0
		for _, rt := range dt.Topics {
			if (rt.Topic == nil) == (rt.TopicID == [16]byte{}) { // neither a name nor an id, or both
				malformed++
			}
		}
		for _, rt := range resp.(*kmsg.DeleteTopicsResponse).Topics {
			if rt.ErrorCode == kerr.InvalidRequest.Code {
				refused++
			}
		}
		if refused < malformed {
			t.Fatalf("DeleteTopics v%d: %d entries with neither a name nor an id or both, %d refused; request %s",
				dt.Version, malformed, refused, describe(req))
		}
	}
	if res := repeatedConfigResourceAnswered(req, resp); res != "" {
		t.Fatalf("%s v%d applied %s, which the request names twice; request %s", kmsg.NameForKey(req.Key()), req.GetVersion(), res, describe(req))
	}
	if missing, extra, ok := answersEveryPartition(req, resp); !ok {
		t.Fatalf("%s v%d: partitions asked but not answered %v, answered but not asked %v; request %s",
			kmsg.NameForKey(req.Key()), req.GetVersion(), missing, extra, describe(req))
	}
	if os.Getenv("FUZZ_DEBUG") != "" {
		t.Logf("%s v%d -> %s", kmsg.NameForKey(req.Key()), req.GetVersion(), describe(resp))
	}
}

// unknownErrorCode finds an error code in a response that is UNKNOWN_SERVER_ERROR
// or no Kafka error at all: what a handler answers when it did not expect an input.
func unknownErrorCode(v reflect.Value, path string) (string, int16, bool) {
	switch v.Kind() {
	case reflect.Pointer:
		if !v.IsNil() {
			return unknownErrorCode(v.Elem(), path)
		}
	case reflect.Slice:
		if k := v.Type().Elem().Kind(); k == reflect.Struct || k == reflect.Pointer {
			for i := range v.Len() {
				if p, code, ok := unknownErrorCode(v.Index(i), fmt.Sprintf("%s[%d]", path, i)); !ok {
					return p, code, false
				}
			}
		}
	case reflect.Struct:
		for i := range v.NumField() {
			name, field := v.Type().Field(i).Name, v.Field(i)
			if field.Kind() == reflect.Int16 && strings.HasSuffix(name, "ErrorCode") {
				code := int16(field.Int())
				if code != 0 && (code == kerr.UnknownServerError.Code || kerr.ErrorForCode(code) == kerr.UnknownServerError) {
					return path + "." + name, code, false
				}
				continue
			}
			if v.Type().Field(i).IsExported() {
				if p, code, ok := unknownErrorCode(field, path+"."+name); !ok {
					return p, code, false
				}
			}
		}
	}
	return "", 0, true
}

// repeatedConfigResourceAnswered returns a config resource an AlterConfigs or
// IncrementalAlterConfigs request names twice that its answer says was applied.
func repeatedConfigResourceAnswered(req kmsg.Request, resp kmsg.Response) string {
	count := map[configResource]int{}
	var answered []configResource
	switch r := req.(type) {
	case *kmsg.AlterConfigsRequest:
		for _, res := range r.Resources {
			count[configResource{res.ResourceType, res.ResourceName}]++
		}
		for _, res := range resp.(*kmsg.AlterConfigsResponse).Resources {
			if res.ErrorCode == 0 {
				answered = append(answered, configResource{res.ResourceType, res.ResourceName})
			}
		}
	case *kmsg.IncrementalAlterConfigsRequest:
		for _, res := range r.Resources {
			count[configResource{res.ResourceType, res.ResourceName}]++
		}
		for _, res := range resp.(*kmsg.IncrementalAlterConfigsResponse).Resources {
			if res.ErrorCode == 0 {
				answered = append(answered, configResource{res.ResourceType, res.ResourceName})
			}
		}
	}
	for _, res := range answered {
		if count[res] > 1 {
			return fmt.Sprintf("%v %q", res.typ, res.name)
		}
	}
	return ""
}

// answersEveryPartition checks, for the APIs whose answer in Kafka has an entry for
// each partition asked (topics[].partitions[]), that the answer has exactly those:
// not when the request names a partition twice (Kafka's answers then differ by API)
// or when the answer has a top-level error.
func answersEveryPartition(req kmsg.Request, resp kmsg.Response) (missing, extra []string, ok bool) {
	switch r := req.(type) {
	case *kmsg.ProduceRequest, *kmsg.ListOffsetsRequest, *kmsg.OffsetCommitRequest, *kmsg.OffsetForLeaderEpochRequest,
		*kmsg.TxnOffsetCommitRequest, *kmsg.DeleteRecordsRequest,
		*kmsg.AlterPartitionAssignmentsRequest, *kmsg.OffsetDeleteRequest, *kmsg.DescribeProducersRequest:
	case *kmsg.ElectLeadersRequest:
		if r.Topics == nil { // every partition
			return nil, nil, true
		}
	case *kmsg.AddPartitionsToTxnRequest:
		if req.GetVersion() >= 4 {
			return nil, nil, true
		}
	default:
		return nil, nil, true
	}
	if code := reflect.ValueOf(resp).Elem().FieldByName("ErrorCode"); code.IsValid() && code.Int() != 0 {
		return nil, nil, true
	}
	asked, dup := topicPartitions(reflect.ValueOf(req).Elem().FieldByName("Topics"))
	if dup {
		return nil, nil, true
	}
	answered, _ := topicPartitions(reflect.ValueOf(resp).Elem().FieldByName("Topics"))
	for tp, n := range asked {
		if answered[tp] != n {
			missing = append(missing, tp)
		}
	}
	for tp, n := range answered {
		if asked[tp] != n {
			extra = append(extra, tp)
		}
	}
	return missing, extra, len(missing) == 0 && len(extra) == 0
}

// topicPartitions counts the (topic, partition) pairs of a topics[].partitions[]
// array, a topic named by its id when it has one; dup is whether one comes twice.
func topicPartitions(topics reflect.Value) (pairs map[string]int, dup bool) {
	pairs = map[string]int{}
	if !topics.IsValid() || topics.Kind() != reflect.Slice {
		return pairs, false
	}
	for i := range topics.Len() {
		t := topics.Index(i)
		name := ""
		if f := t.FieldByName("Topic"); f.IsValid() {
			if f.Kind() == reflect.Pointer {
				if !f.IsNil() {
					name = f.Elem().String()
				}
			} else {
				name = f.String()
			}
		}
		if id := t.FieldByName("TopicID"); id.IsValid() && !id.IsZero() {
			name = fmt.Sprintf("id:%x", id.Interface())
		}
		parts := t.FieldByName("Partitions")
		if !parts.IsValid() {
			continue
		}
		for j := range parts.Len() {
			p := parts.Index(j)
			var partition int64
			if p.Kind() == reflect.Struct {
				partition = p.FieldByName("Partition").Int()
			} else {
				partition = p.Int()
			}
			key := fmt.Sprintf("%s-%d", name, partition)
			pairs[key]++
			dup = dup || pairs[key] > 1
		}
	}
	return pairs, dup
}

func describe(req any) string {
	s := fmt.Sprintf("%+v", req)
	if len(s) > 2000 {
		s = s[:2000] + "…"
	}
	return s
}

var allocSample = []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}

// heapAllocated is how many bytes the process has allocated on the heap so far.
func heapAllocated() uint64 {
	metrics.Read(allocSample)
	return allocSample[0].Value.Uint64()
}

// capWaits lowers every wait and timeout in a request to fuzzMaxWait (but the
// transaction timeout, which is no wait) and the partition counts of new topics and
// partitions the controller would accept to a few, so that each input is answered
// quickly.
func capWaits(v reflect.Value) {
	switch v.Kind() {
	case reflect.Pointer:
		if !v.IsNil() {
			capWaits(v.Elem())
		}
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Struct || v.Type().Elem().Kind() == reflect.Pointer {
			for i := range v.Len() {
				capWaits(v.Index(i))
			}
		}
	case reflect.Struct:
		for i := range v.NumField() {
			name, field := v.Type().Field(i).Name, v.Field(i)
			if !field.CanSet() {
				continue
			}
			switch {
			case field.Kind() == reflect.Int32 && (strings.Contains(name, "Timeout") || strings.HasPrefix(name, "MaxWait")) &&
				!strings.Contains(name, "Transaction"):
				if field.Int() > fuzzMaxWait {
					field.SetInt(fuzzMaxWait)
				}
			case field.Kind() == reflect.Int32 && (name == "NumPartitions" || name == "Count"):
				// Above 10,000 the controller refuses the request (maxNewPartitions):
				// that stays, to be checked.
				if n := field.Int(); n > 8 && n <= 10_000 {
					field.SetInt(8)
				}
			case name == "ReplicaAssignment" && field.Len() > 8:
				field.Set(field.Slice(0, 8))
			default:
				capWaits(field)
			}
		}
	}
}

// seed is a valid request body of key at version, its fields filled from the
// fixture by name (fill).
func (fx *fuzzFixture) seed(key, version int16) []byte {
	req := kmsg.RequestForKey(key)
	req.SetVersion(version)
	share := strings.Contains(reflect.TypeOf(req).Elem().Name(), "Share")
	fx.fill(reflect.ValueOf(req).Elem(), share, "")
	switch r := req.(type) {
	case *kmsg.ApiVersionsRequest:
		r.ClusterID, r.NodeID = nil, -1
	case *kmsg.FindCoordinatorRequest:
		r.CoordinatorKeys = []string{fuzzGroup}
	case *kmsg.CreateTopicsRequest:
		r.Topics[0].Topic = "fuzz-new"
		r.Topics[0].ReplicaAssignment = nil
	case *kmsg.DeleteTopicsRequest: // the topic CreateTopics made, not the fixture's
		r.TopicNames = []string{"fuzz-new"}
		r.Topics[0].Topic, r.Topics[0].TopicID = kmsg.StringPtr("fuzz-new"), [16]byte{}
	case *kmsg.CreatePartitionsRequest:
		r.Topics[0].Count, r.Topics[0].Assignment = 3, nil
	case *kmsg.DescribeConfigsRequest:
		r.Resources[0].ResourceType = kmsg.ConfigResourceTypeTopic
	case *kmsg.IncrementalAlterConfigsRequest:
		r.Resources[0].ResourceType = kmsg.ConfigResourceTypeTopic
		r.Resources[0].Configs[0].Name, r.Resources[0].Configs[0].Value = "retention.ms", kmsg.StringPtr("100000")
	case *kmsg.AlterConfigsRequest:
		r.Resources[0].ResourceType = kmsg.ConfigResourceTypeTopic
		r.Resources[0].Configs[0].Name, r.Resources[0].Configs[0].Value = "retention.ms", kmsg.StringPtr("100000")
	case *kmsg.ConsumerGroupHeartbeatRequest:
		r.MemberID, r.MemberEpoch = "fuzzconsumermember0000", 0
	case *kmsg.AddPartitionsToTxnRequest:
		if version >= 4 {
			r.Transactions[0].VerifyOnly = false
		}
	}
	return req.AppendTo(nil)
}

// fill sets the fields of a request (or of one of its parts) from the fixture by
// their names: topics, partition 0, the groups, their members, the producer;
// arrays get one element.
func (fx *fuzzFixture) fill(v reflect.Value, share bool, parent string) {
	t := v.Type()
	for i := range t.NumField() {
		name, field := t.Field(i).Name, v.Field(i)
		if !field.CanSet() || name == "Version" || name == "UnknownTags" {
			continue
		}
		str := func(s string) {
			switch field.Kind() {
			case reflect.String:
				field.SetString(s)
			case reflect.Pointer:
				if field.Type().Elem().Kind() == reflect.String {
					field.Set(reflect.ValueOf(kmsg.StringPtr(s)))
				}
			}
		}
		group := fuzzGroup
		if share {
			group = fuzzShareGroup
		}
		member := fx.member
		if share {
			member = fx.shareMember
		}
		switch {
		case name == "Topic" || name == "TopicName" || name == "ResourceName" || (name == "Name" && strings.Contains(parent, "Topic")):
			str(fuzzTopicA)
		case name == "TopicID" && field.Kind() == reflect.Array:
			field.Set(reflect.ValueOf(fx.topicIDs[fuzzTopicA]))
		case name == "Group" || name == "GroupID" || name == "Key":
			str(group)
		case name == "MemberID":
			str(member)
		case name == "TransactionalID":
			str(fuzzTxn)
		case name == "ProtocolType":
			str("consumer")
		case name == "Protocol" || (name == "Name" && strings.Contains(parent, "Protocol")):
			str("range")
		case name == "ClientSoftwareName":
			str("fuzz")
		case name == "ClientSoftwareVersion":
			str("1.0")
		case name == "Records" && field.Kind() == reflect.Slice:
			batch, err := record.Build(record.DefaultBuildOptions(), []record.Record{{Value: []byte("v")}})
			if err != nil {
				panic(err)
			}
			field.SetBytes(batch)
		case name == "ProducerID" && field.Kind() == reflect.Int64:
			field.SetInt(fx.producerID)
		case name == "ProducerEpoch" && field.Kind() == reflect.Int16:
			field.SetInt(int64(fx.epoch))
		case name == "Generation" || name == "GenerationID":
			field.SetInt(int64(fx.generation))
		case name == "MemberEpoch" && share:
			field.SetInt(int64(fx.shareEpoch))
		case strings.HasPrefix(name, "MaxWait") || strings.Contains(name, "Timeout"):
			field.SetInt(fuzzMaxWait / 2)
		case name == "MaxBytes" || name == "PartitionMaxBytes" || name == "MaxRecords" || name == "BatchSize":
			field.SetInt(1 << 16)
		case name == "NumPartitions" || name == "ReplicationFactor":
			field.SetInt(1)
		case name == "Acks":
			field.SetInt(-1)
		case field.Kind() == reflect.Slice && field.Type().Elem().Kind() == reflect.Int32:
			if name == "Partitions" || name == "Partition" {
				field.Set(reflect.ValueOf([]int32{0}))
			} else if strings.Contains(name, "Replicas") || strings.Contains(name, "ISR") || name == "Brokers" {
				field.Set(reflect.ValueOf([]int32{1}))
			}
		case field.Kind() == reflect.Slice && field.Type().Elem().Kind() == reflect.String:
			switch {
			case strings.Contains(name, "Topic"):
				field.Set(reflect.ValueOf([]string{fuzzTopicA}))
			case strings.Contains(name, "Group"):
				field.Set(reflect.ValueOf([]string{group}))
			case strings.Contains(name, "TransactionalID"):
				field.Set(reflect.ValueOf([]string{fuzzTxn}))
			}
		case field.Kind() == reflect.Slice && field.Type().Elem().Kind() == reflect.Struct:
			elem := reflect.New(field.Type().Elem()).Elem()
			if d, ok := elem.Addr().Interface().(interface{ Default() }); ok {
				d.Default()
			}
			fx.fill(elem, share, field.Type().Elem().Name())
			field.Set(reflect.Append(reflect.MakeSlice(field.Type(), 0, 1), elem))
		case field.Kind() == reflect.Struct:
			fx.fill(field, share, field.Type().Name())
		}
	}
}
