package cli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// unreachableError means no seed broker accepted a connection.
type unreachableError struct{ seeds []string }

func (e *unreachableError) Error() string {
	return fmt.Sprintf("cannot reach %s: is the broker running? set -b or %s", strings.Join(e.seeds, ","), BrokersEnv)
}

// noAnswerError means the cluster accepted connections but did not answer what
// needed within --timeout. It names the seeds; the context error it wraps would
// only add "context deadline exceeded".
type noAnswerError struct {
	what    string
	seeds   []string
	timeout time.Duration
	err     error
}

func (e *noAnswerError) Error() string {
	return fmt.Sprintf("%s: no answer from the cluster at %s within %s (raise --timeout, or check the broker's logs)",
		e.what, strings.Join(e.seeds, ","), e.timeout)
}

func (e *noAnswerError) Unwrap() error { return e.err }

// clientID is how the CLI introduces itself to brokers.
const clientID = "samsa-cli"

// newClient builds a franz-go client for the seed brokers plus the given options.
func (g *globals) newClient(opts ...kgo.Opt) (*kgo.Client, error) {
	base := []kgo.Opt{
		kgo.SeedBrokers(g.seeds()...),
		kgo.ClientID(clientID),
		kgo.DialTimeout(min(g.timeout, 5*time.Second)),
		kgo.RetryTimeout(g.timeout),
		kgo.MetadataMinAge(250 * time.Millisecond),
	}
	sec, err := g.sec.Opts()
	if err != nil {
		return nil, err
	}
	base = append(base, sec...)
	cl, err := kgo.NewClient(append(base, opts...)...)
	if err != nil {
		return nil, usagef("bad client configuration: %v", err)
	}
	return cl, nil
}

// newAdmin builds an admin client; close it with the returned function.
func (g *globals) newAdmin() (*kadm.Client, func(), error) {
	cl, adm, err := g.newAdminClient()
	if err != nil {
		return nil, nil, err
	}
	return adm, cl.Close, nil
}

// newAdminClient builds an admin client and returns the franz-go client under it too,
// for requests kadm does not wrap; close the latter.
func (g *globals) newAdminClient() (*kgo.Client, *kadm.Client, error) {
	cl, err := g.newClient()
	if err != nil {
		return nil, nil, err
	}
	adm := kadm.NewClient(cl)
	adm.SetTimeoutMillis(int32(min(g.timeout, time.Hour).Milliseconds()))
	return cl, adm, nil
}

// admin builds an admin client and a context that ends after --timeout; done closes
// the client and cancels the context.
func (g *globals) admin(parent context.Context) (*kadm.Client, context.Context, func(), error) {
	_, adm, ctx, done, err := g.adminClient(parent)
	return adm, ctx, done, err
}

// adminClient is admin that also returns the franz-go client under the admin client,
// for requests kadm does not wrap.
func (g *globals) adminClient(parent context.Context) (*kgo.Client, *kadm.Client, context.Context, func(), error) {
	cl, adm, err := g.newAdminClient()
	if err != nil {
		return nil, nil, nil, nil, err
	}
	ctx, cancel := g.withTimeout(parent)
	return cl, adm, ctx, func() { cancel(); cl.Close() }, nil
}

// withTimeout returns a context that ends after --timeout.
func (g *globals) withTimeout(parent context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(parent, g.timeout)
}

// explain turns a client error into one that says what to do. what names the
// operation ("list topics"); it prefixes errors that are not about reachability.
func (g *globals) explain(what string, err error) error {
	if err == nil {
		return nil
	}
	if _, ok := errors.AsType[*unreachableError](err); ok || errors.Is(err, ErrFindings) {
		return err
	}
	if _, ok := errors.AsType[*usageError](err); ok {
		return err
	}
	if isNetworkError(err) && !g.anySeedReachable() {
		return &unreachableError{seeds: g.seeds()}
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return &noAnswerError{what: what, seeds: g.seeds(), timeout: g.timeout, err: err}
	}
	if strings.Contains(err.Error(), "broker is too old") {
		return fmt.Errorf("%s: the broker does not serve the request this needs: %w", what, err)
	}
	if hint := kafkaHint(err); hint != "" {
		// A bare error code's own description says in general what the hint says
		// for this case: the hint takes its place.
		if ke, ok := errors.AsType[*kerr.Error](err); ok && ke == err {
			return fmt.Errorf("%s: %w", what, withBrokerMessage(ke, hint))
		}
		return fmt.Errorf("%s: %w (%s)", what, err, hint)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// isNetworkError reports whether err could mean the seeds cannot be reached: anything
// that is not an error code a broker sent back.
func isNetworkError(err error) bool {
	if errors.Is(err, syscall.ECONNREFUSED) {
		return true
	}
	_, fromBroker := errors.AsType[*kerr.Error](err)
	return !fromBroker
}

// anySeedReachable dials each seed once, briefly.
func (g *globals) anySeedReachable() bool {
	for _, s := range g.seeds() {
		conn, err := net.DialTimeout("tcp", s, min(g.timeout, 2*time.Second))
		if err == nil {
			conn.Close()
			return true
		}
	}
	return false
}

// brokerError is an error code a broker answered with and the message it gave,
// which says more than the code's own description.
type brokerError struct {
	code *kerr.Error
	msg  string
}

func (e *brokerError) Error() string { return e.code.Message + ": " + e.msg }
func (e *brokerError) Unwrap() error { return e.code }

// withBrokerMessage adds the message a broker sent with err (a Kafka error code).
func withBrokerMessage(err error, msg string) error {
	if err == nil || msg == "" {
		return err
	}
	if ke, ok := errors.AsType[*kerr.Error](err); ok && ke == err {
		return &brokerError{code: ke, msg: msg}
	}
	return fmt.Errorf("%w: %s", err, msg)
}

// kafkaHint suggests a fix for the Kafka errors users meet most, unless the broker
// said what was wrong itself.
func kafkaHint(err error) string {
	if _, explained := errors.AsType[*brokerError](err); explained {
		return ""
	}
	var ke *kerr.Error
	if !errors.As(err, &ke) {
		return ""
	}
	switch ke {
	case kerr.UnknownTopicOrPartition:
		return "the topic does not exist; see `samsa topic list`"
	case kerr.TopicAlreadyExists:
		return "pick another name, or delete it first with `samsa topic delete`"
	case kerr.InvalidReplicationFactor:
		return "the replication factor cannot exceed the number of brokers; see `samsa cluster info`"
	case kerr.InvalidPartitions:
		return "the partition count must be at least 1 and, when adding, larger than the current count"
	case kerr.InvalidConfig:
		return "check the property name and value against docs/config.md"
	case kerr.InvalidTopicException:
		return "topic names use only ASCII letters, digits, '.', '_' and '-', at most 249 characters"
	case kerr.GroupIDNotFound:
		return "the group does not exist; see `samsa group list`"
	case kerr.NonEmptyGroup:
		return "the group still has active members; stop its consumers first"
	case kerr.NotEnoughReplicas, kerr.NotEnoughReplicasAfterAppend:
		return "fewer in-sync replicas than min.insync.replicas; check `samsa doctor`"
	case kerr.RecordListTooLarge, kerr.MessageTooLarge:
		return "the record is larger than the topic's max.message.bytes"
	case kerr.UnsupportedVersion:
		return "the broker does not serve this request"
	case kerr.TopicAuthorizationFailed, kerr.GroupAuthorizationFailed, kerr.ClusterAuthorizationFailed,
		kerr.TransactionalIDAuthorizationFailed:
		return "the cluster's ACLs do not allow this; see `samsa acl list`"
	case kerr.SaslAuthenticationFailed:
		return "check --user, --password and --sasl-mechanism"
	case kerr.UnsupportedSaslMechanism:
		return "the listener does not enable this --sasl-mechanism"
	case kerr.IllegalSaslState:
		return "the listener does not use SASL: drop --sasl-mechanism, or connect to the cluster's SASL listener"
	case kerr.SecurityDisabled:
		return "the cluster has no authorizer (authorizer.class.name)"
	}
	return ""
}
