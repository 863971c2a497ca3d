package cli_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/samsa-streaming/samsa/internal/bench"
	"github.com/samsa-streaming/samsa/internal/cli"
	"github.com/samsa-streaming/samsa/internal/testutil"
)

// cliResult is what one run of the built samsa binary produced.
type cliResult struct {
	stdout, stderr string
	code           int
}

// samsaCmd returns an exec.Cmd running the built binary against broker.
func samsaCmd(t *testing.T, ctx context.Context, broker *testutil.Broker, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.CommandContext(ctx, testutil.SamsaBinary(t), args...)
	cmd.Env = append(os.Environ(), cli.BrokersEnv+"="+broker.Addr)
	return cmd
}

// run runs the binary to completion with stdin and returns its outputs and exit code.
func run(t *testing.T, broker *testutil.Broker, stdin string, args ...string) cliResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	return runWith(t, ctx, broker, stdin, args...)
}

// runWith is run within ctx.
func runWith(t *testing.T, ctx context.Context, broker *testutil.Broker, stdin string, args ...string) cliResult {
	t.Helper()
	cmd := samsaCmd(t, ctx, broker, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = strings.NewReader(stdin), &stdout, &stderr
	err := cmd.Run()
	res := cliResult{stdout: stdout.String(), stderr: stderr.String()}
	if exitErr, ok := errors.AsType[*exec.ExitError](err); ok {
		res.code = exitErr.ExitCode()
	} else if err != nil {
		t.Fatalf("samsa %v: %v", args, err)
	}
	return res
}

// ok runs the binary and fails the test unless it exits 0.
func ok(t *testing.T, broker *testutil.Broker, stdin string, args ...string) string {
	t.Helper()
	res := run(t, broker, stdin, args...)
	if res.code != cli.ExitOK {
		t.Fatalf("samsa %s: exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), res.code, res.stdout, res.stderr)
	}
	return res.stdout
}

// okJSON runs the binary with -o json and decodes its output into v.
func okJSON(t *testing.T, broker *testutil.Broker, v any, args ...string) {
	t.Helper()
	out := ok(t, broker, "", append(args, "-o", "json")...)
	if err := json.Unmarshal([]byte(out), v); err != nil {
		t.Fatalf("samsa %v -o json: %v\n%s", args, err, out)
	}
}

// jsonLines decodes one JSON object per line.
func jsonLines[T any](t *testing.T, out string) []T {
	t.Helper()
	var items []T
	for line := range strings.Lines(out) {
		var v T
		if err := json.Unmarshal([]byte(line), &v); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		items = append(items, v)
	}
	return items
}

type topicList struct {
	Topics []struct {
		Topic             string `json:"topic"`
		Partitions        int    `json:"partitions"`
		ReplicationFactor int    `json:"replication_factor"`
	} `json:"topics"`
}

type topicDescription struct {
	Topic             string `json:"topic"`
	ReplicationFactor int    `json:"replication_factor"`
	Partitions        []struct {
		Partition      int32   `json:"partition"`
		Leader         int32   `json:"leader"`
		Replicas       []int32 `json:"replicas"`
		ISR            []int32 `json:"isr"`
		LogStartOffset *int64  `json:"log_start_offset"`
		LogEndOffset   *int64  `json:"log_end_offset"`
		SizeBytes      *int64  `json:"size_bytes"`
	} `json:"partitions"`
	SizeBytes *int64 `json:"size_bytes"`
	Configs   []struct {
		Name   string  `json:"name"`
		Value  *string `json:"value"`
		Source string  `json:"source"`
	} `json:"configs"`
}

func (d topicDescription) config(name string) (value, source string) {
	for _, c := range d.Configs {
		if c.Name == name && c.Value != nil {
			return *c.Value, c.Source
		}
	}
	return "", ""
}

func (d topicDescription) endOffsets() []int64 {
	var out []int64
	for _, p := range d.Partitions {
		if p.LogEndOffset == nil {
			out = append(out, -1)
		} else {
			out = append(out, *p.LogEndOffset)
		}
	}
	return out
}

type consumed struct {
	Topic       string  `json:"topic"`
	Partition   int32   `json:"partition"`
	Offset      int64   `json:"offset"`
	TimestampMs int64   `json:"timestamp_ms"`
	Key         *string `json:"key"`
	Value       *string `json:"value"`
	Headers     []struct {
		Key   string `json:"key"`
		Value string `json:"value"`
	} `json:"headers"`
}

type produced struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
}

func TestTopicCommands(t *testing.T) {
	b := testutil.StartBroker(t)

	out := ok(t, b, "", "topic", "create", "orders", "-p", "3", "-r", "1", "-c", "retention.ms=3600000")
	if !strings.Contains(out, `created topic "orders"`) || !strings.Contains(out, "partitions: 3") {
		t.Fatalf("create output %q", out)
	}
	dup := run(t, b, "", "topic", "create", "orders", "-p", "3")
	if dup.code != cli.ExitFailed || !strings.Contains(dup.stderr, "TOPIC_ALREADY_EXISTS") {
		t.Fatalf("duplicate create: exit %d, stderr %q", dup.code, dup.stderr)
	}
	// A refusal names the error code once and then the broker's own words, without
	// the categories the code already names.
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"orders", "-p", "3"}, `TOPIC_ALREADY_EXISTS: topic "orders" already exists`},
		{[]string{"other", "-c", "foo=bar"}, `INVALID_CONFIG: foo is not a topic config`},
		{[]string{"other", "-c", "retention.ms=abc"}, `INVALID_CONFIG: retention.ms="abc": not a 64-bit integer`},
		{[]string{"other", "-r", "3"}, `INVALID_REPLICATION_FACTOR: unable to replicate the partition 3 time(s): only 1 broker(s) are registered, unfenced and not shutting down`},
	} {
		res := run(t, b, "", append([]string{"topic", "create"}, c.args...)...)
		want := `Error: create topic "` + c.args[0] + `": ` + c.want + "\n"
		if res.code != cli.ExitFailed || res.stderr != want {
			t.Errorf("topic create %v: exit %d, stderr %q; want exit %d and %q", c.args, res.code, res.stderr, cli.ExitFailed, want)
		}
	}

	var list topicList
	okJSON(t, b, &list, "topic", "list")
	if len(list.Topics) != 1 || list.Topics[0].Topic != "orders" || list.Topics[0].Partitions != 3 || list.Topics[0].ReplicationFactor != 1 {
		t.Fatalf("topic list: %+v", list)
	}
	if text := ok(t, b, "", "topic", "list"); !strings.Contains(text, "orders") || !strings.Contains(text, "PARTITIONS") {
		t.Fatalf("topic list text %q", text)
	}

	ok(t, b, "a\nb\nc\nd\n", "produce", "orders", "--partition", "1")
	var desc topicDescription
	okJSON(t, b, &desc, "topic", "describe", "orders")
	if got := desc.endOffsets(); !slices.Equal(got, []int64{0, 4, 0}) {
		t.Fatalf("end offsets %v, want [0 4 0]", got)
	}
	if p := desc.Partitions[1]; p.Leader < 0 || len(p.Replicas) != 1 || !slices.Equal(p.ISR, p.Replicas) || p.LogStartOffset == nil || *p.LogStartOffset != 0 {
		t.Fatalf("partition 1: %+v", p)
	}
	if s := desc.Partitions[1].SizeBytes; s == nil || *s <= 0 || desc.SizeBytes == nil || *desc.SizeBytes != *s {
		t.Fatalf("sizes from DescribeLogDirs: partition 1 %v, topic %v", s, desc.SizeBytes)
	}
	if v, src := desc.config("retention.ms"); v != "3600000" || src != "DYNAMIC_TOPIC_CONFIG" {
		t.Fatalf("retention.ms = %q from %q", v, src)
	}
	text := ok(t, b, "", "topic", "describe", "orders")
	for _, want := range []string{"Partitions:          3", "LOG-END", "retention.ms", "3600000"} {
		if !strings.Contains(text, want) {
			t.Fatalf("describe text lacks %q:\n%s", want, text)
		}
	}

	ok(t, b, "", "topic", "alter-config", "orders", "--set", "cleanup.policy=compact", "--delete", "retention.ms")
	desc = topicDescription{}
	okJSON(t, b, &desc, "topic", "describe", "orders")
	if v, src := desc.config("cleanup.policy"); v != "compact" || src != "DYNAMIC_TOPIC_CONFIG" {
		t.Fatalf("cleanup.policy = %q from %q", v, src)
	}
	if _, src := desc.config("retention.ms"); src == "DYNAMIC_TOPIC_CONFIG" {
		t.Fatalf("retention.ms still overridden after --delete")
	}

	grow := run(t, b, "", "topic", "add-partitions", "orders", "--total", "5")
	if grow.code != 0 || !strings.Contains(grow.stderr, "warning:") || !strings.Contains(grow.stderr, "ordering") {
		t.Fatalf("add-partitions: exit %d, stderr %q", grow.code, grow.stderr)
	}
	desc = topicDescription{}
	okJSON(t, b, &desc, "topic", "describe", "orders")
	if len(desc.Partitions) != 5 {
		t.Fatalf("%d partitions after add-partitions --total 5", len(desc.Partitions))
	}

	var created struct {
		Topic             string `json:"topic"`
		Partitions        int32  `json:"partitions"`
		ReplicationFactor int16  `json:"replication_factor"`
	}
	okJSON(t, b, &created, "topic", "create", "scratch", "-p", "2", "-r", "1")
	if created.Topic != "scratch" || created.Partitions != 2 || created.ReplicationFactor != 1 {
		t.Fatalf("create -o json: %+v", created)
	}
	var altered struct {
		Topic   string            `json:"topic"`
		Set     map[string]string `json:"set"`
		Deleted []string          `json:"deleted"`
	}
	okJSON(t, b, &altered, "topic", "alter-config", "scratch", "--set", "retention.ms=1000", "--delete", "cleanup.policy")
	if altered.Set["retention.ms"] != "1000" || !slices.Equal(altered.Deleted, []string{"cleanup.policy"}) {
		t.Fatalf("alter-config -o json: %+v", altered)
	}
	var deleted struct {
		Topics []struct {
			Topic string `json:"topic"`
			Error string `json:"error"`
		} `json:"topics"`
	}
	res := run(t, b, "", "topic", "delete", "scratch", "never-was", "-o", "json")
	if res.code != cli.ExitFailed || json.Unmarshal([]byte(res.stdout), &deleted) != nil || len(deleted.Topics) != 2 ||
		deleted.Topics[0].Error != "" || !strings.Contains(deleted.Topics[1].Error, "UNKNOWN_TOPIC_OR_PARTITION") {
		t.Fatalf("delete with one missing topic: exit %d, %+v\n%s", res.code, deleted, res.stderr)
	}

	// In text, a missing topic is said once: the hint in place of the error code's
	// own description.
	res = run(t, b, "", "topic", "delete", "never-was")
	if want := "delete topic \"never-was\": UNKNOWN_TOPIC_OR_PARTITION: the topic does not exist; see `samsa topic list`"; res.code != cli.ExitFailed || strings.TrimSpace(res.stderr) != "Error: "+want {
		t.Fatalf("delete a missing topic: exit %d, stderr %q; want %q", res.code, res.stderr, want)
	}

	ok(t, b, "", "topic", "delete", "orders")
	list = topicList{}
	okJSON(t, b, &list, "topic", "list")
	if len(list.Topics) != 0 {
		t.Fatalf("topics after delete: %+v", list)
	}
	missing := run(t, b, "", "topic", "describe", "orders")
	if missing.code != cli.ExitFailed || !strings.Contains(missing.stderr, `topic "orders" does not exist`) {
		t.Fatalf("describe deleted topic: exit %d, stderr %q", missing.code, missing.stderr)
	}
}

func TestProduceConsume(t *testing.T) {
	b := testutil.StartBroker(t)
	ok(t, b, "", "topic", "create", "events", "-p", "3", "-r", "1")

	// Silent on success; JSON prints one acknowledgement per record.
	if out := ok(t, b, "user-1:login\nuser-2:login\nuser-1:logout\n", "produce", "events", "-K", ":", "-H", "src=cli,trace=t1"); out != "" {
		t.Fatalf("produce printed %q without --verbose", out)
	}
	acks := jsonLines[produced](t, ok(t, b, "nokey\n", "produce", "events", "-p", "2", "--acks", "1", "--compression", "zstd", "-o", "json"))
	if len(acks) != 1 || acks[0].Topic != "events" || acks[0].Partition != 2 {
		t.Fatalf("produce -o json: %+v", acks)
	}

	recs := jsonLines[consumed](t, ok(t, b, "", "consume", "events", "--count", "4", "-o", "json"))
	if len(recs) != 4 {
		t.Fatalf("consumed %d records, want 4", len(recs))
	}
	byKey := map[string][]string{}
	keyPartition := map[string]int32{}
	for _, r := range recs {
		key := "<nil>"
		if r.Key != nil {
			key = *r.Key
			if p, seen := keyPartition[key]; seen && p != r.Partition {
				t.Fatalf("key %q on partitions %d and %d", key, p, r.Partition)
			}
			keyPartition[key] = r.Partition
		}
		byKey[key] = append(byKey[key], *r.Value)
		if r.TimestampMs <= 0 {
			t.Fatalf("record without timestamp: %+v", r)
		}
	}
	if !slices.Equal(byKey["user-1"], []string{"login", "logout"}) || !slices.Equal(byKey["user-2"], []string{"login"}) || !slices.Equal(byKey["<nil>"], []string{"nokey"}) {
		t.Fatalf("records by key: %v", byKey)
	}
	for _, r := range recs {
		if r.Key != nil && (len(r.Headers) != 2 || r.Headers[0].Key != "src" || r.Headers[1].Value != "t1") {
			t.Fatalf("headers of %+v", r)
		}
	}

	var logout consumed
	for _, r := range recs {
		if r.Key != nil && *r.Key == "user-1" && *r.Value == "logout" {
			logout = r
		}
	}
	out := ok(t, b, "", "consume", "events", "--partition", fmt.Sprint(logout.Partition), "--from", fmt.Sprint(logout.Offset), "--count", "1",
		"--format", `{{.Partition}}/{{.Offset}} {{.Key}}={{.Value}} {{.Headers.Get "trace"}}`)
	if want := fmt.Sprintf("%d/%d user-1=logout t1\n", logout.Partition, logout.Offset); out != want {
		t.Fatalf("consume --format: %q, want %q", out, want)
	}
	if out := ok(t, b, "", "consume", "events", "--partition", "2", "--from", fmt.Sprint(acks[0].Offset), "--count", "1"); out != "nokey\n" {
		t.Fatalf("default format prints %q, want the value", out)
	}

	// --from a timestamp: only records produced after it.
	cut := time.Now().Add(time.Millisecond)
	testutil.WaitFor(t, 5*time.Second, func() bool { return time.Now().After(cut) }, "clock past the cut")
	ok(t, b, "late\n", "produce", "events", "-p", "0")
	out = ok(t, b, "", "consume", "events", "--partition", "0", "--from", fmt.Sprintf("@%d", cut.UnixMilli()), "--count", "1")
	if out != "late\n" {
		t.Fatalf("consume --from @ms: %q", out)
	}
	out = ok(t, b, "", "consume", "events", "--partition", "0", "--from", cut.UTC().Format(time.RFC3339Nano), "--count", "1")
	if out != "late\n" {
		t.Fatalf("consume --from RFC3339: %q", out)
	}

	ok(t, b, "", "topic", "create", "codecs", "-p", "1")
	for _, codec := range []string{"gzip", "snappy", "lz4", "zstd", "none"} {
		ok(t, b, codec+"\n", "produce", "codecs", "--compression", codec)
	}
	recs = jsonLines[consumed](t, ok(t, b, "", "consume", "codecs", "--count", "5", "--isolation", "read_committed", "-o", "json"))
	var values []string
	for _, r := range recs {
		values = append(values, *r.Value)
	}
	if !slices.Equal(values, []string{"gzip", "snappy", "lz4", "zstd", "none"}) {
		t.Fatalf("compressed round trip: %v", values)
	}

	missing := run(t, b, "x\n", "produce", "nope")
	if missing.code != cli.ExitFailed || !strings.Contains(missing.stderr, `topic "nope" does not exist`) {
		t.Fatalf("produce to a missing topic: exit %d, stderr %q", missing.code, missing.stderr)
	}
}

// startConsume runs `samsa consume` in the background and returns a channel of its
// output lines and the process.
func startConsume(t *testing.T, b *testutil.Broker, args ...string) (*exec.Cmd, <-chan string, *bytes.Buffer) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	cmd := samsaCmd(t, ctx, b, append([]string{"consume"}, args...)...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 1000)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	return cmd, lines, &stderr
}

func nextLines(t *testing.T, lines <-chan string, n int) []string {
	t.Helper()
	var got []string
	deadline := time.After(30 * time.Second)
	for len(got) < n {
		select {
		case l, open := <-lines:
			if !open {
				t.Fatalf("consume exited after %d of %d lines: %q", len(got), n, got)
			}
			got = append(got, l)
		case <-deadline:
			t.Fatalf("only %d of %d lines within 30s: %q", len(got), n, got)
		}
	}
	return got
}

func TestConsumeRunsUntilInterrupted(t *testing.T) {
	b := testutil.StartBroker(t)
	ok(t, b, "", "topic", "create", "stream", "-p", "1")
	ok(t, b, "one\ntwo\n", "produce", "stream")
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			cmd, lines, stderr := startConsume(t, b, "stream", "--from", "beginning")
			if got := nextLines(t, lines, 2); !slices.Equal(got, []string{"one", "two"}) {
				t.Fatalf("got %q", got)
			}
			ok(t, b, "more\n", "produce", "stream")
			if got := nextLines(t, lines, 1); got[0] != "more" {
				t.Fatalf("got %q after the first two", got)
			}
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			if err := cmd.Wait(); err != nil {
				t.Fatalf("consume after %v: %v; stderr %q", sig, err, stderr.String())
			}
		})
	}
}

type clusterInfo struct {
	ClusterID    string `json:"cluster_id"`
	ControllerID int32  `json:"controller_id"`
	Quorum       struct {
		LeaderID int32 `json:"leader_id"`
		Voters   []struct {
			NodeID int32 `json:"node_id"`
		} `json:"voters"`
	} `json:"quorum"`
	Brokers []struct {
		NodeID      int32  `json:"node_id"`
		Host        string `json:"host"`
		Port        int32  `json:"port"`
		APIVersions []struct {
			Key        int16  `json:"key"`
			Name       string `json:"name"`
			MinVersion int16  `json:"min_version"`
			MaxVersion int16  `json:"max_version"`
		} `json:"api_versions"`
	} `json:"brokers"`
}

func TestClusterInfo(t *testing.T) {
	b := testutil.StartBroker(t)
	var info clusterInfo
	okJSON(t, b, &info, "cluster", "info")
	if info.ClusterID == "" || len(info.Brokers) != 1 || fmt.Sprintf("%s:%d", info.Brokers[0].Host, info.Brokers[0].Port) != b.Addr {
		t.Fatalf("cluster info: %+v", info)
	}
	if info.Quorum.LeaderID != 1 || len(info.Quorum.Voters) != 1 || info.Quorum.Voters[0].NodeID != 1 {
		t.Fatalf("cluster info quorum: %+v", info.Quorum)
	}
	names := map[string]bool{}
	for _, v := range info.Brokers[0].APIVersions {
		names[v.Name] = v.MinVersion <= v.MaxVersion
	}
	for _, api := range []string{"Produce", "Fetch", "Metadata", "ApiVersions"} {
		if !names[api] {
			t.Fatalf("API versions lack %s: %+v", api, info.Brokers[0].APIVersions)
		}
	}
	text := ok(t, b, "", "cluster", "info")
	for _, want := range []string{info.ClusterID, b.Addr[strings.LastIndex(b.Addr, ":")+1:], "ApiVersions", "Controller:", "Metadata quorum: leader 1"} {
		if !strings.Contains(text, want) {
			t.Fatalf("cluster info text lacks %q:\n%s", want, text)
		}
	}

	// A partition the topic lacks is named before any election is asked for.
	ok(t, b, "", "topic", "create", "orders", "-p", "2")
	res := run(t, b, "", "cluster", "elect-leaders", "--topic", "orders", "--partition", "0", "--partition", "7")
	if want := `Error: topic "orders" has no partition 7 (it has 2)` + "\n"; res.code != cli.ExitFailed || res.stdout != "" || res.stderr != want {
		t.Fatalf("elect-leaders on a missing partition: exit %d, stdout %q, stderr %q; want exit %d and %q",
			res.code, res.stdout, res.stderr, cli.ExitFailed, want)
	}
}

// TestClusterUnregister: an unknown broker id is refused with the code and which
// broker; the node itself, still running, is unregistered (its topic's partition is
// reported as still holding a replica there) and registers again by itself.
func TestClusterUnregister(t *testing.T) {
	b := testutil.StartBroker(t)
	res := run(t, b, "", "cluster", "unregister", "--id", "7")
	if res.code != cli.ExitFailed || !strings.Contains(res.stderr, "BROKER_ID_NOT_REGISTERED: broker 7 is not registered") {
		t.Fatalf("unregister 7: exit %d\nstdout:\n%s\nstderr:\n%s", res.code, res.stdout, res.stderr)
	}
	if res := run(t, b, "", "cluster", "unregister"); res.code != cli.ExitUsage {
		t.Fatalf("unregister without --id: exit %d, stderr:\n%s", res.code, res.stderr)
	}
	ok(t, b, "", "topic", "create", "held", "-p", "1", "-r", "1")
	out := ok(t, b, "", "cluster", "unregister", "--id", "1")
	if !strings.Contains(out, "broker 1 is no longer registered") || !strings.Contains(out, "still a replica of 1 partition") || !strings.Contains(out, "held-0") {
		t.Fatalf("unregister 1:\n%s", out)
	}
	testutil.WaitFor(t, 30*time.Second, func() bool {
		var info clusterInfo
		r := run(t, b, "", "cluster", "info", "-o", "json")
		return r.code == cli.ExitOK && json.Unmarshal([]byte(r.stdout), &info) == nil && len(info.Brokers) == 1
	}, "broker 1 registered again")
	if !strings.Contains(b.FullLog(), "registering again") {
		t.Fatalf("the node did not say it registers again:\n%s", testutil.Tail(b.FullLog(), 30))
	}
}

type doctorReport struct {
	Findings []struct {
		Code    string           `json:"code"`
		Topic   string           `json:"topic"`
		Group   string           `json:"group"`
		Numbers map[string]int64 `json:"numbers"`
		Message string           `json:"message"`
		Fix     string           `json:"fix"`
	} `json:"findings"`
}

func (r doctorReport) codes() []string {
	var out []string
	for _, f := range r.Findings {
		out = append(out, f.Topic+"/"+f.Group+"/"+f.Code)
	}
	return out
}

func doctor(t *testing.T, b *testutil.Broker, wantCode int, args ...string) doctorReport {
	t.Helper()
	res := run(t, b, "", append([]string{"doctor", "-o", "json"}, args...)...)
	if res.code != wantCode {
		t.Fatalf("doctor %v: exit %d, want %d\n%s\n%s", args, res.code, wantCode, res.stdout, res.stderr)
	}
	var rep doctorReport
	if err := json.Unmarshal([]byte(res.stdout), &rep); err != nil {
		t.Fatalf("doctor JSON: %v\n%s", err, res.stdout)
	}
	return rep
}

func TestDoctorTopics(t *testing.T) {
	b := testutil.StartBroker(t)
	ok(t, b, "", "topic", "create", "fine", "-p", "3", "-r", "1")
	if out := ok(t, b, "", "doctor", "--window", "0"); !strings.Contains(out, "no problems found") {
		t.Fatalf("healthy cluster: %q", out)
	}
	if rep := doctor(t, b, cli.ExitOK, "--window", "0"); len(rep.Findings) != 0 {
		t.Fatalf("healthy cluster findings: %v", rep.codes())
	}

	ok(t, b, "", "topic", "create", "misconfigured", "-p", "1", "-r", "1",
		"-c", "min.insync.replicas=2", "-c", "unclean.leader.election.enable=true")
	rep := doctor(t, b, cli.ExitFindings, "--window", "0")
	want := []string{"misconfigured//min_isr_above_replication_factor", "misconfigured//unclean_leader_election"}
	if !slices.Equal(rep.codes(), want) {
		t.Fatalf("findings %v, want %v", rep.codes(), want)
	}
	if f := rep.Findings[0]; f.Numbers["min_insync_replicas"] != 2 || f.Numbers["replication_factor"] != 1 || !strings.Contains(f.Fix, "alter-config misconfigured") {
		t.Fatalf("finding %+v", f)
	}
	if rep := doctor(t, b, cli.ExitOK, "--window", "0", "--topic", "fine"); len(rep.Findings) != 0 {
		t.Fatalf("doctor --topic fine: %v", rep.codes())
	}
	res := run(t, b, "", "doctor", "--window", "0", "--topic", "misconfigured")
	if res.code != cli.ExitFindings || !strings.Contains(res.stdout, "[error] min_isr_above_replication_factor") || !strings.Contains(res.stdout, "fix:") {
		t.Fatalf("doctor text: exit %d\n%s", res.code, res.stdout)
	}
}

func TestKcatInterop(t *testing.T) {
	kcat, err := exec.LookPath("kcat")
	if err != nil {
		t.Fatalf("kcat is not installed (make test installs it): %v", err)
	}
	b := testutil.StartBroker(t)
	ok(t, b, "", "topic", "create", "interop", "-p", "1")
	kcatRun := func(stdin string, args ...string) string {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, kcat, append([]string{"-b", b.Addr}, args...)...)
		cmd.Stdin = strings.NewReader(stdin)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("kcat %v: %v\n%s", args, err, stderr.String())
		}
		return string(out)
	}

	// samsa produces, kcat consumes.
	ok(t, b, "k1:v1\nk2:v2\n", "produce", "interop", "-K", ":", "-H", "a=1,b=2")
	got := kcatRun("", "-C", "-t", "interop", "-o", "beginning", "-c", "2", "-e", "-f", "%k=%s|%h\n")
	if want := "k1=v1|a=1,b=2\nk2=v2|a=1,b=2\n"; got != want {
		t.Fatalf("kcat read %q, want %q", got, want)
	}

	// kcat produces, samsa consumes.
	kcatRun("x1:y1\nx2:y2\n", "-P", "-t", "interop", "-K:", "-H", "h1=one", "-H", "h2=two")
	out := ok(t, b, "", "consume", "interop", "--from", "2", "--count", "2", "--format", "{{.Key}}={{.Value}}|{{.Headers}}")
	if want := "x1=y1|h1=one,h2=two\nx2=y2|h1=one,h2=two\n"; out != want {
		t.Fatalf("samsa read %q, want %q", out, want)
	}
}

// TestDoctorOfflineLogDir: a broker's second log directory is a disk that dies; the
// first write to its partition there fails (KAFKA_STORAGE_ERROR), the directory goes
// offline, and doctor reports it (offline_log_dir) naming the directory and the fix,
// while the partition on the healthy directory still takes writes.
func TestDoctorOfflineLogDir(t *testing.T) {
	t.Parallel()
	disk := testutil.NewDyingDisk(t, 64)
	b := testutil.StartBroker(t, "log.dirs="+t.TempDir()+","+disk.Dir)
	ok(t, b, "", "topic", "create", "doomed", "-p", "2", "-r", "1")
	dead, alive := int32(-1), int32(-1)
	for p := range int32(2) {
		if _, err := os.Stat(fmt.Sprintf("%s/doomed-%d", disk.Dir, p)); err == nil {
			dead = p
		} else {
			alive = p
		}
	}
	if dead < 0 || alive < 0 {
		t.Fatalf("doomed's two partitions are not one in each log directory (on the dying disk: %d)", dead)
	}
	if rep := doctor(t, b, cli.ExitOK, "--window", "0"); len(rep.Findings) != 0 {
		t.Fatalf("findings before the disk died: %v", rep.codes())
	}
	disk.Fail(t)
	res := run(t, b, "x\n", "produce", "doomed", "--partition", fmt.Sprint(dead), "--acks", "1", "--timeout", "3s")
	if res.code == 0 {
		t.Fatalf("a write to the dead disk was acknowledged:\n%s", res.stdout)
	}
	ok(t, b, "y\n", "produce", "doomed", "--partition", fmt.Sprint(alive))
	rep := doctor(t, b, cli.ExitFindings, "--window", "0")
	if !slices.Contains(rep.codes(), "//offline_log_dir") {
		t.Fatalf("doctor findings %v, want offline_log_dir", rep.codes())
	}
	for _, f := range rep.Findings {
		if f.Code == "offline_log_dir" && (!strings.Contains(f.Message, disk.Dir) || !strings.Contains(f.Fix, "restart")) {
			t.Fatalf("offline_log_dir finding %+v: want the directory %s named and a fix", f, disk.Dir)
		}
	}
}

// A broker's refusal reaches the user once, in the broker's words: not as the
// generic description of its error code, nor that description and the broker's
// message and a hint all saying the same.
func TestRefusalsInTheBrokersWords(t *testing.T) {
	b := testutil.StartBroker(t, "delete.topic.enable=false")
	ok(t, b, "", "topic", "create", "orders", "-p", "1")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"topic", "delete", "orders"},
			`delete topic "orders": TOPIC_DELETION_DISABLED: delete.topic.enable is false on this broker`},
		{[]string{"acl", "list"},
			`list ACLs: SECURITY_DISABLED: no authorizer is configured (authorizer.class.name)`},
		{[]string{"acl", "create", "--topic", "orders", "--allow", "User:bob", "--operation", "read"},
			`create ACL Allow User:bob Read on Topic:Literal:orders from *: SECURITY_DISABLED: no authorizer is configured (authorizer.class.name)`},
		{[]string{"topic", "list", "--sasl-mechanism", "PLAIN", "--user", "bob", "--password", "secret"},
			`list topics: ILLEGAL_SASL_STATE: the listener does not use SASL: drop --sasl-mechanism, or connect to the cluster's SASL listener`},
		{[]string{"quota", "set", "--entity-user", "bob", "foo=1"},
			`set quotas: INVALID_REQUEST: quota "foo" does not apply to this entity (one of [consumer_byte_rate controller_mutation_rate producer_byte_rate request_percentage])`},
		{[]string{"user", "scram", "delete", "nobody"},
			`delete the SCRAM credential of nobody: RESOURCE_NOT_FOUND: nobody has no SCRAM-SHA-256 credential`},
	} {
		res := run(t, b, "", c.args...)
		want := "Error: " + c.want + "\n"
		if res.code != cli.ExitFailed || res.stderr != want {
			t.Errorf("samsa %s: exit %d, stderr %q; want exit %d and %q",
				strings.Join(c.args, " "), res.code, res.stderr, cli.ExitFailed, want)
		}
	}
}

// The bench commands' flag errors are usage errors too: exit code 2 and a pointer
// to --help.
func TestBenchFlagErrorsExitTwo(t *testing.T) {
	root := cli.NewRoot()
	root.AddCommand(bench.NewCommand())
	var stdout, stderr bytes.Buffer
	root.SetArgs([]string{"-b", "127.0.0.1:1", "bench", "produce", "--records", "0"})
	root.SetOut(&stdout)
	root.SetErr(&stderr)
	if code := cli.Execute(root); code != cli.ExitUsage || !strings.Contains(stderr.String(), "give --records or --duration") ||
		!strings.Contains(stderr.String(), "Run 'samsa bench produce --help' for usage.") {
		t.Fatalf("bench produce --records 0: exit %d, stderr %q; want exit %d and a pointer to --help", code, stderr.String(), cli.ExitUsage)
	}
}
