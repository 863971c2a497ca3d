// Command eosworker is one member of the consume-transform-produce pipeline the
// exactly-once tests run as several processes (some killed with kill -9 and
// restarted): a franz-go GroupTransactSession that reads the input topic in a
// consumer group with read_committed and, in one transaction per poll, writes each
// record's value to the output topic (keyed like the input, so that the output keeps
// the input's partition) together with the group's offsets.
//
//	eosworker -brokers host:port[,…] -in topic -out topic -group g -txn-id id
//	          [-max-poll n] [-session-timeout d] [-debug]
//
// It prints "ready" once it joined the group and "committed N" after each commit, and
// runs until killed or until its standard input closes.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

var (
	maxPoll        int
	sessionTimeout time.Duration
)

func main() {
	brokers := flag.String("brokers", "", "seed brokers, comma-separated")
	in := flag.String("in", "", "input topic")
	out := flag.String("out", "", "output topic")
	group := flag.String("group", "", "consumer group")
	txnID := flag.String("txn-id", "", "transactional id")
	debug := flag.Bool("debug", false, "log the client's debug lines to standard error")
	flag.IntVar(&maxPoll, "max-poll", 100, "records per transaction at most")
	flag.DurationVar(&sessionTimeout, "session-timeout", 6*time.Second, "the group session timeout")
	flag.Parse()
	if err := run(*brokers, *in, *out, *group, *txnID, *debug); err != nil {
		fmt.Fprintln(os.Stderr, "eosworker:", err)
		os.Exit(1)
	}
}

func run(brokers, in, out, group, txnID string, debug bool) error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { // the test closes our stdin to stop us cleanly
		_, _ = io.Copy(io.Discard, os.Stdin)
		cancel()
	}()
	level := kgo.LogLevelWarn
	if debug {
		level = kgo.LogLevelDebug
	}
	sess, err := kgo.NewGroupTransactSession(
		kgo.WithLogger(kgo.BasicLogger(os.Stderr, level, nil)),
		kgo.SeedBrokers(strings.Split(brokers, ",")...),
		kgo.TransactionalID(txnID),
		kgo.TransactionTimeout(10*time.Second),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(in),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.RequireStableFetchOffsets(),
		kgo.SessionTimeout(sessionTimeout),
		kgo.HeartbeatInterval(500*time.Millisecond),
		kgo.RebalanceTimeout(10*time.Second),
		kgo.FetchMaxWait(200*time.Millisecond),
		kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)),
		kgo.OnPartitionsAssigned(func(context.Context, *kgo.Client, map[string][]int32) { fmt.Println("ready") }),
	)
	if err != nil {
		return err
	}
	defer sess.Close()
	total := 0
	for ctx.Err() == nil {
		fs := sess.PollRecords(ctx, maxPoll)
		if ctx.Err() != nil {
			return nil
		}
		if err := sess.Begin(); err != nil {
			return fmt.Errorf("begin: %w", err)
		}
		n := 0
		fs.EachRecord(func(r *kgo.Record) {
			n++
			sess.Produce(ctx, &kgo.Record{Topic: out, Key: r.Key, Value: r.Value}, nil)
		})
		committed, err := sess.End(ctx, kgo.TryCommit)
		if err != nil {
			fmt.Fprintln(os.Stderr, "end:", err)
			continue
		}
		if committed {
			total += n
			fmt.Println("committed", total)
		}
	}
	return nil
}
