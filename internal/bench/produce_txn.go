package bench

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Transactional produce (--transactional): every producer client has a transactional
// id of its own and writes in transactions, each ended by a commit once it holds
// --commit-every records or is --commit-interval old (100 ms by default). A commit
// flushes the transaction's records, then sends EndTxn; its latency is the EndTxn's.
// Records' latencies are measured as without transactions (Produce call to
// acknowledgement); the run's throughput includes the pauses the commits cost.

// defaultCommitInterval is how often a transactional run commits when neither
// --commit-every nor --commit-interval is given.
const defaultCommitInterval = 100 * time.Millisecond

// TransactionResult is the transactional part of a produce run.
type TransactionResult struct {
	CommitEvery      int64     `json:"commit_every,omitempty"`
	CommitIntervalMs float64   `json:"commit_interval_ms,omitempty"`
	Commits          int64     `json:"commits"`
	CommitLatency    Latencies `json:"commit_latency"`
}

// txnState is what the transactional producers share.
type txnState struct {
	every    int64
	interval time.Duration
	commits  atomic.Int64
	hist     *Histogram
}

// newTxnState returns nil unless cfg is transactional.
func newTxnState(cfg produceConfig) *txnState {
	if !cfg.transactional {
		return nil
	}
	every, interval := cfg.commitEvery, cfg.commitInterval
	if every == 0 && interval == 0 {
		interval = defaultCommitInterval
	}
	return &txnState{every: every, interval: interval, hist: NewHistogram()}
}

// txnOpts are the options of producer client i.
func (c *produceConfig) txnOpts(i int) []kgo.Opt {
	if !c.transactional {
		return nil
	}
	return []kgo.Opt{kgo.TransactionalID(fmt.Sprintf("samsa-bench-%d-%d", os.Getpid(), i)), kgo.TransactionTimeout(time.Minute)}
}

// warmUp sends one record (in a committed transaction when transactional).
func warmUp(ctx context.Context, cl *kgo.Client, transactional bool, value []byte) error {
	if !transactional {
		return cl.ProduceSync(ctx, &kgo.Record{Value: value}).FirstErr()
	}
	if err := cl.BeginTransaction(); err != nil {
		return err
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: value}).FirstErr(); err != nil {
		return err
	}
	return cl.EndTransaction(ctx, kgo.TryCommit)
}

// loop is produceLoop in transactions.
func (t *txnState) loop(ctx context.Context, cl *kgo.Client, state *producerState, quota int64, deadline time.Time, rate float64) {
	p := newPacer(rate)
	fail := func(what string, err error) {
		e := fmt.Errorf("%s: %w", what, err)
		if state.firstErr.CompareAndSwap(nil, &e) {
			state.cancel()
		}
	}
	for i := int64(0); quota == 0 || i < quota; {
		if err := cl.BeginTransaction(); err != nil {
			fail("begin transaction", err)
			return
		}
		opened := time.Now()
		more := true
		for n := int64(0); (t.every == 0 || n < t.every) && (quota == 0 || i < quota); n++ {
			if t.interval > 0 && n%16 == 0 && time.Since(opened) >= t.interval {
				break
			}
			if more = p.produceOne(ctx, cl, state, i, quota, deadline); !more {
				break
			}
			i++
		}
		if err := cl.Flush(ctx); err != nil {
			if ctx.Err() == nil {
				fail("flush", err)
			}
			return
		}
		began := time.Now()
		if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
			if ctx.Err() == nil {
				fail("commit", err)
			}
			return
		}
		t.hist.Record(time.Since(began))
		t.commits.Add(1)
		if !more {
			return
		}
	}
}

func (t *txnState) result(cfg produceConfig) *TransactionResult {
	if t == nil {
		return nil
	}
	return &TransactionResult{CommitEvery: t.every, CommitIntervalMs: ms(t.interval), Commits: t.commits.Load(), CommitLatency: t.hist.Summary()}
}
