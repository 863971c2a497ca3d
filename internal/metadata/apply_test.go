package metadata

import (
	"errors"
	"reflect"
	"testing"
)

func ptr[T any](v T) *T { return &v }

var (
	idA = TopicID{1}
	idB = TopicID{2}
)

// mustApply applies each batch in turn at offsets 0, 1, 2…
func mustApply(t *testing.T, batches ...[]Record) *Image {
	t.Helper()
	img := EmptyImage()
	for i, recs := range batches {
		next, err := Apply(img, int64(i), recs)
		if err != nil {
			t.Fatalf("batch %d: %v", i, err)
		}
		img = next
	}
	return img
}

func topicA(partitions int) []Record {
	recs := []Record{TopicRecord{Name: "a", ID: idA}}
	for p := range partitions {
		recs = append(recs, PartitionRecord{Topic: idA, Partition: int32(p), Replicas: []int32{1, 2}, ISR: []int32{1, 2}, Leader: 1})
	}
	return recs
}

func TestApplyTable(t *testing.T) {
	tests := []struct {
		name    string
		setup   [][]Record
		recs    []Record
		wantErr bool
		check   func(t *testing.T, img *Image)
	}{
		{
			name: "create topic with partitions",
			recs: topicA(3),
			check: func(t *testing.T, img *Image) {
				tp, ok := img.Topic("a")
				if !ok || tp.ID != idA || len(tp.Partitions) != 3 {
					t.Fatalf("topic = %+v, %v", tp, ok)
				}
				if byID, _ := img.TopicByID(idA); byID != tp {
					t.Fatalf("TopicByID differs from Topic")
				}
				if tp.Partitions[2].Partition != 2 || tp.Partitions[2].Leader != 1 {
					t.Fatalf("partition 2 = %+v", tp.Partitions[2])
				}
			},
		},
		{name: "duplicate topic name", setup: [][]Record{topicA(1)}, recs: []Record{TopicRecord{Name: "a", ID: idB}}, wantErr: true},
		{name: "duplicate topic id", setup: [][]Record{topicA(1)}, recs: []Record{TopicRecord{Name: "b", ID: idA}}, wantErr: true},
		{name: "topic with zero id", recs: []Record{TopicRecord{Name: "b"}}, wantErr: true},
		{name: "partition of unknown topic", recs: []Record{PartitionRecord{Topic: idB, Replicas: []int32{1}}}, wantErr: true},
		{name: "partition gap", setup: [][]Record{topicA(1)}, recs: []Record{PartitionRecord{Topic: idA, Partition: 2, Replicas: []int32{1}}}, wantErr: true},
		{name: "partition without replicas", setup: [][]Record{topicA(1)}, recs: []Record{PartitionRecord{Topic: idA, Partition: 1}}, wantErr: true},
		{
			name:  "leader change bumps both epochs",
			setup: [][]Record{topicA(2)},
			recs:  []Record{PartitionChangeRecord{Topic: idA, Partition: 1, Leader: ptr[int32](2)}},
			check: func(t *testing.T, img *Image) {
				tp, _ := img.Topic("a")
				p := tp.Partitions[1]
				if p.Leader != 2 || p.LeaderEpoch != 1 || p.PartitionEpoch != 1 {
					t.Fatalf("partition = %+v", p)
				}
				if !reflect.DeepEqual(p.ISR, []int32{1, 2}) {
					t.Fatalf("ISR changed: %v", p.ISR)
				}
				if tp.Partitions[0].LeaderEpoch != 0 {
					t.Fatalf("other partition touched: %+v", tp.Partitions[0])
				}
			},
		},
		{
			name:  "ISR change bumps only the partition epoch",
			setup: [][]Record{topicA(1)},
			recs:  []Record{PartitionChangeRecord{Topic: idA, Partition: 0, ISR: []int32{1}}},
			check: func(t *testing.T, img *Image) {
				tp, _ := img.Topic("a")
				p := tp.Partitions[0]
				if p.Leader != 1 || p.LeaderEpoch != 0 || p.PartitionEpoch != 1 || !reflect.DeepEqual(p.ISR, []int32{1}) {
					t.Fatalf("partition = %+v", p)
				}
			},
		},
		{
			name:  "same leader is no change",
			setup: [][]Record{topicA(1)},
			recs:  []Record{PartitionChangeRecord{Topic: idA, Partition: 0, Leader: ptr[int32](1)}},
			check: func(t *testing.T, img *Image) {
				tp, _ := img.Topic("a")
				if p := tp.Partitions[0]; p.LeaderEpoch != 0 || p.PartitionEpoch != 0 {
					t.Fatalf("partition = %+v", p)
				}
			},
		},
		{name: "change of missing partition", setup: [][]Record{topicA(1)}, recs: []Record{PartitionChangeRecord{Topic: idA, Partition: 1, ISR: []int32{1}}}, wantErr: true},
		{
			name:  "topic configs set and delete",
			setup: [][]Record{topicA(1), {ConfigRecord{ResourceType: ResourceTopic, ResourceName: "a", Name: "retention.ms", Value: ptr("1000")}}},
			recs: []Record{
				ConfigRecord{ResourceType: ResourceTopic, ResourceName: "a", Name: "cleanup.policy", Value: ptr("compact")},
				ConfigRecord{ResourceType: ResourceTopic, ResourceName: "a", Name: "retention.ms"},
			},
			check: func(t *testing.T, img *Image) {
				tp, _ := img.Topic("a")
				if !reflect.DeepEqual(tp.Configs, map[string]string{"cleanup.policy": "compact"}) {
					t.Fatalf("configs = %v", tp.Configs)
				}
			},
		},
		{name: "config of unknown topic", recs: []Record{ConfigRecord{ResourceType: ResourceTopic, ResourceName: "x", Name: "k", Value: ptr("v")}}, wantErr: true},
		{name: "config of unknown resource type", recs: []Record{ConfigRecord{ResourceType: 9, ResourceName: "x", Name: "k", Value: ptr("v")}}, wantErr: true},
		{
			name: "broker configs",
			recs: []Record{
				ConfigRecord{ResourceType: ResourceBroker, ResourceName: "", Name: "log.retention.ms", Value: ptr("5")},
				ConfigRecord{ResourceType: ResourceBroker, ResourceName: "1", Name: "x", Value: ptr("y")},
				ConfigRecord{ResourceType: ResourceBroker, ResourceName: "1", Name: "x"},
			},
			check: func(t *testing.T, img *Image) {
				if got := img.BrokerConfigs(""); !reflect.DeepEqual(got, map[string]string{"log.retention.ms": "5"}) {
					t.Fatalf("cluster configs = %v", got)
				}
				if got := img.BrokerConfigs("1"); len(got) != 0 {
					t.Fatalf("broker 1 configs = %v", got)
				}
			},
		},
		{
			name:  "remove topic",
			setup: [][]Record{topicA(2), {TopicRecord{Name: "b", ID: idB}}},
			recs:  []Record{RemoveTopicRecord{ID: idA}},
			check: func(t *testing.T, img *Image) {
				if _, ok := img.Topic("a"); ok {
					t.Fatal("topic a still there")
				}
				if _, ok := img.TopicByID(idA); ok {
					t.Fatal("topic a still there by id")
				}
				if ts := img.Topics(); len(ts) != 1 || ts[0].Name != "b" {
					t.Fatalf("topics = %v", ts)
				}
			},
		},
		{name: "remove unknown topic", recs: []Record{RemoveTopicRecord{ID: idA}}, wantErr: true},
		{
			name:  "recreate after remove gets a fresh topic",
			setup: [][]Record{topicA(2), {ConfigRecord{ResourceType: ResourceTopic, ResourceName: "a", Name: "k", Value: ptr("v")}}, {RemoveTopicRecord{ID: idA}}},
			recs:  []Record{TopicRecord{Name: "a", ID: idB}},
			check: func(t *testing.T, img *Image) {
				tp, _ := img.Topic("a")
				if tp.ID != idB || len(tp.Partitions) != 0 || len(tp.Configs) != 0 {
					t.Fatalf("topic = %+v", tp)
				}
			},
		},
		{
			name: "brokers",
			recs: []Record{
				RegisterBrokerRecord{NodeID: 2, Epoch: 5, Endpoints: []Endpoint{{Name: "PLAINTEXT", Host: "h", Port: 9092}}},
				RegisterBrokerRecord{NodeID: 1, Epoch: 3, Fenced: true},
			},
			check: func(t *testing.T, img *Image) {
				bs := img.Brokers()
				if len(bs) != 2 || bs[0].NodeID != 1 || bs[1].NodeID != 2 {
					t.Fatalf("brokers = %+v", bs)
				}
				if got := img.UnfencedBrokers(); !reflect.DeepEqual(got, []int32{2}) {
					t.Fatalf("unfenced = %v", got)
				}
				b, ok := img.Broker(2)
				if !ok || b.Endpoints[0].Port != 9092 || b.Epoch != 5 {
					t.Fatalf("broker 2 = %+v", b)
				}
			},
		},
		{
			name:  "broker fenced, unfenced and in controlled shutdown",
			setup: [][]Record{{RegisterBrokerRecord{NodeID: 1, Epoch: 3, IncarnationID: "aa", Fenced: true}}},
			recs: []Record{
				BrokerRegistrationChangeRecord{NodeID: 1, Epoch: 3, Fenced: ptr(false)},
				BrokerRegistrationChangeRecord{NodeID: 1, Epoch: 3, InControlledShutdown: ptr(true)},
			},
			check: func(t *testing.T, img *Image) {
				b, _ := img.Broker(1)
				if b.Fenced || !b.InControlledShutdown || b.Active() || b.IncarnationID != "aa" || b.RegisteredOffset != 0 {
					t.Fatalf("broker = %+v", b)
				}
			},
		},
		{name: "registration change of unknown broker", recs: []Record{BrokerRegistrationChangeRecord{NodeID: 1, Fenced: ptr(true)}}, wantErr: true},
		{name: "registration change at another epoch", setup: [][]Record{{RegisterBrokerRecord{NodeID: 1, Epoch: 3}}}, recs: []Record{BrokerRegistrationChangeRecord{NodeID: 1, Epoch: 2, Fenced: ptr(true)}}, wantErr: true},
		{
			name: "broker unregistered; partitions still name it",
			setup: [][]Record{
				{RegisterBrokerRecord{NodeID: 1, Epoch: 3, IncarnationID: "aa"}, RegisterBrokerRecord{NodeID: 2, Epoch: 4, IncarnationID: "bb"}},
				{ConfigRecord{ResourceType: ResourceBroker, ResourceName: "2", Name: "x", Value: ptr("y")}},
				topicA(1),
			},
			recs: []Record{&UnregisterBrokerRecord{NodeID: 2, Epoch: 4}},
			check: func(t *testing.T, img *Image) {
				if b, ok := img.Broker(2); ok {
					t.Fatalf("broker 2 still registered: %+v", b)
				}
				if got := img.Brokers(); len(got) != 1 || got[0].NodeID != 1 {
					t.Fatalf("brokers = %+v", got)
				}
				if got := img.UnfencedBrokers(); !reflect.DeepEqual(got, []int32{1}) {
					t.Fatalf("unfenced = %v", got)
				}
				tp, _ := img.Topic("a")
				if p := tp.Partitions[0]; !reflect.DeepEqual(p.Replicas, []int32{1, 2}) || p.PartitionEpoch != 0 {
					t.Fatalf("partition = %+v", p)
				}
				// As in Kafka, the broker's dynamic configs outlive its registration.
				if got := img.BrokerConfigs("2")["x"]; got != "y" {
					t.Fatalf("broker 2 configs = %v", img.BrokerConfigs("2"))
				}
			},
		},
		{
			name:  "broker registers again after its unregistration",
			setup: [][]Record{{RegisterBrokerRecord{NodeID: 1, Epoch: 3, IncarnationID: "aa"}}, {UnregisterBrokerRecord{NodeID: 1, Epoch: 3}}},
			recs:  []Record{RegisterBrokerRecord{NodeID: 1, Epoch: 7, IncarnationID: "aa", Fenced: true}},
			check: func(t *testing.T, img *Image) {
				if b, ok := img.Broker(1); !ok || b.Epoch != 7 || !b.Fenced || b.RegisteredOffset != img.Offset() {
					t.Fatalf("broker 1 = %+v, %v", b, ok)
				}
			},
		},
		{name: "unregistration of unknown broker", recs: []Record{UnregisterBrokerRecord{NodeID: 1}}, wantErr: true},
		{name: "unregistration at another epoch", setup: [][]Record{{RegisterBrokerRecord{NodeID: 1, Epoch: 3}}}, recs: []Record{UnregisterBrokerRecord{NodeID: 1, Epoch: 2}}, wantErr: true},
		{
			name:    "unregistered twice in one entry",
			setup:   [][]Record{{RegisterBrokerRecord{NodeID: 1, Epoch: 3}}},
			recs:    []Record{UnregisterBrokerRecord{NodeID: 1, Epoch: 3}, UnregisterBrokerRecord{NodeID: 1, Epoch: 3}},
			wantErr: true,
		},
		{
			name:  "reassignment fields set and cleared, recovery state, epoch bump",
			setup: [][]Record{topicA(1), {PartitionChangeRecord{Topic: idA, Partition: 0, Replicas: []int32{3, 1, 2}, AddingReplicas: []int32{3}, RemovingReplicas: []int32{2}}}},
			recs: []Record{PartitionChangeRecord{
				Topic: idA, Partition: 0, Replicas: []int32{3, 1}, AddingReplicas: []int32{}, RemovingReplicas: []int32{},
				LeaderRecoveryState: ptr(Recovering), BumpLeaderEpoch: true,
			}},
			check: func(t *testing.T, img *Image) {
				tp, _ := img.Topic("a")
				p := tp.Partitions[0]
				if p.Reassigning() || p.AddingReplicas != nil || !reflect.DeepEqual(p.Replicas, []int32{3, 1}) ||
					p.LeaderRecoveryState != Recovering || p.Leader != 1 || p.LeaderEpoch != 1 || p.PartitionEpoch != 2 {
					t.Fatalf("partition = %+v", p)
				}
			},
		},
		{
			name:  "producer ids move forward",
			setup: [][]Record{{ProducerIDsRecord{NextProducerID: 1000}}},
			recs:  []Record{ProducerIDsRecord{NextProducerID: 2000}},
			check: func(t *testing.T, img *Image) {
				if img.NextProducerID() != 2000 {
					t.Fatalf("next = %d", img.NextProducerID())
				}
			},
		},
		{name: "producer ids never go backwards", setup: [][]Record{{ProducerIDsRecord{NextProducerID: 1000}}}, recs: []Record{ProducerIDsRecord{NextProducerID: 999}}, wantErr: true},
		{
			name: "pointer records apply like values",
			recs: []Record{&TopicRecord{Name: "a", ID: idA}, &ClusterRecord{ClusterID: "c1"}},
			check: func(t *testing.T, img *Image) {
				if _, ok := img.Topic("a"); !ok || img.ClusterID() != "c1" {
					t.Fatalf("image = %+v", img)
				}
			},
		},
		{
			name:    "all or nothing",
			recs:    []Record{TopicRecord{Name: "b", ID: idB}, RemoveTopicRecord{ID: idA}},
			wantErr: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			prev := mustApply(t, tt.setup...)
			prevRecords := prev.Records()
			off := prev.Offset() + 1
			next, err := Apply(prev, off, tt.recs)
			if tt.wantErr {
				if !errors.Is(err, ErrInvalidRecord) {
					t.Fatalf("err = %v, want ErrInvalidRecord", err)
				}
			} else {
				if err != nil {
					t.Fatal(err)
				}
				if next.Offset() != off {
					t.Fatalf("offset = %d, want %d", next.Offset(), off)
				}
				if tt.check != nil {
					tt.check(t, next)
				}
				// A snapshot of the new image rebuilds it.
				rebuilt, err := Apply(EmptyImage(), next.Offset(), next.Records())
				if err != nil {
					t.Fatalf("rebuild from Records: %v", err)
				}
				if !reflect.DeepEqual(rebuilt.Records(), next.Records()) {
					t.Fatalf("rebuilt image differs:\n%v\n%v", rebuilt.Records(), next.Records())
				}
			}
			// The previous image is untouched, whatever happened.
			if !reflect.DeepEqual(prev.Records(), prevRecords) {
				t.Fatalf("Apply modified its input image")
			}
		})
	}
}

func TestApplyOffsetMustIncrease(t *testing.T) {
	img := mustApply(t, nil, nil)
	if img.Offset() != 1 {
		t.Fatalf("offset = %d", img.Offset())
	}
	if _, err := Apply(img, 1, nil); !errors.Is(err, ErrInvalidRecord) {
		t.Fatalf("err = %v", err)
	}
}

func TestApplySharesUntouchedTopics(t *testing.T) {
	img := mustApply(t, topicA(1), []Record{TopicRecord{Name: "b", ID: idB}})
	next, err := Apply(img, 5, []Record{ConfigRecord{ResourceType: ResourceTopic, ResourceName: "a", Name: "k", Value: ptr("v")}})
	if err != nil {
		t.Fatal(err)
	}
	oldB, _ := img.Topic("b")
	newB, _ := next.Topic("b")
	if oldB != newB {
		t.Fatal("untouched topic was copied")
	}
	oldA, _ := img.Topic("a")
	newA, _ := next.Topic("a")
	if oldA == newA || len(oldA.Configs) != 0 || newA.Configs["k"] != "v" {
		t.Fatalf("changed topic not copied on write: old %+v new %+v", oldA, newA)
	}
	if next.Topics()[0] != newA {
		t.Fatal("Topics() not refreshed")
	}
}

func TestCollidingTopic(t *testing.T) {
	img := mustApply(t, []Record{TopicRecord{Name: "a.b", ID: idA}, TopicRecord{Name: "plain", ID: idB}})
	tests := []struct{ name, want string }{
		{"a_b", "a.b"},
		{"a.b", ""},
		{"a-b", ""},
		{"plain", ""},
	}
	for _, tt := range tests {
		if got := img.CollidingTopic(tt.name); got != tt.want {
			t.Errorf("CollidingTopic(%q) = %q, want %q", tt.name, got, tt.want)
		}
	}
}

func TestEncodeDecode(t *testing.T) {
	recs := []Record{
		RegisterBrokerRecord{NodeID: 1, Epoch: 2, Endpoints: []Endpoint{{Name: "PLAINTEXT", Host: "127.0.0.1", Port: 9092}}, Rack: "r1"},
		TopicRecord{Name: "t", ID: NewTopicID()},
		PartitionRecord{Topic: idA, Partition: 3, Replicas: []int32{1, 2}, ISR: []int32{1}, Leader: 1, LeaderEpoch: 4, PartitionEpoch: 5},
		PartitionChangeRecord{Topic: idA, Partition: 1, ISR: []int32{2}, Leader: ptr[int32](2)},
		PartitionChangeRecord{Topic: idA, Partition: 1, AddingReplicas: []int32{}, RemovingReplicas: []int32{3}, LeaderRecoveryState: ptr(Recovered), BumpLeaderEpoch: true},
		PartitionChangeRecord{Topic: idA, Partition: 1, OfflineReplicas: []int32{}},
		PartitionChangeRecord{Topic: idA, Partition: 2, OfflineReplicas: []int32{1, 3}},
		PartitionRecord{Topic: idA, Partition: 5, Replicas: []int32{1, 2}, ISR: []int32{1}, Leader: -1, OfflineReplicas: []int32{1}},
		PartitionRecord{Topic: idA, Partition: 4, Replicas: []int32{1, 2}, ISR: []int32{1}, Leader: 1, AddingReplicas: []int32{2}, LeaderRecoveryState: Recovering},
		RegisterBrokerRecord{NodeID: 3, Epoch: 9, IncarnationID: "0f", InControlledShutdown: true, Fenced: true},
		BrokerRegistrationChangeRecord{NodeID: 3, Epoch: 9, Fenced: ptr(false)},
		UnregisterBrokerRecord{NodeID: 3, Epoch: 9},
		ConfigRecord{ResourceType: ResourceTopic, ResourceName: "t", Name: "retention.ms", Value: ptr("1")},
		ConfigRecord{ResourceType: ResourceBroker, ResourceName: "1", Name: "x"},
		RemoveTopicRecord{ID: idB},
		ProducerIDsRecord{NextProducerID: 1 << 40},
		ClusterRecord{ClusterID: "abc"},
	}
	for _, r := range recs {
		got, err := Decode(Encode(r))
		if err != nil {
			t.Fatalf("%T: %v", r, err)
		}
		if !reflect.DeepEqual(got, r) {
			t.Fatalf("round trip: got %#v, want %#v", got, r)
		}
	}
	got, err := DecodeBatch(EncodeBatch(recs))
	if err != nil || !reflect.DeepEqual(got, recs) {
		t.Fatalf("batch round trip: %v\n%#v", err, got)
	}
}

func TestDecodeRejects(t *testing.T) {
	for _, in := range []string{
		``,
		`{`,
		`{"v":2,"type":"topic","record":{}}`,
		`{"v":1,"type":"nope","record":{}}`,
		`{"v":1,"type":"topic","record":{"id":"zz"}}`,
		`{"v":1,"type":"topic","record":[]}`,
	} {
		if _, err := Decode([]byte(in)); !errors.Is(err, ErrCorruptRecord) {
			t.Errorf("Decode(%q) err = %v, want ErrCorruptRecord", in, err)
		}
	}
	if _, err := DecodeBatch([]byte(`[{"v":1,"type":"nope"}]`)); !errors.Is(err, ErrCorruptRecord) {
		t.Errorf("DecodeBatch err = %v", err)
	}
}

func TestNewTopicIDUnique(t *testing.T) {
	seen := map[TopicID]bool{}
	for range 1000 {
		id := NewTopicID()
		if id.IsZero() || seen[id] {
			t.Fatalf("bad id %s", id)
		}
		seen[id] = true
	}
	var back TopicID
	id := NewTopicID()
	if err := back.UnmarshalText([]byte(id.String())); err != nil || back != id {
		t.Fatalf("text round trip: %v", err)
	}
}

// TestApplyGroupConfigs: GROUP config resources are kept per group, deleted, and
// survive an image rebuilt from its own records.
func TestApplyGroupConfigs(t *testing.T) {
	v := func(s string) *string { return &s }
	img := mustApply(t,
		[]Record{ConfigRecord{ResourceType: ResourceGroup, ResourceName: "g", Name: "share.auto.offset.reset", Value: v("earliest")}},
		[]Record{ConfigRecord{ResourceType: ResourceGroup, ResourceName: "h", Name: "share.delivery.count.limit", Value: v("3")}},
		[]Record{ConfigRecord{ResourceType: ResourceGroup, ResourceName: "h", Name: "share.delivery.count.limit"}},
	)
	if got := img.GroupConfigs("g")["share.auto.offset.reset"]; got != "earliest" {
		t.Fatalf("group g: %q", got)
	}
	if img.GroupConfigs("h") != nil {
		t.Fatalf("group h kept %v after its only config was deleted", img.GroupConfigs("h"))
	}
	rebuilt, err := Apply(EmptyImage(), img.Offset(), img.Records())
	if err != nil {
		t.Fatal(err)
	}
	if got := rebuilt.GroupConfigs("g")["share.auto.offset.reset"]; got != "earliest" {
		t.Fatalf("rebuilt image: group g: %q", got)
	}
}

// TestApplyOfflineReplicas: a partition change marks replicas offline and clears the
// mark; a broker registering as a new incarnation clears its marks everywhere (the
// same incarnation registering again does not); the marks survive an image rebuilt
// from its own records, and the image they were applied to is unchanged.
func TestApplyOfflineReplicas(t *testing.T) {
	reg := func(epoch int64, incarnation string) Record {
		return RegisterBrokerRecord{NodeID: 1, Epoch: epoch, IncarnationID: incarnation, Endpoints: []Endpoint{{Name: "PLAINTEXT", Host: "h", Port: 1}}}
	}
	img := mustApply(t, []Record{reg(1, "one")}, topicA(2),
		[]Record{PartitionChangeRecord{Topic: idA, Partition: 0, OfflineReplicas: []int32{1}}})
	offline := func(img *Image) [][]int32 {
		tp, _ := img.TopicByID(idA)
		return [][]int32{tp.Partitions[0].OfflineReplicas, tp.Partitions[1].OfflineReplicas}
	}
	if got := offline(img); !reflect.DeepEqual(got, [][]int32{{1}, nil}) {
		t.Fatalf("after the change: %v", got)
	}
	if tp, _ := img.TopicByID(idA); tp.Partitions[0].PartitionEpoch != 1 {
		t.Fatalf("partition epoch %d after the change, want 1", tp.Partitions[0].PartitionEpoch)
	}
	rebuilt, err := Apply(EmptyImage(), img.Offset(), img.Records())
	if err != nil {
		t.Fatal(err)
	}
	if got := offline(rebuilt); !reflect.DeepEqual(got, [][]int32{{1}, nil}) {
		t.Fatalf("rebuilt from the image's records: %v", got)
	}
	same, err := Apply(img, img.Offset()+1, []Record{reg(2, "one")})
	if err != nil {
		t.Fatal(err)
	}
	if got := offline(same); !reflect.DeepEqual(got, [][]int32{{1}, nil}) {
		t.Fatalf("after the same incarnation registered again: %v", got)
	}
	restarted, err := Apply(img, img.Offset()+1, []Record{reg(3, "two")})
	if err != nil {
		t.Fatal(err)
	}
	if got := offline(restarted); !reflect.DeepEqual(got, [][]int32{nil, nil}) {
		t.Fatalf("after a new incarnation registered: %v", got)
	}
	if got := offline(img); !reflect.DeepEqual(got, [][]int32{{1}, nil}) {
		t.Fatalf("the earlier image changed: %v", got)
	}
	cleared, err := Apply(img, img.Offset()+1, []Record{PartitionChangeRecord{Topic: idA, Partition: 0, OfflineReplicas: []int32{}}})
	if err != nil {
		t.Fatal(err)
	}
	if got := offline(cleared); !reflect.DeepEqual(got, [][]int32{nil, nil}) {
		t.Fatalf("after a change clearing the marks: %v", got)
	}
}
