package console

import (
	"context"
	"errors"
	"fmt"
	"net"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// clientID is how the console introduces itself to brokers.
const clientID = "samsa-console"

// newClient builds the console's one franz-go client: admin requests, produce and
// the message browser's raw fetches all go through it, with the TLS and SASL of
// Config.ClientOpts.
func newClient(c Config) (*kgo.Client, *kadm.Client, error) {
	opts := []kgo.Opt{
		kgo.SeedBrokers(c.Brokers...),
		kgo.ClientID(clientID),
		kgo.DialTimeout(min(c.Timeout, 3*time.Second)),
		kgo.RetryTimeout(c.Timeout),
		// A request already written is waited for past its context until its
		// response or this deadline: a page that waits on a stalled broker ends
		// within about two timeouts, not kgo's default 10 s per request.
		kgo.RequestTimeoutOverhead(c.Timeout),
		kgo.MetadataMinAge(250 * time.Millisecond),
		kgo.RecordDeliveryTimeout(c.Timeout),
		kgo.ProducerLinger(0),
	}
	cl, err := kgo.NewClient(append(opts, c.ClientOpts...)...)
	if err != nil {
		return nil, nil, fmt.Errorf("kafka client: %w", err)
	}
	adm := kadm.NewClient(cl)
	adm.SetTimeoutMillis(int32(c.Timeout.Milliseconds()))
	return cl, adm, nil
}

// unreachableError means the cluster did not answer: no broker accepted a connection
// or none answered in time. Pages show it as "cluster down" and retry.
type unreachableError struct{ err error }

func (e *unreachableError) Error() string { return e.err.Error() }
func (e *unreachableError) Unwrap() error { return e.err }

// classify marks errors that mean the cluster cannot be reached; Kafka error codes
// (a broker answered) are returned as they are.
func classify(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := errors.AsType[*kerr.Error](err); ok {
		return err
	}
	var netErr net.Error
	if errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, context.DeadlineExceeded) ||
		errors.As(err, &netErr) || errors.Is(err, kgo.ErrClientClosed) {
		return &unreachableError{err: err}
	}
	return err
}

// isUnreachable reports whether err (after classify) means the cluster is down.
func isUnreachable(err error) bool {
	_, ok := errors.AsType[*unreachableError](err)
	return ok
}

// answerErr is the error of a kadm call that returns what some brokers answered
// along with *ShardErrors for the others: nil as long as something came back.
func answerErr[M ~map[K]V, K comparable, V any](m M, err error) error {
	if err != nil && len(m) == 0 {
		return classify(err)
	}
	return nil
}
