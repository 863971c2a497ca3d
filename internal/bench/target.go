package bench

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Names --against accepts besides an address.
const (
	againstNull        = "null"         // a null broker inside the bench process
	againstNullTLS     = "null-tls"     // the same, over TLS (the client's TLS ceiling)
	againstNullProcess = "null-process" // a null broker in a process of its own
	againstKfake       = "kfake"
)

// target is the cluster a run talks to: an address list, or an in-process null
// broker or kfake cluster that close stops.
type target struct {
	name     string   // "null", "kfake" or the address list as given
	brokers  []string // seed addresses
	security []kgo.Opt
	close    func()
}

// nullOptions shape an in-process null broker's canned fetch batch.
type nullOptions struct {
	partitions int32
	recordSize int
	batchBytes int
}

// startTarget resolves --against: "null" starts a null broker on 127.0.0.1:0 in this
// process, "null-process" one in a child process, "kfake" starts a one-broker kfake cluster, anything else is a comma-separated list
// of addresses (brokers, from -b, is used when against is empty).
func startTarget(against string, brokers []string, opts nullOptions) (*target, error) {
	switch against {
	case againstNull:
		nb, err := StartNullBroker(NullBrokerConfig{
			Partitions: opts.partitions, RecordSize: opts.recordSize, BatchBytes: opts.batchBytes,
		})
		if err != nil {
			return nil, err
		}
		return &target{name: againstNull, brokers: []string{nb.Addr()}, close: func() { nb.Close() }}, nil
	case againstNullTLS:
		serverTLS, clientTLS, err := selfSignedTLS()
		if err != nil {
			return nil, err
		}
		nb, err := StartNullBroker(NullBrokerConfig{
			Partitions: opts.partitions, RecordSize: opts.recordSize, BatchBytes: opts.batchBytes, TLS: serverTLS,
		})
		if err != nil {
			return nil, err
		}
		return &target{name: againstNullTLS, brokers: []string{nb.Addr()}, security: []kgo.Opt{kgo.DialTLSConfig(clientTLS)},
			close: func() { nb.Close() }}, nil
	case againstNullProcess:
		addr, stop, err := startNullProcess(opts)
		if err != nil {
			return nil, err
		}
		return &target{name: againstNullProcess, brokers: []string{addr}, close: stop}, nil
	case againstKfake:
		c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.DefaultNumPartitions(int(max(opts.partitions, 1))),
			kfake.AllowAutoTopicCreation())
		if err != nil {
			return nil, fmt.Errorf("bench: starting kfake: %w", err)
		}
		return &target{name: againstKfake, brokers: c.ListenAddrs(), close: c.Close}, nil
	case "":
		if len(brokers) == 0 {
			return nil, fmt.Errorf("%w: no brokers: give -b or --against", ErrBadFlag)
		}
		return &target{name: strings.Join(brokers, ","), brokers: brokers, close: func() {}}, nil
	default:
		return &target{name: against, brokers: splitList(against), close: func() {}}, nil
	}
}

func splitList(s string) []string {
	var out []string
	for part := range strings.SplitSeq(s, ",") {
		if part = strings.TrimSpace(part); part != "" {
			out = append(out, part)
		}
	}
	return out
}

// createTopic creates topic with partitions partitions (replication factor 1 is
// what a single node can hold; -1 lets the broker pick). An existing topic is fine.
func createTopic(ctx context.Context, brokers []string, topic string, partitions int32, security ...kgo.Opt) error {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(brokers...)}, security...)...)
	if err != nil {
		return fmt.Errorf("bench: create topic: %w", err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	resp, err := adm.CreateTopic(ctx, partitions, -1, nil, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return fmt.Errorf("bench: create topic %q: %w", topic, err)
	}
	return waitTopicReady(ctx, cl, topic, partitions)
}

// waitTopicReady waits until every broker's metadata shows topic with partitions
// partitions, each with a leader and every replica in sync: a leader that has not
// yet learned it leads would refuse the first records, and the client's retries
// would make the start of the run (and its latencies) about that, not the broker.
func waitTopicReady(ctx context.Context, cl *kgo.Client, topic string, partitions int32) error {
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	ready := func(resp *kmsg.MetadataResponse) bool {
		for _, t := range resp.Topics {
			if t.Topic == nil || *t.Topic != topic || t.ErrorCode != 0 || int32(len(t.Partitions)) < partitions {
				continue
			}
			for _, p := range t.Partitions {
				if p.Leader < 0 || p.ErrorCode != 0 || len(p.ISR) < len(p.Replicas) {
					return false
				}
			}
			return true
		}
		return false
	}
	for {
		resp, err := req.RequestWith(ctx, cl)
		if err == nil && ready(resp) {
			all := true
			for _, b := range resp.Brokers {
				r, err := cl.Broker(int(b.NodeID)).Request(ctx, req)
				if err != nil || !ready(r.(*kmsg.MetadataResponse)) {
					all = false
					break
				}
			}
			if all {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("bench: topic %q not ready: %w", topic, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// deleteTopic deletes topic, best effort (the suite frees page cache this way).
func deleteTopic(ctx context.Context, brokers []string, topic string) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	resp, err := kadm.NewClient(cl).DeleteTopic(ctx, topic)
	if err == nil {
		err = resp.Err
	}
	return err
}

// progressReader reports a run's records and bytes so far and, for produce, its
// latency histogram (nil otherwise).
type progressReader func() (records, bytes int64, hist *Histogram)

// startProgress prints a progress line to w every second until the returned stop
// function is called: records done, the last second's rate and MB/s, and latency
// percentiles so far (when hist is not nil). It does nothing when w is nil.
func startProgress(w io.Writer, label string, start time.Time, read progressReader) (stop func()) {
	if w == nil {
		return func() {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		var lastN, lastBytes int64
		last := start
		for {
			select {
			case <-done:
				return
			case now := <-tick.C:
				n, bytes, hist := read()
				secs := now.Sub(last).Seconds()
				line := fmt.Sprintf("%s: %5.1fs %12d records %12.0f rec/s %9.1f MB/s",
					label, now.Sub(start).Seconds(), n, float64(n-lastN)/secs, float64(bytes-lastBytes)/mebibyte/secs)
				if hist != nil {
					line += fmt.Sprintf("  p50 %.2f ms p99 %.2f ms", ms(hist.Quantile(0.5)), ms(hist.Quantile(0.99)))
				}
				fmt.Fprintln(w, line)
				lastN, lastBytes, last = n, bytes, now
			}
		}
	}()
	return func() {
		close(done)
		wg.Wait()
	}
}

// selfSignedTLS makes a throwaway certificate for 127.0.0.1 and the TLS configs of a
// null broker that serves it and of a client that trusts it.
func selfSignedTLS() (server, client *tls.Config, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "samsa bench null broker"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, err
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	server = &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key, Leaf: cert}}}
	return server, &tls.Config{RootCAs: pool}, nil
}
