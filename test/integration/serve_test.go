package integration

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
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

// TestControlledShutdownDisabled: with controlled.shutdown.enable=false SIGTERM stops
// the broker without asking the controller to move its leaderships (as Kafka's
// BrokerServer skips it); with the default it asks first.
func TestControlledShutdownDisabled(t *testing.T) {
	for _, c := range []struct {
		enable    string
		want, not string
	}{
		{"false", "controlled shutdown skipped", "controlled shutdown: asking"},
		{"true", "controlled shutdown: asking", "controlled shutdown skipped"},
	} {
		b := testutil.StartBroker(t, "controlled.shutdown.enable="+c.enable)
		createTopic(t, newAdmin(t, b), "led-here", 1, nil)
		if err := b.Stop(); err != nil {
			t.Fatalf("controlled.shutdown.enable=%s: SIGTERM: %v\n%s", c.enable, err, b.Log())
		}
		log := b.Log()
		if !strings.Contains(log, "stopped cleanly") || !strings.Contains(log, c.want) || strings.Contains(log, c.not) {
			t.Fatalf("controlled.shutdown.enable=%s: want %q and a clean stop, not %q:\n%s", c.enable, c.want, c.not, log)
		}
	}
}

// kafka4Sample is Kafka 4.x's combined-mode config/server.properties as shipped
// (comments dropped), adapted: listeners, advertised.listeners and log.dirs come from
// the test harness (free port, temporary directory); then group coordinator and
// buffer properties an operator of Kafka 4 commonly sets.
const kafka4Sample = `
process.roles=broker,controller
node.id=1
controller.quorum.bootstrap.servers=localhost:9093
inter.broker.listener.name=PLAINTEXT
controller.listener.names=CONTROLLER
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL
num.network.threads=3
num.io.threads=8
socket.send.buffer.bytes=102400
socket.receive.buffer.bytes=102400
socket.request.max.bytes=104857600
num.partitions=1
num.recovery.threads.per.data.dir=1
offsets.topic.replication.factor=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
log.retention.hours=168
log.segment.bytes=1073741824
log.retention.check.interval.ms=300000

group.coordinator.rebalance.protocols=classic,consumer,streams
group.coordinator.threads=4
group.coordinator.append.linger.ms=5
offsets.load.buffer.size=5242880
offsets.topic.compression.codec=0
transaction.state.log.load.buffer.size=5242880
share.coordinator.threads=1
share.coordinator.load.buffer.size=5242880
share.coordinator.append.linger.ms=10
share.coordinator.state.topic.compression.codec=0
socket.listen.backlog.size=50
fetch.purgatory.purge.interval.requests=1000
producer.purgatory.purge.interval.requests=1000
delete.records.purgatory.purge.interval.requests=1
eligible.leader.replicas.enable=false
`

// TestServeKafka4Sample: Kafka 4's sample server.properties, with the group
// coordinator properties, starts samsa serve unchanged.
func TestServeKafka4Sample(t *testing.T) {
	path := filepath.Join(t.TempDir(), "server.properties")
	if err := os.WriteFile(path, []byte(kafka4Sample), 0o644); err != nil {
		t.Fatal(err)
	}
	b := testutil.StartBrokerArgs(t, []string{"-c", path})
	createTopic(t, newAdmin(t, b), "from-kafka-sample", 1, nil)
}
