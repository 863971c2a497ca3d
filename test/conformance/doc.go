// Package conformance drives Kafka clients that are not written in Go — kcat,
// kafka-python, confluent-kafka-python (librdkafka) and kafkajs — against a real
// `samsa serve`, through the scripts in this directory (see common.py for their
// contract). Each script prints a JSON summary; the checks live here.
//
// Layout: common.py (shared by the Python drivers), kcat.py, kafka_python.py,
// confluent.py, kafkajs.js (one driver per client; commands codecs, metadata, create,
// produce, consume, member); driver_test.go runs a driver and verifies what it read;
// member_test.go runs long-lived group members and tracks their assignments from the
// events they print; conformance_test.go and groups_test.go hold the scenarios.
//
// Concurrency: each scenario owns its topics and groups (names carry a per-run
// suffix), so client subtests run in parallel against one broker. Every driver run
// has a deadline (the driver's own alarm and exec.CommandContext); members are killed
// by t.Cleanup.
//
// scripts/install-test-deps.sh (run by `make test`) installs the clients. Set
// SAMSA_CONFORMANCE_BROKER=127.0.0.1:PORT to run the same suite against another,
// already running broker (Apache Kafka, kfake) for comparison.
package conformance
