package controller

import (
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Errors returned by the controller. The broker maps them to Kafka error codes; the
// Kafka code each stands for is in its comment. Returned errors wrap these sentinels
// with %w and add a message fit for the response's ErrorMessage.
var (
	// ErrTopicExists: TOPIC_ALREADY_EXISTS.
	ErrTopicExists = errors.New("topic already exists")
	// ErrInvalidTopic: INVALID_TOPIC_EXCEPTION (bad name, or a '.'/'_' collision).
	ErrInvalidTopic = errors.New("invalid topic")
	// ErrUnknownTopic: UNKNOWN_TOPIC_OR_PARTITION.
	ErrUnknownTopic = errors.New("unknown topic or partition")
	// ErrUnknownTopicID: UNKNOWN_TOPIC_ID (DeleteTopics by id).
	ErrUnknownTopicID = errors.New("unknown topic id")
	// ErrInvalidPartitions: INVALID_PARTITIONS.
	ErrInvalidPartitions = errors.New("invalid number of partitions")
	// ErrInvalidReplicationFactor: INVALID_REPLICATION_FACTOR.
	ErrInvalidReplicationFactor = errors.New("invalid replication factor")
	// ErrInvalidReplicaAssignment: INVALID_REPLICA_ASSIGNMENT.
	ErrInvalidReplicaAssignment = errors.New("invalid replica assignment")
	// ErrInvalidConfig: INVALID_CONFIG. Wraps the validator's error; the message
	// names the config.
	ErrInvalidConfig = errors.New("invalid config")
	// ErrInvalidRequest: INVALID_REQUEST (duplicates in one request, conflicting
	// fields, unsupported resource types or operations).
	ErrInvalidRequest = errors.New("invalid request")
	// ErrNotController: NOT_CONTROLLER. This node is not the active controller
	// (brokers forward to the active one and retry), or a request names epochs
	// newer than this controller knows (it may have lost leadership).
	ErrNotController = errors.New("not the active controller")
	// ErrTopicDeletionDisabled: TOPIC_DELETION_DISABLED (delete.topic.enable=false).
	ErrTopicDeletionDisabled = errors.New("topic deletion is disabled")
	// ErrStaleBrokerEpoch: STALE_BROKER_EPOCH. The broker is not registered, or not
	// with this epoch: it must register again.
	ErrStaleBrokerEpoch = errors.New("stale broker epoch")
	// ErrBrokerIDNotRegistered: BROKER_ID_NOT_REGISTERED. UnregisterBroker names a
	// broker that is not registered.
	ErrBrokerIDNotRegistered = errors.New("broker id not registered")
	// ErrDuplicateBrokerRegistration: DUPLICATE_BROKER_REGISTRATION. Another
	// incarnation of the node id still heartbeats.
	ErrDuplicateBrokerRegistration = errors.New("duplicate broker registration")
	// ErrInconsistentClusterID: INCONSISTENT_CLUSTER_ID.
	ErrInconsistentClusterID = errors.New("inconsistent cluster id")
	// ErrFencedLeaderEpoch: FENCED_LEADER_EPOCH. AlterPartition from a leader whose
	// leader epoch is older than the partition's.
	ErrFencedLeaderEpoch = errors.New("fenced leader epoch")
	// ErrInvalidUpdateVersion: INVALID_UPDATE_VERSION. AlterPartition with an old
	// partition epoch: the partition changed since the leader last saw it.
	ErrInvalidUpdateVersion = errors.New("invalid partition epoch")
	// ErrIneligibleReplica: INELIGIBLE_REPLICA (OPERATION_NOT_ATTEMPTED before
	// AlterPartition v2). The new ISR names a broker that is fenced, shutting down,
	// unregistered or at another broker epoch (KIP-841, KIP-903).
	ErrIneligibleReplica = errors.New("ineligible replica")
	// ErrNewLeaderElected: NEW_LEADER_ELECTED (FENCED_LEADER_EPOCH before
	// AlterPartition v2). The ISR change was committed and completed a reassignment
	// that moved the leadership away.
	ErrNewLeaderElected = errors.New("new leader elected")
	// ErrElectionNotNeeded: ELECTION_NOT_NEEDED.
	ErrElectionNotNeeded = errors.New("election not needed")
	// ErrPreferredLeaderNotAvailable: PREFERRED_LEADER_NOT_AVAILABLE.
	ErrPreferredLeaderNotAvailable = errors.New("preferred leader not available")
	// ErrEligibleLeadersNotAvailable: ELIGIBLE_LEADERS_NOT_AVAILABLE.
	ErrEligibleLeadersNotAvailable = errors.New("eligible leaders not available")
	// ErrNoReassignmentInProgress: NO_REASSIGNMENT_IN_PROGRESS.
	ErrNoReassignmentInProgress = errors.New("no reassignment in progress")
	// ErrPolicyViolation: a request Kafka refuses as a whole by policy (too many
	// partitions created at once).
	ErrPolicyViolation = errors.New("policy violation")
	// ErrClosed: the controller is closed (or its metadata log failed); the broker
	// should answer NOT_CONTROLLER or shut down.
	ErrClosed = errors.New("controller closed")
	// ErrCorruptLog: the metadata log on disk is damaged beyond a torn tail.
	ErrCorruptLog = errors.New("metadata log corrupt")
)

// errorCodes is the one table between the controller's errors and Kafka's error
// codes, used both ways: the broker answers with ErrorCode, and Channel turns codes
// that crossed the wire back into these errors.
var errorCodes = []struct {
	err  error
	code *kerr.Error
}{
	{ErrTopicExists, kerr.TopicAlreadyExists},
	{ErrInvalidTopic, kerr.InvalidTopicException},
	{ErrUnknownTopic, kerr.UnknownTopicOrPartition},
	{ErrUnknownTopicID, kerr.UnknownTopicID},
	{ErrInvalidPartitions, kerr.InvalidPartitions},
	{ErrInvalidReplicationFactor, kerr.InvalidReplicationFactor},
	{ErrInvalidReplicaAssignment, kerr.InvalidReplicaAssignment},
	{ErrInvalidConfig, kerr.InvalidConfig},
	{ErrInvalidRequest, kerr.InvalidRequest},
	{ErrNotController, kerr.NotController},
	{ErrClosed, kerr.NotController},
	{ErrTopicDeletionDisabled, kerr.TopicDeletionDisabled},
	{ErrStaleBrokerEpoch, kerr.StaleBrokerEpoch},
	{ErrDuplicateBrokerRegistration, kerr.DuplicateBrokerRegistration},
	{ErrBrokerIDNotRegistered, kerr.BrokerIDNotRegistered},
	{ErrInconsistentClusterID, kerr.InconsistentClusterID},
	{ErrFencedLeaderEpoch, kerr.FencedLeaderEpoch},
	{ErrInvalidUpdateVersion, kerr.InvalidUpdateVersion},
	{ErrIneligibleReplica, kerr.IneligibleReplica},
	{ErrNewLeaderElected, kerr.NewLeaderElected},
	{ErrElectionNotNeeded, kerr.ElectionNotNeeded},
	{ErrPreferredLeaderNotAvailable, kerr.PreferredLeaderNotAvailable},
	{ErrEligibleLeadersNotAvailable, kerr.EligibleLeadersNotAvailable},
	{ErrNoReassignmentInProgress, kerr.NoReassignmentInProgress},
	{ErrPolicyViolation, kerr.PolicyViolation},
}

// ErrorCode returns the Kafka error code for err when it wraps one of this
// package's errors.
func ErrorCode(err error) (int16, bool) {
	for _, e := range errorCodes {
		if errors.Is(err, e.err) {
			return e.code.Code, true
		}
	}
	return 0, false
}

// ErrorForCode turns a Kafka error code from a controller's answer back into this
// package's error (kerr's for codes it has none for), with the answer's message.
// Code 0 is nil.
func ErrorForCode(code int16, message *string) error {
	if code == 0 {
		return nil
	}
	var base error = kerr.ErrorForCode(code)
	for _, e := range errorCodes {
		if e.code.Code == code {
			base = e.err
			break
		}
	}
	if message != nil && *message != "" {
		return fmt.Errorf("%w: %s", base, *message)
	}
	return base
}
