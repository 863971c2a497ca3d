package controller

import "errors"

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
	// ErrNotController: NOT_CONTROLLER. This node is not the active controller;
	// forwarding to the active one is not implemented yet.
	ErrNotController = errors.New("not the active controller")
	// ErrTopicDeletionDisabled: TOPIC_DELETION_DISABLED. Never returned today.
	ErrTopicDeletionDisabled = errors.New("topic deletion is disabled")
	// ErrClosed: the controller is closed (or its metadata log failed); the broker
	// should answer NOT_CONTROLLER or shut down.
	ErrClosed = errors.New("controller closed")
	// ErrCorruptLog: the metadata log on disk is damaged beyond a torn tail.
	ErrCorruptLog = errors.New("metadata log corrupt")
)
