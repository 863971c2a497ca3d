package metadata

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Apply returns the image after applying recs, which together form the metadata log
// entry at offset. It is all or nothing: if any record cannot apply, Apply returns
// the error (wrapping ErrInvalidRecord) and no image. img is never modified.
// An empty recs only advances the offset.
func Apply(img *Image, offset int64, recs []Record) (*Image, error) {
	if offset <= img.offset {
		return nil, fmt.Errorf("%w: offset %d not after image offset %d", ErrInvalidRecord, offset, img.offset)
	}
	b := builder{prev: img, next: *img}
	b.next.offset = offset
	if img.offset < 0 {
		// A replay from scratch (a snapshot): whatever ACLs and quotas it holds are
		// as of offset, and their versions must be above those of any image of the
		// log before it (security.go).
		b.next.sec.aclVersion, b.next.sec.quotaVersion = uint64(offset)+1, uint64(offset)+1
	}
	for i, r := range recs {
		if err := b.apply(r); err != nil {
			return nil, fmt.Errorf("record %d (%T): %w", i, r, err)
		}
	}
	if b.topicsChanged {
		b.next.sortedTopics = slices.SortedFunc(maps.Values(b.next.topics), func(a, c *Topic) int {
			return strings.Compare(a.Name, c.Name)
		})
	}
	return &b.next, nil
}

// builder accumulates a new image; it copies an index of the previous image the first
// time it changes it, and a topic the first time a record touches it.
type builder struct {
	prev *Image
	next Image

	brokersCopied, topicsCopied, brokerConfigsCopied bool
	groupConfigsCopied                               bool
	topicsChanged                                    bool
	ownedTopics                                      map[TopicID]bool // topics already copied for this image
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalidRecord}, args...)...)
}

func (b *builder) apply(r Record) error {
	switch r := r.(type) {
	case *RegisterBrokerRecord:
		return b.apply(*r)
	case *BrokerRegistrationChangeRecord:
		return b.apply(*r)
	case *UnregisterBrokerRecord:
		return b.apply(*r)
	case *TopicRecord:
		return b.apply(*r)
	case *PartitionRecord:
		return b.apply(*r)
	case *PartitionChangeRecord:
		return b.apply(*r)
	case *ConfigRecord:
		return b.apply(*r)
	case *RemoveTopicRecord:
		return b.apply(*r)
	case *ProducerIDsRecord:
		return b.apply(*r)
	case *ClusterRecord:
		return b.apply(*r)
	case *UserScramCredentialRecord:
		return b.apply(*r)
	case *RemoveUserScramCredentialRecord:
		return b.apply(*r)
	case *AccessControlEntryRecord:
		return b.apply(*r)
	case *RemoveAccessControlEntryRecord:
		return b.apply(*r)
	case *ClientQuotaRecord:
		return b.apply(*r)
	case *DelegationTokenRecord:
		return b.apply(*r)
	case *RemoveDelegationTokenRecord:
		return b.apply(*r)

	case RegisterBrokerRecord:
		if prev, ok := b.next.brokers[r.NodeID]; !ok || prev.IncarnationID != r.IncarnationID || r.IncarnationID == "" {
			if err := b.forgetOfflineReplicas(int32(r.NodeID)); err != nil {
				return err
			}
		}
		b.copyBrokers()
		b.next.brokers[r.NodeID] = Broker{
			NodeID: r.NodeID, Epoch: r.Epoch, IncarnationID: r.IncarnationID,
			Endpoints: slices.Clone(r.Endpoints), Rack: r.Rack,
			Fenced: r.Fenced, InControlledShutdown: r.InControlledShutdown,
			RegisteredOffset: b.next.offset,
		}
	case BrokerRegistrationChangeRecord:
		br, err := b.registered(r.NodeID, r.Epoch, "registration change")
		if err != nil {
			return err
		}
		if r.Fenced != nil {
			br.Fenced = *r.Fenced
		}
		if r.InControlledShutdown != nil {
			br.InControlledShutdown = *r.InControlledShutdown
		}
		b.copyBrokers()
		b.next.brokers[r.NodeID] = br
	case UnregisterBrokerRecord:
		if _, err := b.registered(r.NodeID, r.Epoch, "unregistration"); err != nil {
			return err
		}
		b.copyBrokers()
		delete(b.next.brokers, r.NodeID)
	case TopicRecord:
		return b.applyTopic(r)
	case PartitionRecord:
		return b.applyPartition(r)
	case PartitionChangeRecord:
		return b.applyPartitionChange(r)
	case ConfigRecord:
		return b.applyConfig(r)
	case RemoveTopicRecord:
		t, ok := b.next.topicsByID[r.ID]
		if !ok {
			return invalid("remove unknown topic id %s", r.ID)
		}
		b.copyTopics()
		delete(b.next.topics, t.Name)
		delete(b.next.topicsByID, t.ID)
	case ProducerIDsRecord:
		if r.NextProducerID < b.next.nextProducerID {
			return invalid("next producer id %d below %d", r.NextProducerID, b.next.nextProducerID)
		}
		b.next.nextProducerID = r.NextProducerID
	case ClusterRecord:
		if r.ClusterID == "" {
			return invalid("empty cluster id")
		}
		b.next.clusterID = r.ClusterID
	default:
		if handled, err := b.applySecurity(r); handled {
			return err
		}
		if handled, err := b.applyToken(r); handled {
			return err
		}
		return invalid("unknown record type %T", r)
	}
	return nil
}

func (b *builder) applyTopic(r TopicRecord) error {
	if r.Name == "" || r.ID.IsZero() {
		return invalid("topic record needs a name and an id")
	}
	if _, ok := b.next.topics[r.Name]; ok {
		return invalid("topic %q exists", r.Name)
	}
	if _, ok := b.next.topicsByID[r.ID]; ok {
		return invalid("topic id %s exists", r.ID)
	}
	b.copyTopics()
	t := &Topic{Name: r.Name, ID: r.ID, Configs: map[string]string{}}
	b.next.topics[t.Name] = t
	b.next.topicsByID[t.ID] = t
	b.ownedTopics[t.ID] = true
	return nil
}

func (b *builder) applyPartition(r PartitionRecord) error {
	t, err := b.mutableTopic(r.Topic)
	if err != nil {
		return err
	}
	if r.Partition < 0 || int(r.Partition) > len(t.Partitions) {
		return invalid("partition %d of topic %q (has %d)", r.Partition, t.Name, len(t.Partitions))
	}
	if len(r.Replicas) == 0 {
		return invalid("partition %d of topic %q has no replicas", r.Partition, t.Name)
	}
	p := Partition{
		Partition: r.Partition, Replicas: slices.Clone(r.Replicas), ISR: slices.Clone(r.ISR),
		Leader: r.Leader, LeaderEpoch: r.LeaderEpoch, PartitionEpoch: r.PartitionEpoch,
		AddingReplicas: nilIfEmpty(r.AddingReplicas), RemovingReplicas: nilIfEmpty(r.RemovingReplicas),
		LeaderRecoveryState: r.LeaderRecoveryState, OfflineReplicas: nilIfEmpty(r.OfflineReplicas),
	}
	if int(r.Partition) == len(t.Partitions) {
		t.Partitions = append(t.Partitions, p)
	} else {
		t.Partitions[r.Partition] = p
	}
	return nil
}

func (b *builder) applyPartitionChange(r PartitionChangeRecord) error {
	t, err := b.mutableTopic(r.Topic)
	if err != nil {
		return err
	}
	if r.Partition < 0 || int(r.Partition) >= len(t.Partitions) {
		return invalid("partition %d of topic %q (has %d)", r.Partition, t.Name, len(t.Partitions))
	}
	p := &t.Partitions[r.Partition]
	changed := false
	if r.Replicas != nil {
		if len(r.Replicas) == 0 {
			return invalid("partition %d of topic %q: empty replica set", r.Partition, t.Name)
		}
		p.Replicas = slices.Clone(r.Replicas)
		changed = true
	}
	if r.ISR != nil {
		p.ISR = slices.Clone(r.ISR)
		changed = true
	}
	if r.AddingReplicas != nil {
		p.AddingReplicas = nilIfEmpty(r.AddingReplicas)
		changed = true
	}
	if r.RemovingReplicas != nil {
		p.RemovingReplicas = nilIfEmpty(r.RemovingReplicas)
		changed = true
	}
	if r.OfflineReplicas != nil {
		p.OfflineReplicas = nilIfEmpty(r.OfflineReplicas)
		changed = true
	}
	if r.LeaderRecoveryState != nil && *r.LeaderRecoveryState != p.LeaderRecoveryState {
		p.LeaderRecoveryState = *r.LeaderRecoveryState
		changed = true
	}
	if r.Leader != nil && *r.Leader != p.Leader || r.BumpLeaderEpoch {
		if r.Leader != nil {
			p.Leader = *r.Leader
		}
		p.LeaderEpoch++
		changed = true
	}
	if changed {
		p.PartitionEpoch++
	}
	return nil
}

// forgetOfflineReplicas takes broker out of every partition's OfflineReplicas (a new
// incarnation of it registered).
func (b *builder) forgetOfflineReplicas(broker int32) error {
	for _, t := range b.next.topicsByID {
		for i := range t.Partitions {
			if !slices.Contains(t.Partitions[i].OfflineReplicas, broker) {
				continue
			}
			mt, err := b.mutableTopic(t.ID)
			if err != nil {
				return err
			}
			p := &mt.Partitions[i]
			p.OfflineReplicas = nilIfEmpty(slices.DeleteFunc(slices.Clone(p.OfflineReplicas), func(r int32) bool { return r == broker }))
		}
	}
	return nil
}

func (b *builder) applyConfig(r ConfigRecord) error {
	if r.Name == "" {
		return invalid("config record without a name")
	}
	switch r.ResourceType {
	case ResourceTopic:
		prev, ok := b.next.topics[r.ResourceName]
		if !ok {
			return invalid("config for unknown topic %q", r.ResourceName)
		}
		t, err := b.mutableTopic(prev.ID)
		if err != nil {
			return err
		}
		setOrDelete(t.Configs, r.Name, r.Value)
	case ResourceBroker:
		b.copyBrokerConfigs()
		setResourceConfig(b.next.brokerConfigs, r)
	case ResourceGroup:
		if !b.groupConfigsCopied {
			b.next.groupConfigs = maps.Clone(b.prev.groupConfigs)
			if b.next.groupConfigs == nil {
				b.next.groupConfigs = map[string]map[string]string{}
			}
			b.groupConfigsCopied = true
		}
		setResourceConfig(b.next.groupConfigs, r)
	default:
		return invalid("config resource type %d", r.ResourceType)
	}
	return nil
}

// nilIfEmpty keeps "no replicas" as nil in images, however a record spelled it.
func nilIfEmpty(xs []int32) []int32 {
	if len(xs) == 0 {
		return nil
	}
	return slices.Clone(xs)
}

func setOrDelete(m map[string]string, name string, value *string) {
	if value == nil {
		delete(m, name)
	} else {
		m[name] = *value
	}
}

// mutableTopic returns a copy of topic id private to the image being built.
func (b *builder) mutableTopic(id TopicID) (*Topic, error) {
	t, ok := b.next.topicsByID[id]
	if !ok {
		return nil, invalid("unknown topic id %s", id)
	}
	b.copyTopics()
	if b.ownedTopics[id] {
		return t, nil
	}
	c := &Topic{
		Name: t.Name, ID: t.ID,
		Partitions: slices.Clone(t.Partitions),
		Configs:    maps.Clone(t.Configs),
	}
	b.next.topics[c.Name] = c
	b.next.topicsByID[c.ID] = c
	b.ownedTopics[id] = true
	return c, nil
}

// registered returns broker id's registration for a record (what, for the error)
// that names it at epoch: it must be registered, at that epoch.
func (b *builder) registered(id NodeID, epoch int64, what string) (Broker, error) {
	br, ok := b.next.brokers[id]
	if !ok {
		return Broker{}, invalid("%s of unregistered broker %d", what, id)
	}
	if br.Epoch != epoch {
		return Broker{}, invalid("%s of broker %d at epoch %d, registered at %d", what, id, epoch, br.Epoch)
	}
	return br, nil
}

func (b *builder) copyBrokers() {
	if !b.brokersCopied {
		b.next.brokers = maps.Clone(b.prev.brokers)
		b.brokersCopied = true
	}
}

func (b *builder) copyTopics() {
	b.topicsChanged = true
	if !b.topicsCopied {
		b.next.topics = maps.Clone(b.prev.topics)
		b.next.topicsByID = maps.Clone(b.prev.topicsByID)
		b.ownedTopics = map[TopicID]bool{}
		b.topicsCopied = true
	}
}

// setResourceConfig applies a config record to the configs of its resource in all
// (copied on write: images share the inner maps).
func setResourceConfig(all map[string]map[string]string, r ConfigRecord) {
	m := maps.Clone(all[r.ResourceName])
	if m == nil {
		m = map[string]string{}
	}
	setOrDelete(m, r.Name, r.Value)
	if len(m) == 0 {
		delete(all, r.ResourceName)
	} else {
		all[r.ResourceName] = m
	}
}

func (b *builder) copyBrokerConfigs() {
	if !b.brokerConfigsCopied {
		b.next.brokerConfigs = maps.Clone(b.prev.brokerConfigs)
		b.brokerConfigsCopied = true
	}
}
