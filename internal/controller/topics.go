package controller

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/samsa-streaming/samsa/internal/metadata"
)

// CreateTopic is one topic of a CreateTopics call.
type CreateTopic struct {
	Name              string
	NumPartitions     int32 // -1 = num.partitions
	ReplicationFactor int16 // -1 = default.replication.factor
	// Assignments optionally gives the replicas of each partition (partition id →
	// broker ids, leader first). NumPartitions and ReplicationFactor must then be -1.
	Assignments map[int32][]int32
	Configs     map[string]string
	// NullConfigs are configs the request named without a value, which Kafka refuses
	// (INVALID_CONFIG).
	NullConfigs []string
	// AssignedTwice are partitions the request's assignments name more than once,
	// which Kafka refuses (INVALID_REPLICA_ASSIGNMENT); Assignments keeps one.
	AssignedTwice []int32
}

// TopicResult is the outcome for one topic of CreateTopics or DeleteTopics.
// NumPartitions and ReplicationFactor are -1 when Err is set.
type TopicResult struct {
	Name              string
	ID                metadata.TopicID
	NumPartitions     int32
	ReplicationFactor int16
	Err               error
}

// maxTopicNameLength is Kafka's limit (249: room for a partition suffix in a file name).
const maxTopicNameLength = 249

// maxNewPartitions bounds the partitions one call may create, all its topics
// together, so that no request can make the controller build an unbounded metadata
// entry (Kafka's limit on partitions per CreateTopics request, POLICY_VIOLATION).
const maxNewPartitions = 10_000

// clusterMetadataTopic would collide with the metadata log directory on disk.
const clusterMetadataTopic = "__cluster_metadata"

// ValidateTopicName applies Kafka's topic-name rules; the error wraps ErrInvalidTopic.
func ValidateTopicName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: topic name is empty", ErrInvalidTopic)
	case name == "." || name == "..":
		return fmt.Errorf("%w: topic name cannot be %q", ErrInvalidTopic, name)
	case len(name) > maxTopicNameLength:
		return fmt.Errorf("%w: topic name is longer than %d characters", ErrInvalidTopic, maxTopicNameLength)
	case name == clusterMetadataTopic:
		return fmt.Errorf("%w: topic name %q is reserved", ErrInvalidTopic, name)
	}
	for _, r := range name {
		legal := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-'
		if !legal {
			return fmt.Errorf("%w: topic name %q contains characters other than ASCII alphanumerics, '.', '_' and '-'", ErrInvalidTopic, name)
		}
	}
	return nil
}

// CreateTopics creates topics, each independently: the result of each says whether
// it was created. With validateOnly nothing is written.
func (c *Controller) CreateTopics(ctx context.Context, topics []CreateTopic, validateOnly bool) []TopicResult {
	results, err := run(ctx, c, func(ctx context.Context) ([]TopicResult, error) {
		return c.createTopics(ctx, topics, validateOnly), nil
	})
	if err != nil {
		results = make([]TopicResult, len(topics))
		for i, t := range topics {
			results[i] = errorResult(t.Name, err)
		}
	}
	return results
}

func errorResult(name string, err error) TopicResult {
	return TopicResult{Name: name, NumPartitions: -1, ReplicationFactor: -1, Err: err}
}

func (c *Controller) createTopics(ctx context.Context, topics []CreateTopic, validateOnly bool) []TopicResult {
	results := make([]TopicResult, len(topics))
	if !validateOnly {
		if err := c.requireLeader(); err != nil {
			for i, t := range topics {
				results[i] = errorResult(t.Name, err)
			}
			return results
		}
	}
	img := c.Image()
	count := map[string]int{}
	total := int64(0)
	for _, t := range topics {
		count[t.Name]++
		n := int64(t.NumPartitions)
		switch {
		case len(t.Assignments) > 0:
			n = int64(len(t.Assignments))
		case n == -1:
			n = int64(c.opts.DefaultNumPartitions)
		}
		total += max(n, 0)
	}
	if total > maxNewPartitions {
		// As Kafka: the whole request is refused, not its topics past the bound.
		for i, t := range topics {
			results[i] = errorResult(t.Name, fmt.Errorf("%w: the request creates %d partitions in all, more than the %d one request may create; create the topics in several requests",
				ErrPolicyViolation, total, maxNewPartitions))
		}
		return results
	}
	// Names accepted so far in this call, by their normalized form, so that two of
	// them cannot collide.
	accepted := map[string]string{}
	// The topics go in one entry, committed or lost together, as Kafka's
	// ReplicationControlManager.createTopics returns ControllerResult.atomicOf: a
	// leadership move in the middle must not leave some created and others answered
	// NOT_CONTROLLER, for a client then sends them all again (Kafka's admin client
	// and franz-go retry the whole request on NOT_CONTROLLER) and is answered
	// TOPIC_ALREADY_EXISTS for the ones it created. maxNewPartitions bounds the
	// entry.
	var recs []metadata.Record
	var created []int // result indexes of the topics in the entry
	for i, t := range topics {
		if count[t.Name] > 1 {
			results[i] = errorResult(t.Name, fmt.Errorf("%w: topic %q appears more than once in the request", ErrInvalidRequest, t.Name))
			continue
		}
		trecs, res := c.planTopic(img, t, accepted)
		results[i] = res
		if res.Err != nil {
			continue
		}
		accepted[normalizeTopicName(t.Name)] = t.Name
		if validateOnly {
			results[i].ID = metadata.TopicID{}
			continue
		}
		recs = append(recs, trecs...)
		created = append(created, i)
	}
	if len(created) == 0 {
		return results
	}
	err := c.propose(ctx, recs)
	for _, i := range created {
		if err != nil {
			results[i] = errorResult(results[i].Name, err)
			continue
		}
		c.logger.Info("created topic", "topic", results[i].Name, "topic_id", results[i].ID.String(),
			"partitions", results[i].NumPartitions, "replication_factor", results[i].ReplicationFactor)
	}
	return results
}

// planTopic validates t against img (and the names accepted earlier in the same call)
// and returns the records that create it.
func (c *Controller) planTopic(img *metadata.Image, t CreateTopic, accepted map[string]string) ([]metadata.Record, TopicResult) {
	fail := func(err error) ([]metadata.Record, TopicResult) { return nil, errorResult(t.Name, err) }
	if err := ValidateTopicName(t.Name); err != nil {
		return fail(err)
	}
	if _, ok := img.Topic(t.Name); ok {
		return fail(fmt.Errorf("%w: topic %q already exists", ErrTopicExists, t.Name))
	}
	if other := img.CollidingTopic(t.Name); other != "" {
		return fail(fmt.Errorf("%w: topic %q collides with existing topic %q ('.' and '_' are treated alike)", ErrInvalidTopic, t.Name, other))
	}
	if name, ok := accepted[normalizeTopicName(t.Name)]; ok && name != t.Name {
		return fail(fmt.Errorf("%w: topic %q collides with topic %q ('.' and '_' are treated alike)", ErrInvalidTopic, t.Name, name))
	}
	if len(t.NullConfigs) > 0 {
		return fail(fmt.Errorf("%w: topic configs without a value: %s; give each a value or leave it out", ErrInvalidConfig, strings.Join(t.NullConfigs, ",")))
	}

	var assignment [][]int32
	var err error
	if len(t.Assignments) > 0 {
		if t.NumPartitions != -1 || t.ReplicationFactor != -1 {
			return fail(fmt.Errorf("%w: both a replica assignment and numPartitions or replicationFactor were set", ErrInvalidRequest))
		}
		if len(t.AssignedTwice) > 0 {
			return fail(fmt.Errorf("%w: partition %d is assigned more than once: assign each partition once", ErrInvalidReplicaAssignment, t.AssignedTwice[0]))
		}
		assignment, err = manualAssignment(img, t.Assignments)
	} else {
		assignment, err = c.autoAssignment(img, t.NumPartitions, t.ReplicationFactor)
	}
	if err != nil {
		return fail(err)
	}
	for _, name := range slices.Sorted(maps.Keys(t.Configs)) {
		if err := c.opts.ValidateTopicConfig(name, t.Configs[name]); err != nil {
			return fail(fmt.Errorf("%w: %w", ErrInvalidConfig, err))
		}
	}

	id := metadata.NewTopicID()
	recs, err := appendPartitionRecords([]metadata.Record{metadata.TopicRecord{Name: t.Name, ID: id}}, img, id, 0, assignment)
	if err != nil {
		return fail(err)
	}
	for _, name := range slices.Sorted(maps.Keys(t.Configs)) {
		v := t.Configs[name]
		recs = append(recs, metadata.ConfigRecord{ResourceType: metadata.ResourceTopic, ResourceName: t.Name, Name: name, Value: &v})
	}
	return recs, TopicResult{
		Name: t.Name, ID: id,
		NumPartitions:     int32(len(assignment)),
		ReplicationFactor: int16(len(assignment[0])),
	}
}

func normalizeTopicName(name string) string {
	b := []byte(name)
	for i, ch := range b {
		if ch == '.' {
			b[i] = '_'
		}
	}
	return string(b)
}

// appendPartitionRecords creates partitions first, first+1, … with the given
// replicas. The ISR is the active replicas (registered, unfenced, not shutting
// down), the leader the first of them; a partition none of whose replicas is active
// is refused, as Kafka does.
func appendPartitionRecords(recs []metadata.Record, img *metadata.Image, id metadata.TopicID, first int32, assignment [][]int32) ([]metadata.Record, error) {
	active := acceptableIn(img, -1, -1)
	for i, replicas := range assignment {
		var isr []int32
		for _, r := range replicas {
			if active(r) {
				isr = append(isr, r)
			}
		}
		if len(isr) == 0 {
			return nil, fmt.Errorf("%w: every broker assigned to partition %d (%v) is fenced or in controlled shutdown",
				ErrInvalidReplicaAssignment, first+int32(i), replicas)
		}
		recs = append(recs, metadata.PartitionRecord{
			Topic: id, Partition: first + int32(i),
			Replicas: slices.Clone(replicas), ISR: isr, Leader: isr[0],
		})
	}
	return recs, nil
}

// autoAssignment places numPartitions partitions of replicationFactor replicas over
// the unfenced brokers round-robin, starting at a rotating index so that leaders
// spread across topics.
func (c *Controller) autoAssignment(img *metadata.Image, numPartitions int32, replicationFactor int16) ([][]int32, error) {
	if numPartitions == -1 {
		numPartitions = c.opts.DefaultNumPartitions
	}
	if replicationFactor == -1 {
		replicationFactor = c.opts.DefaultReplicationFactor
	}
	if numPartitions < 1 {
		return nil, fmt.Errorf("%w: number of partitions must be larger than 0 (or -1 for the default), got %d", ErrInvalidPartitions, numPartitions)
	}
	if numPartitions > maxNewPartitions {
		return nil, fmt.Errorf("%w: at most %d partitions can be created at once, got %d", ErrInvalidPartitions, maxNewPartitions, numPartitions)
	}
	if replicationFactor < 1 {
		return nil, fmt.Errorf("%w: replication factor must be larger than 0 (or -1 for the default), got %d", ErrInvalidReplicationFactor, replicationFactor)
	}
	return c.place(img, int(numPartitions), int(replicationFactor))
}

func (c *Controller) place(img *metadata.Image, numPartitions, replicationFactor int) ([][]int32, error) {
	start := c.placementStart
	c.placementStart++
	return placeReplicas(placeableBrokers(img), numPartitions, replicationFactor, start)
}

// manualAssignment checks a replica assignment keyed by partition id.
func manualAssignment(img *metadata.Image, assignments map[int32][]int32) ([][]int32, error) {
	if len(assignments) > maxNewPartitions {
		return nil, fmt.Errorf("%w: at most %d partitions can be created at once, got %d", ErrInvalidPartitions, maxNewPartitions, len(assignments))
	}
	out := make([][]int32, len(assignments))
	for p, replicas := range assignments {
		if p < 0 || int(p) >= len(assignments) {
			return nil, fmt.Errorf("%w: partition ids must be consecutive from 0, got %d among %d partitions", ErrInvalidReplicaAssignment, p, len(assignments))
		}
		if err := checkReplicas(img, p, replicas); err != nil {
			return nil, err
		}
		out[p] = slices.Clone(replicas)
	}
	return out, nil
}

func checkReplicas(img *metadata.Image, partition int32, replicas []int32) error {
	if len(replicas) == 0 {
		return fmt.Errorf("%w: partition %d has no replicas", ErrInvalidReplicaAssignment, partition)
	}
	seen := map[int32]bool{}
	for _, r := range replicas {
		if seen[r] {
			return fmt.Errorf("%w: partition %d lists broker %d twice", ErrInvalidReplicaAssignment, partition, r)
		}
		seen[r] = true
		if _, ok := img.Broker(metadata.NodeID(r)); !ok {
			return fmt.Errorf("%w: partition %d is assigned to broker %d, which is not registered", ErrInvalidReplicaAssignment, partition, r)
		}
	}
	return nil
}

// DeleteTopics deletes topics by name and by id. Results list the names first, in
// order, then the ids.
func (c *Controller) DeleteTopics(ctx context.Context, names []string, ids []metadata.TopicID) []TopicResult {
	results, err := run(ctx, c, func(ctx context.Context) ([]TopicResult, error) {
		return c.deleteTopics(ctx, names, ids), nil
	})
	if err != nil {
		results = make([]TopicResult, 0, len(names)+len(ids))
		for _, n := range names {
			results = append(results, errorResult(n, err))
		}
		for _, id := range ids {
			r := errorResult("", err)
			r.ID = id
			results = append(results, r)
		}
	}
	return results
}

func (c *Controller) deleteTopics(ctx context.Context, names []string, ids []metadata.TopicID) []TopicResult {
	img := c.Image()
	leaderErr := c.requireLeader()
	type target struct {
		topic *metadata.Topic
		res   TopicResult
	}
	targets := make([]target, 0, len(names)+len(ids))
	seen := map[metadata.TopicID]int{}
	for _, n := range names {
		t, ok := img.Topic(n)
		tg := target{topic: t, res: TopicResult{Name: n, NumPartitions: -1, ReplicationFactor: -1}}
		if !ok {
			tg.res.Err = fmt.Errorf("%w: topic %q does not exist", ErrUnknownTopic, n)
			tg.topic = nil
		} else {
			tg.res.ID = t.ID
			seen[t.ID]++
		}
		targets = append(targets, tg)
	}
	for _, id := range ids {
		t, ok := img.TopicByID(id)
		tg := target{topic: t, res: TopicResult{ID: id, NumPartitions: -1, ReplicationFactor: -1}}
		if !ok {
			tg.res.Err = fmt.Errorf("%w: topic id %s does not exist", ErrUnknownTopicID, id)
			tg.topic = nil
		} else {
			tg.res.Name = t.Name
			seen[t.ID]++
		}
		targets = append(targets, tg)
	}
	// One entry for the request, as for CreateTopics: Kafka's
	// ReplicationControlManager.deleteTopics returns ControllerResult.atomicOf.
	var recs []metadata.Record
	var removed []int // target indexes of the topics in the entry
	for i := range targets {
		tg := &targets[i]
		switch {
		case tg.topic == nil:
			continue
		case seen[tg.topic.ID] > 1:
			tg.res.Err = fmt.Errorf("%w: topic %q appears more than once in the request", ErrInvalidRequest, tg.topic.Name)
		case leaderErr != nil:
			tg.res.Err = leaderErr
		default:
			recs = append(recs, metadata.RemoveTopicRecord{ID: tg.topic.ID})
			removed = append(removed, i)
		}
	}
	if len(recs) > 0 {
		err := c.propose(ctx, recs)
		for _, i := range removed {
			tg := &targets[i]
			tg.res.Err = err
			if err == nil {
				c.logger.Info("deleted topic", "topic", tg.topic.Name, "topic_id", tg.topic.ID.String())
			}
		}
	}
	out := make([]TopicResult, len(targets))
	for i, tg := range targets {
		out[i] = tg.res
	}
	return out
}

// CreatePartitions raises the partition count of topic name to count. assignment,
// if not nil, gives the replicas of each new partition (len = count - current).
func (c *Controller) CreatePartitions(ctx context.Context, name string, count int32, assignment [][]int32, validateOnly bool) error {
	_, err := run(ctx, c, func(ctx context.Context) (struct{}, error) {
		return struct{}{}, c.createPartitions(ctx, name, count, assignment, validateOnly)
	})
	return err
}

func (c *Controller) createPartitions(ctx context.Context, name string, count int32, assignment [][]int32, validateOnly bool) error {
	if !validateOnly {
		if err := c.requireLeader(); err != nil {
			return err
		}
	}
	img := c.Image()
	t, ok := img.Topic(name)
	if !ok {
		return fmt.Errorf("%w: topic %q does not exist", ErrUnknownTopic, name)
	}
	current := int32(len(t.Partitions))
	switch {
	case count == current:
		return fmt.Errorf("%w: topic %q already has %d partitions", ErrInvalidPartitions, name, current)
	case count < current:
		return fmt.Errorf("%w: topic %q currently has %d partitions, which is higher than the requested %d", ErrInvalidPartitions, name, current, count)
	}
	rf := 1
	if current > 0 {
		rf = len(t.Partitions[0].Replicas)
	}
	adding := int(count - current)
	if adding > maxNewPartitions {
		return fmt.Errorf("%w: at most %d partitions can be created at once, got %d", ErrInvalidPartitions, maxNewPartitions, adding)
	}
	if assignment != nil {
		if len(assignment) != adding {
			return fmt.Errorf("%w: %d assignments given for %d new partitions", ErrInvalidReplicaAssignment, len(assignment), adding)
		}
		for i, replicas := range assignment {
			p := current + int32(i)
			if err := checkReplicas(img, p, replicas); err != nil {
				return err
			}
			if len(replicas) != rf {
				return fmt.Errorf("%w: partition %d has %d replicas, but the topic's partitions have %d", ErrInvalidReplicaAssignment, p, len(replicas), rf)
			}
		}
	} else {
		var err error
		if assignment, err = c.place(img, adding, rf); err != nil {
			return err
		}
	}
	recs, err := appendPartitionRecords(nil, img, t.ID, current, assignment)
	if err != nil || validateOnly {
		return err
	}
	if err := c.propose(ctx, recs); err != nil {
		return err
	}
	c.logger.Info("created partitions", "topic", name, "partitions", count)
	return nil
}
