package broker

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-streaming/samsa/internal/protocol"
)

// TestMetadataAnswersEachTopicOnce: a Metadata request naming one topic many times
// (or one topic id) is answered with that topic once, as Kafka answers the set of the
// topics named: otherwise each three bytes of a request naming a topic of many
// partitions cost the broker the whole topic's metadata again, and a 1 MiB request
// could make it build and encode gigabytes.
func TestMetadataAnswersEachTopicOnce(t *testing.T) {
	b := startTestBroker(t)
	createTestTopic(t, b, "wide", 16)
	id := call[*kmsg.MetadataResponse](t, b, &kmsg.MetadataRequest{
		Version: 12, Topics: []kmsg.MetadataRequestTopic{{Topic: kmsg.StringPtr("wide")}},
	}).Topics[0].TopicID
	for name, rt := range map[string]kmsg.MetadataRequestTopic{
		"name":    {Topic: kmsg.StringPtr("wide")},
		"id":      {TopicID: id},
		"unknown": {Topic: kmsg.StringPtr("nowhere")},
	} {
		req := &kmsg.MetadataRequest{Version: 12}
		for range 10000 {
			req.Topics = append(req.Topics, rt)
		}
		resp := call[*kmsg.MetadataResponse](t, b, req)
		if len(resp.Topics) != 1 {
			t.Errorf("one topic by %s named 10,000 times: %d topics answered, want 1", name, len(resp.Topics))
		}
	}
	req := &kmsg.MetadataRequest{Version: 12, Topics: []kmsg.MetadataRequestTopic{
		{Topic: kmsg.StringPtr("wide")}, {Topic: kmsg.StringPtr("nowhere")}, {Topic: kmsg.StringPtr("wide")},
	}}
	if resp := call[*kmsg.MetadataResponse](t, b, req); len(resp.Topics) != 2 ||
		*resp.Topics[0].Topic != "wide" || *resp.Topics[1].Topic != "nowhere" {
		t.Errorf("wide, nowhere, wide: %d topics answered, want wide and nowhere", len(resp.Topics))
	}
}

// TestDescribeConfigsDescribesEachResourceOnce: a DescribeConfigs request naming
// the broker 10,000 times (5 bytes each) is answered with its configuration once and
// INVALID_REQUEST for each repeat, not with 10,000 copies of some 30 KB each.
func TestDescribeConfigsDescribesEachResourceOnce(t *testing.T) {
	b := startTestBroker(t)
	createTestTopic(t, b, "t", 1)
	req := &kmsg.DescribeConfigsRequest{Version: 4, IncludeDocumentation: true, IncludeSynonyms: true}
	for range 10000 {
		req.Resources = append(req.Resources,
			kmsg.DescribeConfigsRequestResource{ResourceType: kmsg.ConfigResourceTypeBroker, ResourceName: "1"},
			kmsg.DescribeConfigsRequestResource{ResourceType: kmsg.ConfigResourceTypeTopic, ResourceName: "t"})
	}
	resp := call[*kmsg.DescribeConfigsResponse](t, b, req)
	if len(resp.Resources) != len(req.Resources) {
		t.Fatalf("%d resources answered, want %d", len(resp.Resources), len(req.Resources))
	}
	for i, r := range resp.Resources {
		switch first := i < 2; {
		case first && (r.ErrorCode != 0 || len(r.Configs) == 0):
			t.Fatalf("resource %d (%s): error %d, %d configs; want its configs", i, r.ResourceName, r.ErrorCode, len(r.Configs))
		case !first && (r.ErrorCode != kerr.InvalidRequest.Code || len(r.Configs) != 0):
			t.Fatalf("resource %d, a repeat: error %d, %d configs; want INVALID_REQUEST and none", i, r.ErrorCode, len(r.Configs))
		}
	}
	if n := len(resp.AppendTo(nil)); n > 4<<20 { // it was some 300 MiB
		t.Errorf("a %d KiB request answered with %d MiB", len(req.AppendTo(nil))>>10, n>>20)
	}
}

// TestGroupDescribesAnswerEachGroupOnce: DescribeGroups, ConsumerGroupDescribe and
// ShareGroupDescribe naming a group many times describe it once: each mention would
// otherwise cost the group's whole state again (every member, with its metadata and
// assignment), for a few bytes of request.
func TestGroupDescribesAnswerEachGroupOnce(t *testing.T) {
	b := startTestBroker(t)
	names := func() []string {
		var out []string
		for range 10000 {
			out = append(out, "g", "h")
		}
		return out
	}
	if n := len(call[*kmsg.DescribeGroupsResponse](t, b, &kmsg.DescribeGroupsRequest{Version: 5, Groups: names()}).Groups); n != 2 {
		t.Errorf("DescribeGroups: %d groups answered, want 2", n)
	}
	if n := len(call[*kmsg.ConsumerGroupDescribeResponse](t, b, &kmsg.ConsumerGroupDescribeRequest{Version: 0, Groups: names()}).Groups); n != 2 {
		t.Errorf("ConsumerGroupDescribe: %d groups answered, want 2", n)
	}
	if n := len(call[*kmsg.ShareGroupDescribeResponse](t, b, &kmsg.ShareGroupDescribeRequest{Version: 1, GroupIDs: names()}).Groups); n != 2 {
		t.Errorf("ShareGroupDescribe: %d groups answered, want 2", n)
	}
}

// TestOffsetFetchAnswersAllOffsetsOfAGroupOnce: an OffsetFetch (v8+) asking for all
// the offsets of one group many times answers them once: each mention would otherwise
// cost every committed offset of the group again.
func TestOffsetFetchAnswersAllOffsetsOfAGroupOnce(t *testing.T) {
	b := startTestBroker(t)
	req := &kmsg.OffsetFetchRequest{Version: 8}
	for range 10000 {
		req.Groups = append(req.Groups, kmsg.OffsetFetchRequestGroup{Group: "g"})
	}
	req.Groups = append(req.Groups, kmsg.OffsetFetchRequestGroup{Group: "g", Topics: []kmsg.OffsetFetchRequestGroupTopic{{Topic: "t", Partitions: []int32{0}}}})
	resp := call[*kmsg.OffsetFetchResponse](t, b, req)
	if len(resp.Groups) != 2 || resp.Groups[0].Group != "g" || resp.Groups[1].Group != "g" {
		t.Errorf("all of g 10,000 times, then g's t-0: %d groups answered, want all of g once, then t-0", len(resp.Groups))
	}
}

// TestDescribeProducersAnswersEachPartitionOnce: a DescribeProducers request naming
// a partition many times (4 bytes each) describes it once: each mention would
// otherwise cost every producer the partition holds state for again.
func TestDescribeProducersAnswersEachPartitionOnce(t *testing.T) {
	b := startTestBroker(t)
	createTestTopic(t, b, "t", 2)
	req := &kmsg.DescribeProducersRequest{Version: 0}
	for range 2 {
		rt := kmsg.DescribeProducersRequestTopic{Topic: "t"}
		for range 5000 {
			rt.Partitions = append(rt.Partitions, 0, 1)
		}
		req.Topics = append(req.Topics, rt)
	}
	resp := call[*kmsg.DescribeProducersResponse](t, b, req)
	n := 0
	for _, rt := range resp.Topics {
		n += len(rt.Partitions)
	}
	if n != 2 {
		t.Errorf("two partitions named 10,000 times: %d partitions answered, want 2", n)
	}
}

// TestDescribeTransactionsAnswersEachIDOnce: a DescribeTransactions request naming a
// transactional id many times (3 bytes each) describes it once: each mention would
// otherwise cost every partition of its transaction again.
func TestDescribeTransactionsAnswersEachIDOnce(t *testing.T) {
	b := startTestBroker(t)
	createTestTopic(t, b, "t", 200)
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.CoordinatorType, fc.CoordinatorKeys = 1, []string{"x"}
	untilDone(t, "FindCoordinator", func() int16 {
		return call[*kmsg.FindCoordinatorResponse](t, b, fc).Coordinators[0].ErrorCode
	})
	initReq := kmsg.NewPtrInitProducerIDRequest()
	initReq.TransactionalID, initReq.TransactionTimeoutMillis = kmsg.StringPtr("x"), 60_000
	add := &kmsg.AddPartitionsToTxnRequest{Version: 3, TransactionalID: "x"}
	untilDone(t, "InitProducerID", func() int16 {
		r := call[*kmsg.InitProducerIDResponse](t, b, initReq)
		add.ProducerID, add.ProducerEpoch = r.ProducerID, r.ProducerEpoch
		return r.ErrorCode
	})
	rt := kmsg.AddPartitionsToTxnRequestTopic{Topic: "t"}
	for p := range int32(200) {
		rt.Partitions = append(rt.Partitions, p)
	}
	add.Topics = append(add.Topics, rt)
	untilDone(t, "AddPartitionsToTxn", func() int16 { // v3: call would send v5, which only brokers may
		r := (<-b.Handle(&protocol.Request{Key: add.Key(), Version: add.Version, Body: add})).Body.(*kmsg.AddPartitionsToTxnResponse)
		return r.Topics[0].Partitions[0].ErrorCode
	})

	req := &kmsg.DescribeTransactionsRequest{}
	for range 10000 {
		req.TransactionalIDs = append(req.TransactionalIDs, "x", "y")
	}
	resp := call[*kmsg.DescribeTransactionsResponse](t, b, req)
	if len(resp.TransactionStates) != 2 {
		t.Fatalf("x and y named 10,000 times each: %d transactions answered, want 2", len(resp.TransactionStates))
	}
	x, y := resp.TransactionStates[0], resp.TransactionStates[1]
	if x.TransactionalID != "x" || x.ErrorCode != 0 || len(x.Topics) != 1 || len(x.Topics[0].Partitions) != 200 {
		t.Errorf("first answer: %q, error %d, %d topics; want x with its 200 partitions", x.TransactionalID, x.ErrorCode, len(x.Topics))
	}
	if y.TransactionalID != "y" || y.ErrorCode != kerr.TransactionalIDNotFound.Code {
		t.Errorf("second answer: %q, error %d; want y, TRANSACTIONAL_ID_NOT_FOUND", y.TransactionalID, y.ErrorCode)
	}
}

// TestDeleteRecordsAnswersEachPartitionOnce: a DeleteRecords request naming a
// partition more than once, in one topic entry or several, is answered once for it
// and deletes before its last mention's offset, as Kafka keys the request's
// partitions by topic and partition.
func TestDeleteRecordsAnswersEachPartitionOnce(t *testing.T) {
	b := startTestBroker(t)
	createTestTopic(t, b, "t", 2)
	for range 5 {
		produceTo(t, b, "t")
	}
	mention := func(partition int32, offset int64) kmsg.DeleteRecordsRequestTopicPartition {
		return kmsg.DeleteRecordsRequestTopicPartition{Partition: partition, Offset: offset}
	}
	req := &kmsg.DeleteRecordsRequest{TimeoutMillis: 5000, Topics: []kmsg.DeleteRecordsRequestTopic{
		{Topic: "t", Partitions: []kmsg.DeleteRecordsRequestTopicPartition{mention(0, 3), mention(1, 0)}},
		{Topic: "t"},
	}}
	for range 10000 {
		req.Topics[1].Partitions = append(req.Topics[1].Partitions, mention(0, 4))
	}
	req.Topics[1].Partitions = append(req.Topics[1].Partitions, mention(0, 2))
	resp := call[*kmsg.DeleteRecordsResponse](t, b, req)
	answers := map[int32][]int64{}
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			if rp.ErrorCode != 0 {
				t.Errorf("partition %d: %v", rp.Partition, kerr.ErrorForCode(rp.ErrorCode))
			}
			answers[rp.Partition] = append(answers[rp.Partition], rp.LowWatermark)
		}
	}
	if len(answers) != 2 || len(answers[0]) != 1 || len(answers[1]) != 1 {
		t.Fatalf("partition 0 named 10,002 times, 1 once: %d and %d answers, want one each", len(answers[0]), len(answers[1]))
	}
	if answers[0][0] != 2 {
		t.Errorf("partition 0 last named with offset 2: low watermark %d, want 2", answers[0][0])
	}
	list := &kmsg.ListOffsetsRequest{ReplicaID: -1, Topics: []kmsg.ListOffsetsRequestTopic{{Topic: "t",
		Partitions: []kmsg.ListOffsetsRequestTopicPartition{{Partition: 0, CurrentLeaderEpoch: -1, Timestamp: -2}}}}}
	if lp := call[*kmsg.ListOffsetsResponse](t, b, list).Topics[0].Partitions[0]; lp.ErrorCode != 0 || lp.Offset != 2 {
		t.Errorf("earliest offset of partition 0: %d (error %d), want 2", lp.Offset, lp.ErrorCode)
	}
}

// TestDescribeShareGroupOffsetsAnswersAllOfAGroupOnce: a DescribeShareGroupOffsets
// request asking for all the topics of one share group many times answers them
// once: each mention would otherwise cost the state of every partition of the group
// again.
func TestDescribeShareGroupOffsetsAnswersAllOfAGroupOnce(t *testing.T) {
	b := startTestBroker(t)
	createTestTopic(t, b, "t", 100)
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.CoordinatorKeys = []string{"s"}
	untilDone(t, "FindCoordinator", func() int16 {
		return call[*kmsg.FindCoordinatorResponse](t, b, fc).Coordinators[0].ErrorCode
	})
	starts := map[int32]int64{}
	for p := range int32(100) {
		starts[p] = 0
	}
	alterShareStarts(t, b, "s", "t", starts)
	req := &kmsg.DescribeShareGroupOffsetsRequest{}
	for range 10000 {
		req.Groups = append(req.Groups, kmsg.DescribeShareGroupOffsetsRequestGroup{GroupID: "s"})
	}
	req.Groups = append(req.Groups, kmsg.DescribeShareGroupOffsetsRequestGroup{GroupID: "s",
		Topics: []kmsg.DescribeShareGroupOffsetsRequestGroupTopic{{Topic: "t", Partitions: []int32{0}}}})
	resp := call[*kmsg.DescribeShareGroupOffsetsResponse](t, b, req)
	if len(resp.Groups) != 2 {
		t.Fatalf("all of s 10,000 times, then s's t-0: %d groups answered, want all of s once, then t-0", len(resp.Groups))
	}
	if all, one := resp.Groups[0], resp.Groups[1]; len(all.Topics) != 1 || len(all.Topics[0].Partitions) != 100 ||
		len(one.Topics) != 1 || len(one.Topics[0].Partitions) != 1 {
		t.Errorf("answers: %d topics, then %d; want t's 100 partitions, then t-0", len(all.Topics), len(one.Topics))
	}
}
