package controller

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/samsa-streaming/samsa/internal/clock"
	"github.com/samsa-streaming/samsa/internal/metadata"
)

// testLogger writes to the test log only with -v.
func testLogger(t *testing.T) *slog.Logger {
	if !testing.Verbose() {
		return slog.New(slog.DiscardHandler)
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

func testOptions(t *testing.T, dir string) Options {
	return Options{
		Dir:       dir,
		NodeID:    1,
		ClusterID: "test-cluster",
		Clock:     clock.NewFake(time.Unix(1_700_000_000, 0)),
		Logger:    testLogger(t),
		ValidateTopicConfig: func(name, value string) error {
			switch name {
			case "retention.ms":
				if _, err := strconv.ParseInt(value, 10, 64); err != nil {
					return fmt.Errorf("%s=%q is not a number", name, value)
				}
			case "cleanup.policy":
				for _, v := range splitList(value) {
					if v != "delete" && v != "compact" {
						return fmt.Errorf("%s: %q is not delete or compact", name, v)
					}
				}
			case "compression.type", "segment.bytes":
			default:
				return fmt.Errorf("unknown config %s", name)
			}
			return nil
		},
	}
}

// startController starts a controller on dir and closes it at the end of the test.
func startController(t *testing.T, o Options) *Controller {
	t.Helper()
	c, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := c.Start(ctx); err != nil {
		c.Close()
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// startSingle starts a single-node controller with brokers registered.
func startSingle(t *testing.T, dir string, brokers ...int32) *Controller {
	t.Helper()
	c := startController(t, testOptions(t, dir))
	for _, id := range brokers {
		register(t, c, id)
	}
	return c
}

// register registers broker id and unfences it with a heartbeat; it returns the
// broker epoch.
func register(t *testing.T, c *Controller, id int32) int64 {
	t.Helper()
	epoch, err := c.RegisterBroker(ctx(t), Registration{
		NodeID:        id,
		IncarnationID: NewIncarnationID(),
		Endpoints:     []metadata.Endpoint{{Name: "PLAINTEXT", Host: "127.0.0.1", Port: 9092 + id}},
	})
	if err != nil {
		t.Fatalf("RegisterBroker(%d): %v", id, err)
	}
	reply, err := c.BrokerHeartbeat(ctx(t), Heartbeat{BrokerID: id, BrokerEpoch: epoch, MetadataOffset: c.Image().Offset()})
	if err != nil || reply.IsFenced {
		t.Fatalf("BrokerHeartbeat(%d) = %+v, %v", id, reply, err)
	}
	return epoch
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return c
}

func ptr[T any](v T) *T { return &v }

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}
