package integration

import (
	"context"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/samsa-streaming/samsa/internal/testutil"
)

// runServe runs `samsa serve` with args and returns its exit error and stderr; it must
// exit by itself (a refused start).
func runServe(t *testing.T, args ...string) (error, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, testutil.SamsaBinary(t), append([]string{"serve"}, args...)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("samsa serve %v did not exit:\n%s", args, stderr.String())
	}
	return err, stderr.String()
}

// TestSecondBrokerOnSameDirsRefused: the log.dirs lock keeps a second node off the data
// of a running one.
func TestSecondBrokerOnSameDirsRefused(t *testing.T) {
	b := testutil.StartBroker(t)
	port := testutil.FreePort(t)
	err, stderr := runServe(t, "--override", "log.dirs="+b.Dir,
		"--override", "listeners=PLAINTEXT://127.0.0.1:"+strconv.Itoa(port))
	if err == nil {
		t.Fatal("second broker on the same log.dirs started")
	}
	if !strings.Contains(stderr, "lock") {
		t.Fatalf("refusal does not mention the lock:\n%s", stderr)
	}
	// The first broker is unharmed.
	createTopic(t, newAdmin(t, b), "still-here", 1, nil)
}

// TestBadConfigRefused: unknown properties and bad values stop the start with a message
// naming every offender.
func TestBadConfigRefused(t *testing.T) {
	dir := t.TempDir()
	err, stderr := runServe(t, "--override", "log.dirs="+dir,
		"--override", "no.such.property=1",
		"--override", "num.partitions=many",
		"--override", "log.message.timestamp.type=Whenever")
	if err == nil {
		t.Fatal("broker started with a bad configuration")
	}
	for _, name := range []string{"no.such.property", "num.partitions", "log.message.timestamp.type"} {
		if !strings.Contains(stderr, name) {
			t.Errorf("error does not name %s:\n%s", name, stderr)
		}
	}
}

// TestCleanShutdown: SIGTERM stops the broker with exit status 0.
func TestCleanShutdown(t *testing.T) {
	b := testutil.StartBroker(t)
	createTopic(t, newAdmin(t, b), "x", 1, nil)
	if err := b.Stop(); err != nil {
		t.Fatalf("SIGTERM: %v\n%s", err, b.Log())
	}
	if !strings.Contains(b.Log(), "stopped cleanly") {
		t.Fatalf("no clean-stop log line:\n%s", b.Log())
	}
}
