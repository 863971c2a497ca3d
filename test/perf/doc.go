// Package perf holds end-to-end benchmarks of the group layer against real `samsa
// serve` processes, run with `go test -run '^$' -bench . ./test/perf`; their figures
// and the commands that produced them are in docs/performance.md. Each benchmark
// interleaves the contenders it compares within every iteration, because the machine
// is shared and its speed drifts.
//
//	BenchmarkGroupJoinSettle   a member joins a group of 50 on 500 partitions: time
//	                           until the group is balanced again, KIP-848 against the
//	                           classic cooperative protocol, and (KIP-848) the longest
//	                           time a partition stayed without an owner
//	BenchmarkShareConsume      100-byte records of one partition: 4 share consumers
//	                           against one classic consumer
//	BenchmarkClusterShareConsume  4 share consumers on three nodes, 60 partitions of
//	                           RF 3: the rate, and the CPU of the three brokers
//	BenchmarkFetchSessions     a consumer of 10,000 idle partitions: Fetch request
//	                           bytes and broker CPU with and without fetch sessions
package perf
