package conformance

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/samsa-streaming/samsa/internal/testutil"
)

// externalBrokerEnv names an environment variable that, when set to host:port, runs
// the suite against that (already running) broker instead of starting `samsa serve`:
// the same scripts then check any Kafka, which is how a failure is told apart as a
// client quirk or a Samsa bug. Only loopback addresses are accepted.
const externalBrokerEnv = "SAMSA_CONFORMANCE_BROKER"

// driverTimeout bounds one script run; each script also enforces it on itself.
const driverTimeout = 60 * time.Second

// client is one external Kafka client and the script that drives it.
type client struct {
	name string
	argv []string // interpreter and script
	// canCreate: the client has an admin API for CreateTopics.
	canCreate bool
	// headers: records it produces carry the "seq" header.
	headers bool
	// requiredCodecs must all be reported usable by the driver.
	requiredCodecs []string
}

func dir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Dir(file)
}

// The Debian Python clients import only under /usr/bin/python3.
const python = "/usr/bin/python3"

var (
	kcat = client{name: "kcat", argv: []string{python, "kcat.py"},
		requiredCodecs: []string{"none", "gzip", "snappy", "lz4", "zstd"}}
	kafkaPython = client{name: "kafka-python", argv: []string{python, "kafka_python.py"},
		canCreate: true, headers: true, requiredCodecs: []string{"none", "gzip"}}
	confluent = client{name: "confluent-kafka", argv: []string{python, "confluent.py"},
		canCreate: true, headers: true,
		requiredCodecs: []string{"none", "gzip", "snappy", "lz4", "zstd"}}
	kafkajs = client{name: "kafkajs", argv: []string{"node", "kafkajs.js"},
		canCreate: true, headers: true, // consume goes through a group: kafkajs has no other consumer
		requiredCodecs: []string{"none", "gzip"}}

	allClients = []client{kcat, kafkaPython, confluent, kafkajs}
)

// summary is the JSON object a driver prints on its last line.
type summary struct {
	Error                string         `json:"error"`
	Client               string         `json:"client"`
	Codecs               []string       `json:"codecs"`
	Brokers              []brokerInfo   `json:"brokers"`
	Topics               map[string]int `json:"topics"`
	Produced             int            `json:"produced"`
	Acks                 []ack          `json:"acks"`
	Records              []record       `json:"records"`
	IncompletePartitions []int          `json:"incomplete_partitions"`
	// Configs is command "configs"' answer: resource ("topic", "broker") to config name.
	Configs map[string]map[string]configEntry `json:"configs"`
}

// configEntry is one config as a driver's DescribeConfigs reports it; synonyms are
// "SOURCE:name=value".
type configEntry struct {
	Value     *string  `json:"value"`
	Source    string   `json:"source"`
	Sensitive bool     `json:"sensitive"`
	Synonyms  []string `json:"synonyms"`
}

type brokerInfo struct {
	ID   int32  `json:"id"`
	Host string `json:"host"`
	Port int    `json:"port"`
}

type ack struct {
	Key       string `json:"key"`
	Value     string `json:"value"`
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
}

type record struct {
	Partition int32             `json:"partition"`
	Offset    int64             `json:"offset"`
	Key       *string           `json:"key"`
	Value     *string           `json:"value"`
	Headers   map[string]string `json:"headers"`
}

// target is the broker under test.
type target struct {
	addr   string
	broker *testutil.Broker // nil for an external broker
	suffix string           // makes topic and group names unique per run
	// security are driver options for the listener at addr (--security-protocol,
	// --sasl-mechanism, --user, --password, --ca); admin is a PLAINTEXT address for
	// kadm ("" = addr).
	security []string
	admin    string
}

func startTarget(t *testing.T, overrides ...string) *target {
	t.Helper()
	suffix := strconv.FormatInt(time.Now().UnixNano()%1_000_000_000, 36)
	if addr := os.Getenv(externalBrokerEnv); addr != "" {
		if !strings.HasPrefix(addr, "127.") && !strings.HasPrefix(addr, "localhost:") {
			t.Fatalf("%s=%q: only loopback brokers are allowed", externalBrokerEnv, addr)
		}
		return &target{addr: addr, suffix: suffix}
	}
	b := testutil.StartBroker(t, overrides...)
	tg := &target{addr: b.Addr, broker: b, suffix: suffix}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("broker log (tail):\n%s", tail(b.Log(), 60))
		}
	})
	return tg
}

func (tg *target) topic(parts ...string) string {
	return "conf." + strings.Join(parts, ".") + "." + tg.suffix
}

func tail(s string, lines int) string {
	all := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return strings.Join(all, "\n")
}

// run runs one driver command and returns its parsed summary; any failure (exit
// status, timeout, error summary) fails the test with the driver's stderr.
func (c client) run(t *testing.T, tg *target, command string, args ...string) summary {
	t.Helper()
	s, err := c.try(tg, command, args...)
	if err != nil {
		t.Fatalf("%s %s: %v", c.name, command, err)
	}
	return s
}

func (c client) try(tg *target, command string, args ...string) (summary, error) {
	ctx, cancel := context.WithTimeout(context.Background(), driverTimeout+10*time.Second)
	defer cancel()
	argv := append(append([]string{}, c.argv[1:]...), command, "--bootstrap", tg.addr,
		"--timeout", strconv.Itoa(int(driverTimeout/time.Second)))
	argv = append(append(argv, tg.security...), args...)
	cmd := exec.CommandContext(ctx, c.argv[0], argv...)
	cmd.Dir = dir()
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	if errors.Is(runErr, exec.ErrNotFound) || errors.Is(runErr, os.ErrNotExist) {
		return summary{}, fmt.Errorf("%v (run scripts/install-test-deps.sh, or make test)", runErr)
	}
	line := lastLine(stdout.String())
	var s summary
	if line != "" {
		if err := json.Unmarshal([]byte(line), &s); err != nil {
			return s, fmt.Errorf("unparsable summary %q: %v\nstderr:\n%s", line, err, tail(stderr.String(), 40))
		}
	}
	switch {
	case s.Error != "":
		return s, fmt.Errorf("driver error: %s\nstderr:\n%s", s.Error, tail(stderr.String(), 40))
	case runErr != nil:
		return s, fmt.Errorf("%v\nstdout:\n%s\nstderr:\n%s", runErr, tail(stdout.String(), 10), tail(stderr.String(), 40))
	case line == "":
		return s, errors.New("driver printed no summary")
	}
	return s, nil
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

// createTopic creates a topic through the client's own admin API, or through
// franz-go's kadm for clients that have none (kcat).
func createTopic(t *testing.T, tg *target, c client, topic string, partitions int) {
	t.Helper()
	if c.canCreate {
		c.run(t, tg, "create", "--topic", topic, "--partitions", strconv.Itoa(partitions))
		return
	}
	admin := tg.addr
	if tg.admin != "" {
		admin = tg.admin
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(admin))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	resp, err := kadm.NewClient(cl).CreateTopic(ctx, int32(partitions), 1, nil, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("kadm create topic %s: %v", topic, err)
	}
}

// recordValue mirrors common.py's and kafkajs.js's generator.
func recordValue(tag, key string, seq int) string {
	return fmt.Sprintf("%s|%s|%d|%s", tag, key, seq, strings.Repeat("samsa-", 1+seq%7))
}

type keySeq struct {
	key string
	seq int
}

type position struct {
	partition int32
	offset    int64
}

// verifyRecords checks what a consumer read against what the generator produced:
// every record exactly once, intact, each key in one partition, offsets strictly
// increasing within each partition, each key's sequence in order, and — when the
// producer reported them — every record at the partition and offset acknowledged.
// reporter is the part of testing.T that verifyRecords needs, so that the checks
// themselves can be tested.
type reporter interface {
	Helper()
	Errorf(format string, args ...any)
}

func verifyRecords(t reporter, tag string, keys, perKey int, wantHeaders bool, acks []ack, recs []record) {
	t.Helper()
	if got, want := len(recs), keys*perKey; got != want {
		t.Errorf("consumed %d records, want %d", got, want)
	}
	seen := map[keySeq]position{}
	keyPartition := map[string]int32{}
	lastOffset := map[int32]int64{}
	lastSeq := map[string]int{}
	bad := 0
	fail := func(format string, args ...any) {
		bad++
		if bad <= 10 {
			t.Errorf(format, args...)
		}
	}
	for i, r := range recs {
		if r.Key == nil || r.Value == nil {
			fail("record %d (p%d@%d): nil key or value", i, r.Partition, r.Offset)
			continue
		}
		key, value := *r.Key, *r.Value
		fields := strings.SplitN(value, "|", 4)
		if len(fields) != 4 || fields[0] != tag || fields[1] != key {
			fail("record %d (p%d@%d): key %q value %q does not belong to tag %q", i, r.Partition, r.Offset, key, value, tag)
			continue
		}
		seq, err := strconv.Atoi(fields[2])
		if err != nil || seq < 0 || seq >= perKey || value != recordValue(tag, key, seq) {
			fail("record %d (p%d@%d): corrupt value %q", i, r.Partition, r.Offset, value)
			continue
		}
		if wantHeaders && r.Headers["seq"] != strconv.Itoa(seq) {
			fail("record %d (p%d@%d): headers %v, want seq=%d", i, r.Partition, r.Offset, r.Headers, seq)
		}
		ks := keySeq{key, seq}
		if prev, dup := seen[ks]; dup {
			fail("record %s#%d consumed twice: p%d@%d and p%d@%d", key, seq, prev.partition, prev.offset, r.Partition, r.Offset)
			continue
		}
		seen[ks] = position{r.Partition, r.Offset}
		if p, ok := keyPartition[key]; ok && p != r.Partition {
			fail("key %s in partitions %d and %d", key, p, r.Partition)
		}
		keyPartition[key] = r.Partition
		if last, ok := lastOffset[r.Partition]; ok && r.Offset <= last {
			fail("partition %d: offset %d after %d", r.Partition, r.Offset, last)
		}
		lastOffset[r.Partition] = r.Offset
		if last, ok := lastSeq[key]; ok && seq <= last {
			fail("key %s: seq %d after %d (order within partition lost)", key, seq, last)
		}
		lastSeq[key] = seq
	}
	for i := 0; i < keys; i++ {
		for seq := 0; seq < perKey; seq++ {
			if _, ok := seen[keySeq{fmt.Sprintf("k%d", i), seq}]; !ok {
				fail("record k%d#%d never consumed", i, seq)
			}
		}
	}
	if len(acks) == 0 {
		return
	}
	if len(acks) != keys*perKey {
		t.Errorf("producer acknowledged %d records, want %d", len(acks), keys*perKey)
	}
	for _, a := range acks {
		fields := strings.SplitN(a.Value, "|", 4)
		if len(fields) != 4 {
			fail("ack with foreign value %q", a.Value)
			continue
		}
		seq, _ := strconv.Atoi(fields[2])
		got, ok := seen[keySeq{a.Key, seq}]
		if ok && (got.partition != a.Partition || got.offset != a.Offset) {
			fail("record %s#%d acknowledged at p%d@%d but consumed at p%d@%d", a.Key, seq, a.Partition, a.Offset, got.partition, got.offset)
		}
	}
}

// codecs asks a driver which codecs it can use here and checks the required ones
// are among them.
func codecs(t *testing.T, tg *target, c client) []string {
	t.Helper()
	s := c.run(t, tg, "codecs")
	have := map[string]bool{}
	for _, codec := range s.Codecs {
		have[codec] = true
	}
	for _, want := range c.requiredCodecs {
		if !have[want] {
			t.Errorf("%s cannot use codec %s here (has %v)", c.name, want, s.Codecs)
		}
	}
	out := append([]string(nil), s.Codecs...)
	sort.Strings(out)
	return out
}
