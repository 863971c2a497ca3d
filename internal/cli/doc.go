// Package cli implements the client subcommands of the samsa binary: topic, produce,
// consume, group, cluster and doctor. It owns flag parsing for those commands, the
// text and JSON renderings of their results, exit codes, and the translation of client
// errors into messages that say what to do.
//
// Every command talks to the cluster only through franz-go (kgo for producing and
// consuming, kadm for administration), so it works against Samsa and against any
// Kafka-compatible cluster; nothing here imports Samsa's broker packages.
//
// Layout: one file per command family (topic.go, produce.go, consume.go, group.go,
// cluster.go, doctor.go), plus root.go (the root command, global flags, exit codes),
// client.go (client construction and error translation) and output.go (rendering).
// Pure pieces that decide something — doctor's analysis (Diagnose over a Snapshot),
// the reset-offsets planner, the record formatter, flag value parsers — are separate
// functions without I/O so they are table-tested without a broker.
//
// Concurrency: a command runs on the goroutine that calls Execute. The only other
// goroutines are franz-go's own and produce's delivery callbacks, which serialise
// their writes to the output through a mutex. Nothing in this package keeps global
// mutable state; NewRoot builds a fresh command tree each time.
//
// Exit codes (see docs/cli.md): 0 success, 1 the operation failed, 2 usage error,
// 3 doctor found problems.
package cli
