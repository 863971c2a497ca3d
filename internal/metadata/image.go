package metadata

import (
	"maps"
	"slices"
	"strings"
)

// Broker is a registered broker as the image knows it.
type Broker struct {
	NodeID        NodeID
	Epoch         int64
	IncarnationID string
	Endpoints     []Endpoint // one per advertised listener, in the broker's order
	Rack          string
	// Fenced brokers lead nothing, join no ISR and get no new replicas: a broker
	// registers fenced and is unfenced once it has caught up with the metadata log;
	// it is fenced again when its heartbeats stop for broker.session.timeout.ms.
	Fenced bool
	// InControlledShutdown: the broker asked to shut down; its leaderships are being
	// moved away and it leaves every ISR it can.
	InControlledShutdown bool
	// RegisteredOffset is the metadata offset of the entry holding the broker's
	// registration (the snapshot's offset when the image was loaded from one): once
	// the broker has applied that far it has seen its own registration.
	RegisteredOffset int64
}

// Active reports whether the broker may lead partitions and be in an ISR.
func (b Broker) Active() bool { return !b.Fenced && !b.InControlledShutdown }

// Endpoint returns the broker's endpoint of listener name (upper case).
func (b Broker) Endpoint(name string) (Endpoint, bool) {
	for _, e := range b.Endpoints {
		if e.Name == name {
			return e, true
		}
	}
	return Endpoint{}, false
}

// Topic is one topic. Partitions is indexed by partition id. Shared between images:
// read only.
type Topic struct {
	Name       string
	ID         TopicID
	Partitions []Partition
	Configs    map[string]string // topic-level overrides only; never nil
}

// Partition is the replication state of one partition, as the active controller
// decided it. Only the controller changes it; leaders ask for ISR changes with
// AlterPartition and followers act on nothing but this.
type Partition struct {
	Partition int32
	// Replicas is the assigned replica set, preferred leader first. During a
	// reassignment it holds the target replicas followed by the ones being removed.
	Replicas []int32
	// ISR is the in-sync replica set; never empty once created (the last member of
	// a partition whose leader went away stays, so the partition is offline rather
	// than silently led by an out-of-sync replica).
	ISR    []int32
	Leader int32 // NoLeader if none (an offline partition)
	// LeaderEpoch grows with every leader change (and when replicas are removed);
	// PartitionEpoch grows with every change at all. AlterPartition must name both.
	LeaderEpoch    int32
	PartitionEpoch int32
	// AddingReplicas and RemovingReplicas are non-empty while a reassignment moves
	// the partition: adding replicas catch up and join the ISR, then the removing
	// ones leave Replicas.
	AddingReplicas   []int32
	RemovingReplicas []int32
	// LeaderRecoveryState is Recovering after an unclean election until the leader
	// reports it has recovered.
	LeaderRecoveryState LeaderRecoveryState
	// OfflineReplicas are the replicas whose broker reported them offline (their log
	// directory failed) since it registered: none of them may lead or join the ISR
	// until its broker registers again, as a new process (KIP-858's lost directory).
	OfflineReplicas []int32
}

// Reassigning reports whether a reassignment of the partition is in progress.
func (p Partition) Reassigning() bool {
	return len(p.AddingReplicas) > 0 || len(p.RemovingReplicas) > 0
}

// Image is an immutable view of the cluster metadata at one offset of the metadata
// log. The zero value is not valid; start from EmptyImage.
type Image struct {
	offset         int64
	clusterID      string
	brokers        map[NodeID]Broker
	topics         map[string]*Topic
	topicsByID     map[TopicID]*Topic
	sortedTopics   []*Topic // by name
	brokerConfigs  map[string]map[string]string
	groupConfigs   map[string]map[string]string
	nextProducerID int64
	sec            security // credentials, ACLs, quotas (security.go)
}

// EmptyImage returns the image before any record: offset -1, nothing registered.
func EmptyImage() *Image {
	return &Image{
		offset:        -1,
		brokers:       map[NodeID]Broker{},
		topics:        map[string]*Topic{},
		topicsByID:    map[TopicID]*Topic{},
		brokerConfigs: map[string]map[string]string{},
		groupConfigs:  map[string]map[string]string{},
	}
}

// Offset is the offset of the last metadata log entry applied (-1 for none).
func (img *Image) Offset() int64 { return img.offset }

// ClusterID is the id set by a ClusterRecord, "" if none was applied.
func (img *Image) ClusterID() string { return img.clusterID }

// Brokers returns every registered broker (fenced or not), sorted by node id.
func (img *Image) Brokers() []Broker {
	out := make([]Broker, 0, len(img.brokers))
	for _, b := range img.brokers {
		out = append(out, b)
	}
	slices.SortFunc(out, func(a, b Broker) int { return int(a.NodeID) - int(b.NodeID) })
	return out
}

// Broker returns the registered broker id.
func (img *Image) Broker(id NodeID) (Broker, bool) {
	b, ok := img.brokers[id]
	return b, ok
}

// UnfencedBrokers returns the ids of registered, unfenced brokers, sorted.
func (img *Image) UnfencedBrokers() []int32 {
	var out []int32
	for id, b := range img.brokers {
		if !b.Fenced {
			out = append(out, int32(id))
		}
	}
	slices.Sort(out)
	return out
}

// Topics returns every topic, sorted by name. The slice is shared: do not modify it.
func (img *Image) Topics() []*Topic { return img.sortedTopics }

// Topic returns the topic called name.
func (img *Image) Topic(name string) (*Topic, bool) {
	t, ok := img.topics[name]
	return t, ok
}

// TopicByID returns the topic with id.
func (img *Image) TopicByID(id TopicID) (*Topic, bool) {
	t, ok := img.topicsByID[id]
	return t, ok
}

// BrokerConfigs returns the dynamic configs of resource name: a node id in decimal,
// or "" for the cluster-wide defaults. The map is shared: do not modify it. It is nil
// when nothing is set.
func (img *Image) BrokerConfigs(name string) map[string]string { return img.brokerConfigs[name] }

// GroupConfigs returns the configs set on a group (GROUP config resources); read only.
func (img *Image) GroupConfigs(name string) map[string]string { return img.groupConfigs[name] }

// ConfiguredGroups returns the groups with a config set, sorted.
func (img *Image) ConfiguredGroups() []string { return slices.Sorted(maps.Keys(img.groupConfigs)) }

// NextProducerID is the first producer id not yet allocated.
func (img *Image) NextProducerID() int64 { return img.nextProducerID }

// CollidingTopic returns an existing topic whose name equals name once '.' and '_'
// are considered the same character (Kafka refuses such pairs because metric names
// would clash), or "" if there is none. A topic never collides with itself.
func (img *Image) CollidingTopic(name string) string {
	if !strings.ContainsAny(name, "._") {
		return ""
	}
	want := strings.ReplaceAll(name, ".", "_")
	for _, t := range img.sortedTopics {
		if t.Name != name && strings.ReplaceAll(t.Name, ".", "_") == want {
			return t.Name
		}
	}
	return ""
}

// Records returns records that rebuild this image when applied, in order, to
// EmptyImage (the image's offset is not a record: pass it to Apply). Snapshots are
// written this way.
func (img *Image) Records() []Record {
	var recs []Record
	if img.clusterID != "" {
		recs = append(recs, ClusterRecord{ClusterID: img.clusterID})
	}
	for _, b := range img.Brokers() {
		recs = append(recs, RegisterBrokerRecord{
			NodeID: b.NodeID, Epoch: b.Epoch, IncarnationID: b.IncarnationID,
			Endpoints: slices.Clone(b.Endpoints), Rack: b.Rack,
			Fenced: b.Fenced, InControlledShutdown: b.InControlledShutdown,
		})
	}
	for _, name := range slices.Sorted(maps.Keys(img.brokerConfigs)) {
		recs = appendConfigRecords(recs, ResourceBroker, name, img.brokerConfigs[name])
	}
	for _, name := range slices.Sorted(maps.Keys(img.groupConfigs)) {
		recs = appendConfigRecords(recs, ResourceGroup, name, img.groupConfigs[name])
	}
	for _, t := range img.sortedTopics {
		recs = append(recs, TopicRecord{Name: t.Name, ID: t.ID})
		for _, p := range t.Partitions {
			recs = append(recs, PartitionRecord{
				Topic: t.ID, Partition: p.Partition,
				Replicas: slices.Clone(p.Replicas), ISR: slices.Clone(p.ISR),
				Leader: p.Leader, LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch,
				AddingReplicas: slices.Clone(p.AddingReplicas), RemovingReplicas: slices.Clone(p.RemovingReplicas),
				LeaderRecoveryState: p.LeaderRecoveryState, OfflineReplicas: slices.Clone(p.OfflineReplicas),
			})
		}
		recs = appendConfigRecords(recs, ResourceTopic, t.Name, t.Configs)
	}
	if img.nextProducerID > 0 {
		recs = append(recs, ProducerIDsRecord{NextProducerID: img.nextProducerID})
	}
	recs = append(recs, img.securityRecords()...)
	return append(recs, img.tokenRecords()...)
}

func appendConfigRecords(recs []Record, typ int8, resource string, configs map[string]string) []Record {
	for _, k := range slices.Sorted(maps.Keys(configs)) {
		v := configs[k]
		recs = append(recs, ConfigRecord{ResourceType: typ, ResourceName: resource, Name: k, Value: &v})
	}
	return recs
}
