package broker

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/samsa-streaming/samsa/internal/peer"
)

// TestShareStoreRetriesUncommittedWrites: a share-state write the coordinator could
// not commit in time (its state partition waiting for a dead replica to leave the
// ISR) is sent again until it commits or the operation's time is up, as a coordinator
// that moved is looked up again — unless the operation is not idempotent (Delete).
// Only then does the leader refuse the acknowledgement (COORDINATOR_NOT_AVAILABLE).
func TestShareStoreRetriesUncommittedWrites(t *testing.T) {
	b := startTestBroker(t)
	k := shareTestTopic(t, b, "retried")
	if _, err := b.shareStore.Summary(context.Background(), k); err != nil {
		t.Fatal(err) // this node is the coordinator of every state partition
	}
	noRemote := func(context.Context, *peer.Conn) (int16, error) {
		t.Fatal("a single node is its own share coordinator")
		return 0, nil
	}
	// failing fails the first n calls with err, then succeeds.
	failing := func(n int, err error) (func() error, *int) {
		calls := 0
		return func() error {
			calls++
			if calls <= n {
				return err
			}
			return nil
		}, &calls
	}
	for _, tc := range []struct {
		name       string
		err        error
		idempotent bool
		wantCalls  int
		wantErr    bool
	}{
		{"timed out, retried", kerr.RequestTimedOut, true, 3, false},
		{"deadline at the coordinator, retried", context.DeadlineExceeded, true, 3, false},
		{"not enough replicas, retried", kerr.NotEnoughReplicas, true, 3, false},
		{"coordinator moved, retried", errShareStateNotLocal, true, 3, false},
		{"timed out, not idempotent", kerr.RequestTimedOut, false, 1, true},
		{"coordinator moved, not idempotent, retried", errShareStateNotLocal, false, 3, false},
		{"invalid request, final", kerr.InvalidRequest, true, 1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			local, calls := failing(2, tc.err)
			err := b.shareStore.call(ctx, k, tc.idempotent, local, noRemote)
			if *calls != tc.wantCalls || (err != nil) != tc.wantErr {
				t.Fatalf("%d calls, error %v; want %d calls, error %v", *calls, err, tc.wantCalls, tc.wantErr)
			}
		})
	}

	// A write that never commits fails when the operation's time is up, and the
	// acknowledgement is refused with an error the client retries.
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	local, calls := failing(1<<30, kerr.RequestTimedOut)
	start := time.Now()
	err := b.shareStore.call(ctx, k, true, local, noRemote)
	if err == nil || *calls < 2 || time.Since(start) > 5*time.Second {
		t.Fatalf("a write never committed: %d calls in %v, error %v; want retries until the deadline, then an error", *calls, time.Since(start), err)
	}
	if code := shareErrorCode(err); code != kerr.CoordinatorNotAvailable.Code {
		t.Fatalf("answered %v, want COORDINATOR_NOT_AVAILABLE", kerr.ErrorForCode(code))
	}
}

// TestStopServingEndsRequestWaits: a request's share-state write that the coordinator
// keeps refusing is retried for up to 30 s; StopServing (a node shutting down, before
// it closes its connections and waits for their requests) ends it at once. Before,
// a SIGTERM while a share state partition moved waited out those 30 s, past the
// shutdown's grace.
func TestStopServingEndsRequestWaits(t *testing.T) {
	// StopServing comes while the write is tried (the coordinator answers only after
	// it), or while the retry waits.
	for _, during := range []string{"try", "wait"} {
		t.Run(during, func(t *testing.T) {
			b := startTestBroker(t)
			k := shareTestTopic(t, b, "stopping")
			ctx, cancel := b.requestContext(0)
			defer cancel()
			started := make(chan struct{})
			var once bool
			local := func() error {
				if !once {
					once = true
					close(started)
					if during == "try" {
						<-ctx.Done()
					}
				}
				return kerr.RequestTimedOut
			}
			done := make(chan error, 1)
			go func() {
				done <- b.shareStore.call(ctx, k, true, local, func(context.Context, *peer.Conn) (int16, error) {
					return 0, errors.New("a single node is its own share coordinator")
				})
			}()
			<-started
			b.StopServing()
			select {
			case err := <-done:
				if !errors.Is(err, context.Canceled) {
					t.Fatalf("the write ended with %v, want context.Canceled", err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the write still retries 10 s after StopServing")
			}
		})
	}
}
