package conformance

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"sort"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// memberOptions are the knobs of a driver's "member" command.
type memberOptions struct {
	group             string
	topic             string
	instanceID        string
	assignor          string
	sessionTimeoutMs  int
	maxPollIntervalMs int
	maxPollRecords    int
	processDelayMs    int
	commit            bool
}

func (o memberOptions) args() []string {
	a := []string{"--group", o.group, "--topic", o.topic}
	if o.instanceID != "" {
		a = append(a, "--instance-id", o.instanceID)
	}
	if o.assignor != "" {
		a = append(a, "--assignor", o.assignor)
	}
	if o.sessionTimeoutMs != 0 {
		a = append(a, "--session-timeout-ms", strconv.Itoa(o.sessionTimeoutMs))
	}
	if o.maxPollIntervalMs != 0 {
		a = append(a, "--max-poll-interval-ms", strconv.Itoa(o.maxPollIntervalMs))
	}
	if o.maxPollRecords != 0 {
		a = append(a, "--max-poll-records", strconv.Itoa(o.maxPollRecords))
	}
	if o.processDelayMs != 0 {
		a = append(a, "--process-delay-ms", strconv.Itoa(o.processDelayMs))
	}
	if o.commit {
		a = append(a, "--commit")
	}
	return a
}

// memberEvent is one JSON line printed by a member.
type memberEvent struct {
	Ev         string           `json:"ev"`
	Partitions []int32          `json:"partitions"`
	Offsets    map[string]int64 `json:"offsets"`
	Msg        string           `json:"msg"`
	Error      string           `json:"error"`
	record
}

// member is a running group-consumer process of one client. Its state is rebuilt
// from the events it prints; all accessors are safe for concurrent use.
type member struct {
	name   string
	cmd    *exec.Cmd
	cancel context.CancelFunc
	done   chan struct{}

	mu struct {
		sync.Mutex
		owned       map[int32]bool
		ownedEvents int // assignment changes seen
		records     []record
		commits     map[int32]int64 // last committed next-offset per partition
		errors      []string
		stderr      bytes.Buffer
	}
}

// memberLifetime bounds a member process: the test kills it long before.
const memberLifetime = 4 * time.Minute

func startMember(t *testing.T, tg *target, c client, name string, o memberOptions) *member {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), memberLifetime)
	argv := append(append([]string{}, c.argv[1:]...), "member", "--bootstrap", tg.addr)
	argv = append(argv, o.args()...)
	cmd := exec.CommandContext(ctx, c.argv[0], argv...)
	cmd.Dir = dir()
	m := &member{name: name, cmd: cmd, cancel: cancel, done: make(chan struct{})}
	m.mu.owned = map[int32]bool{}
	m.mu.commits = map[int32]int64{}
	cmd.Stderr = &lockedWriter{m: m}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s member: %v", c.name, err)
	}
	go m.read(stdout)
	t.Cleanup(func() {
		m.kill()
		if t.Failed() {
			t.Logf("member %s stderr (tail):\n%s", m.name, tail(m.stderr(), 20))
		}
	})
	return m
}

type lockedWriter struct{ m *member }

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.m.mu.Lock()
	defer w.m.mu.Unlock()
	if w.m.mu.stderr.Len() < 1<<20 {
		w.m.mu.stderr.Write(p)
	}
	return len(p), nil
}

func (m *member) read(stdout interface{ Read([]byte) (int, error) }) {
	defer close(m.done)
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for sc.Scan() {
		var e memberEvent
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			m.addError(fmt.Sprintf("unparsable event %q", sc.Text()))
			continue
		}
		m.apply(e)
	}
	_ = m.cmd.Wait()
}

func (m *member) apply(e memberEvent) {
	m.mu.Lock()
	defer m.mu.Unlock()
	switch e.Ev {
	case "assigned":
		for _, p := range e.Partitions {
			m.mu.owned[p] = true
		}
		m.mu.ownedEvents++
	case "revoked", "lost":
		for _, p := range e.Partitions {
			delete(m.mu.owned, p)
		}
		if len(e.Partitions) > 0 {
			m.mu.ownedEvents++
		}
	case "assignment": // the full set (kafkajs)
		m.mu.owned = map[int32]bool{}
		for _, p := range e.Partitions {
			m.mu.owned[p] = true
		}
		m.mu.ownedEvents++
	case "record":
		m.mu.records = append(m.mu.records, e.record)
	case "commit":
		for p, o := range e.Offsets {
			n, _ := strconv.Atoi(p)
			m.mu.commits[int32(n)] = o
		}
	case "error":
		m.mu.errors = append(m.mu.errors, e.Msg)
	case "ready", "closed":
	case "": // the driver's final {"error": ...} line, recorded below
	default:
		m.mu.errors = append(m.mu.errors, "unknown event "+e.Ev)
	}
	if e.Error != "" {
		m.mu.errors = append(m.mu.errors, e.Error)
	}
}

func (m *member) addError(s string) {
	m.mu.Lock()
	m.mu.errors = append(m.mu.errors, s)
	m.mu.Unlock()
}

// owned returns the partitions the member currently owns, sorted.
func (m *member) owned() []int32 {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []int32
	for p := range m.mu.owned {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

func (m *member) assignmentChanges() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.mu.ownedEvents
}

func (m *member) records() []record {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]record(nil), m.mu.records...)
}

func (m *member) commits() map[int32]int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[int32]int64{}
	for p, o := range m.mu.commits {
		out[p] = o
	}
	return out
}

func (m *member) errors() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.mu.errors...)
}

func (m *member) stderr() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.mu.stderr.String()
}

func (m *member) alive() bool {
	select {
	case <-m.done:
		return false
	default:
		return true
	}
}

// kill crashes the member (SIGKILL) and waits for it to be gone.
func (m *member) kill() {
	if m.cmd.Process != nil {
		_ = m.cmd.Process.Signal(syscall.SIGKILL)
	}
	<-m.done
	m.cancel()
}

// stop asks the member to close its consumer cleanly (SIGTERM) and waits up to
// 20 s before killing it.
func (m *member) stop(t *testing.T) {
	t.Helper()
	_ = m.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-m.done:
	case <-time.After(20 * time.Second):
		t.Errorf("member %s did not close within 20s of SIGTERM", m.name)
		m.kill()
	}
	m.cancel()
}

// produceWithKgo writes the generated records with franz-go (the group tests are
// about the consumers; the producer is not under test there).
func produceWithKgo(t *testing.T, tg *target, topic, tag string, keys, perKey int) {
	t.Helper()
	// Uncompressed: not every client can read every codec (kafkajs has only gzip).
	cl, err := kgo.NewClient(kgo.SeedBrokers(tg.addr), kgo.DefaultProduceTopic(topic),
		kgo.ProducerBatchCompression(kgo.NoCompression()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var recs []*kgo.Record
	for seq := 0; seq < perKey; seq++ {
		for i := 0; i < keys; i++ {
			key := fmt.Sprintf("k%d", i)
			recs = append(recs, &kgo.Record{Key: []byte(key), Value: []byte(recordValue(tag, key, seq)),
				Headers: []kgo.RecordHeader{{Key: "seq", Value: []byte(strconv.Itoa(seq))}}})
		}
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce setup records to %s: %v", topic, err)
	}
}

// distinct returns the records with duplicates (same partition and offset) removed,
// in first-seen order.
func distinct(recs []record) []record {
	seen := map[position]bool{}
	var out []record
	for _, r := range recs {
		pos := position{r.Partition, r.Offset}
		if !seen[pos] {
			seen[pos] = true
			out = append(out, r)
		}
	}
	return out
}

// byPartitionOffset sorts records the way a single reader of each partition sees them.
func byPartitionOffset(recs []record) []record {
	out := append([]record(nil), recs...)
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Partition != out[j].Partition {
			return out[i].Partition < out[j].Partition
		}
		return out[i].Offset < out[j].Offset
	})
	return out
}
