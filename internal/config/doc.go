// Package config owns Samsa's configuration: the broker properties of a
// server.properties file plus --override key=value flags, their defaults, bounds
// and cross-checks, and the per-topic configs (retention.ms, cleanup.policy, ...)
// with the broker properties that provide their defaults.
//
// Kafka's property names, defaults and bounds are the specification; where Samsa
// differs (the embedded single-node default, ignored thread-pool knobs) the
// property's note says so and docs/config.md lists it.
//
// One table per level drives everything: brokerProperties (properties.go) and
// topicProperties (topic.go) are read by Load, Validate, ResolveTopic,
// ValidateTopicConfig, DescribeBroker/DescribeTopic (DescribeConfigs) and by the
// test that keeps the tables in docs/config.md in step with the code. Adding a
// property means adding one row.
//
// Errors: every reported problem wraps one sentinel (ErrUnknownProperty,
// ErrInvalidValue, ErrUnsupported, ErrInvalidConfig) and names the property and
// value; Load and Validate report all problems at once with errors.Join.
//
// Concurrency: the package has no mutable global state; the tables are built at
// init and only read. A *Broker is a plain value: build it once (Default, Load),
// then share it read-only. No function here does I/O except Load, which reads the
// file it is given.
package config
