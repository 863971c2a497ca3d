package integration

// Consumer groups driven by segmentio/kafka-go's Reader with a GroupID (issue 3,
// "Tests with real clients").
//
// Not expressible with kafka-go:
//   - static membership: ReaderConfig has no group.instance.id;
//   - cooperative rebalancing: kafka-go only implements the eager protocol;
//   - eviction of a slow processor: the Reader rejoins on a rebalance in its own
//     goroutines, whatever the application is doing between FetchMessage calls (its
//     partition readers stop on the generation's context, not on the application), so
//     processing time never makes a kafka-go member miss the rebalance timeout.
// Members are told apart in DescribeGroups by their client.id (Dialer.ClientID).

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	kafkago "github.com/segmentio/kafka-go"

	"github.com/samsa-streaming/samsa/internal/testutil"
)

// kafkagoProcess handles one fetched message; it returns false to stop the member's loop.
type kafkagoProcess func(ctx context.Context, r *kafkago.Reader, msg kafkago.Message) bool

type kafkagoMember struct {
	name      string
	r         *kafkago.Reader
	ks        *killSwitch
	cancel    context.CancelFunc
	done      chan struct{}
	closeOnce sync.Once
}

// startKafkaGo starts a Reader in group on topic whose loop hands every message to process.
func startKafkaGo(t *testing.T, b *testutil.Broker, name, group, topic string, process kafkagoProcess, configure func(*kafkago.ReaderConfig)) *kafkagoMember {
	t.Helper()
	m := &kafkagoMember{name: name, ks: &killSwitch{}, done: make(chan struct{})}
	cfg := kafkago.ReaderConfig{
		Brokers:           []string{b.Addr},
		GroupID:           group,
		Topic:             topic,
		Dialer:            &kafkago.Dialer{ClientID: name, Timeout: 10 * time.Second, DialFunc: m.ks.DialContext},
		StartOffset:       kafkago.FirstOffset,
		MaxWait:           200 * time.Millisecond,
		ReadBackoffMin:    50 * time.Millisecond,
		ReadBackoffMax:    200 * time.Millisecond,
		SessionTimeout:    10 * time.Second,
		HeartbeatInterval: 100 * time.Millisecond,
		RebalanceTimeout:  5 * time.Second,
		JoinGroupBackoff:  100 * time.Millisecond,
		CommitInterval:    100 * time.Millisecond,
	}
	if configure != nil {
		configure(&cfg)
	}
	m.r = kafkago.NewReader(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	m.cancel = cancel
	go func() {
		defer close(m.done)
		for {
			msg, err := m.r.FetchMessage(ctx)
			if err != nil {
				if ctx.Err() != nil || errors.Is(err, io.EOF) {
					return
				}
				continue
			}
			if !process(ctx, m.r, msg) {
				return
			}
		}
	}()
	t.Cleanup(m.close)
	return m
}

// close stops the loop and closes the Reader (which leaves the group).
func (m *kafkagoMember) close() {
	m.closeOnce.Do(func() {
		m.cancel()
		<-m.done
		m.r.Close()
	})
}

// kafkagoAuto records each message and commits it (asynchronously, CommitInterval).
func kafkagoAuto(name string, led *ledger) kafkagoProcess {
	return func(ctx context.Context, r *kafkago.Reader, msg kafkago.Message) bool {
		led.add(seen{Member: name, Partition: int32(msg.Partition), Offset: msg.Offset, Value: string(msg.Value)})
		_ = r.CommitMessages(ctx, msg)
		return true
	}
}

func syncCommits(cfg *kafkago.ReaderConfig) { cfg.CommitInterval = 0 }

// kafkagoShortSession is for tests that wait for a killed member's session to expire.
func kafkagoShortSession(cfg *kafkago.ReaderConfig) { cfg.SessionTimeout = 3 * time.Second }

// byClient maps DescribeGroups member ids to the kafka-go member with that client.id.
func byClient(v groupView, ms []*kafkagoMember) map[string]*kafkagoMember {
	out := map[string]*kafkagoMember{}
	for id, client := range v.Client {
		for _, m := range ms {
			if m.name == client {
				out[id] = m
			}
		}
	}
	return out
}

// TestGroupsKafkaGoGroupOfFour: four kafka-go Readers on three partitions (range
// assignment): one is idle; when an owner is killed, the group rebalances after its
// session timeout, the idle member gets a partition, and every later record is read
// once by the partition's new owner.
func TestGroupsKafkaGoGroupOfFour(t *testing.T) {
	t.Parallel()
	b := startGroupBroker(t)
	adm := newAdmin(t, b)
	const topic, group = "four", "four-kafkago"
	createTopic(t, adm, topic, 3, nil)

	led := newLedger(t)
	var ms []*kafkagoMember
	for i := 0; i < 4; i++ {
		name := fmt.Sprintf("m%d", i)
		ms = append(ms, startKafkaGo(t, b, name, group, topic, kafkagoAuto(name, led), kafkagoShortSession))
	}
	v := waitGroup(t, adm, group, topic, 30*time.Second, "4 members sharing 3 partitions", func(v groupView) bool { return v.balanced(4, 3) })
	idle := v.idle()
	if len(idle) != 1 {
		t.Fatalf("want exactly one idle member, got %v", v)
	}
	byID := byClient(v, ms)
	if len(byID) != 4 {
		t.Fatalf("members not identified by client id: %v", v.Client)
	}

	first := produceSpread(t, b, topic, "a", 3, 20)
	testutil.WaitFor(t, 20*time.Second, func() bool { return led.distinct() == 60 }, "the group to read the first 60 records")
	readByOwners(t, led, "", func(p int32) string { return byID[v.owner(p)].name })
	checkAll(t, first, led.all(), nil)

	victimID := v.owner(0)
	byID[victimID].ks.Kill()
	v2 := waitGroup(t, adm, group, topic, 30*time.Second, "the group to rebalance without the killed member", func(v groupView) bool {
		_, stillThere := v.Members[victimID]
		return v.balanced(3, 3) && !stillThere && len(v.Members[idle[0]]) == 1
	})
	checkReadAfterKill(t, b, led, topic, func(p int32) string { return byID[v2.owner(p)].name })
}

// TestGroupsKafkaGoFanOut: two kafka-go groups on one topic each read every record once.
func TestGroupsKafkaGoFanOut(t *testing.T) {
	t.Parallel()
	runFanOut(t, func(b *testutil.Broker, name, group, topic string, led *ledger) {
		startKafkaGo(t, b, name, group, topic, kafkagoAuto(name, led), nil)
	})
}

// TestGroupsKafkaGoResumeAfterKill: a Reader commits each message synchronously after
// processing it and is killed after processing one it has not committed; a new Reader
// in the group resumes at the committed offsets, nothing is lost and only that message
// is processed twice.
func TestGroupsKafkaGoResumeAfterKill(t *testing.T) {
	t.Parallel()
	b := startGroupBroker(t)
	adm := newAdmin(t, b)
	const topic, group = "resume", "resume-kafkago"
	createTopic(t, adm, topic, 3, nil)
	produced := produceSpread(t, b, topic, "r", 3, 100)

	led := newLedger(t)
	tail := map[string]bool{}
	committed := map[int32]int64{}
	processed := 0
	killed := make(chan struct{})
	ks := &killSwitch{}
	startKafkaGo(t, b, "first", group, topic, func(ctx context.Context, r *kafkago.Reader, msg kafkago.Message) bool {
		led.add(seen{Member: "first", Partition: int32(msg.Partition), Offset: msg.Offset, Value: string(msg.Value)})
		processed++
		if processed >= 120 {
			tail[string(msg.Value)] = true
			ks.Kill()
			close(killed)
			return false
		}
		if err := r.CommitMessages(ctx, msg); err != nil {
			t.Errorf("commit: %v", err)
			return false
		}
		committed[int32(msg.Partition)] = msg.Offset + 1
		return true
	}, func(cfg *kafkago.ReaderConfig) {
		syncCommits(cfg)
		kafkagoShortSession(cfg)
		cfg.Dialer.DialFunc = ks.DialContext
	})
	select {
	case <-killed:
	case <-time.After(30 * time.Second):
		t.Fatal("first member did not process 120 records in 30s")
	}
	if got := committedOffsets(t, adm, group, topic); !maps.Equal(got, committed) {
		t.Fatalf("broker has committed offsets %v, the member committed %v", got, committed)
	}

	startKafkaGo(t, b, "second", group, topic, func(ctx context.Context, r *kafkago.Reader, msg kafkago.Message) bool {
		led.add(seen{Member: "second", Partition: int32(msg.Partition), Offset: msg.Offset, Value: string(msg.Value)})
		return r.CommitMessages(ctx, msg) == nil
	}, syncCommits)
	waitDrained(t, adm, group, topic, 30*time.Second)
	checkResumed(t, produced, committed, tail, led.byMember()["second"])
	checkAll(t, produced, led.all(), tail)
}

// TestGroupsKafkaGoBrokerRestart: offsets committed by kafka-go and the group listing
// survive a clean restart and a kill -9; a Reader started afterwards resumes there.
func TestGroupsKafkaGoBrokerRestart(t *testing.T) {
	t.Parallel()
	b := startGroupBroker(t)
	adm := newAdmin(t, b)
	const topic, group = "persist", "persist-kafkago"
	createTopic(t, adm, topic, 3, nil)

	led := newLedger(t)
	all := produceSpread(t, b, topic, "x", 3, 30)
	m := startKafkaGo(t, b, "one", group, topic, kafkagoAuto("one", led), syncCommits)
	waitDrained(t, adm, group, topic, 30*time.Second)
	m.close()
	want := map[int32]int64{0: 30, 1: 30, 2: 30}
	check := func(when string) {
		t.Helper()
		adm := newAdmin(t, b)
		listed, err := adm.ListGroups(ctxT(t, 10*time.Second))
		if err != nil {
			t.Fatalf("%s: list groups: %v", when, err)
		}
		if _, ok := listed[group]; !ok {
			t.Fatalf("%s: group %s not listed (have %v)", when, group, listed.Groups())
		}
		if got := committedOffsets(t, adm, group, topic); !maps.Equal(got, want) {
			t.Fatalf("%s: committed offsets %v, want %v", when, got, want)
		}
		// kafka-go's own view of the committed offsets agrees.
		// A Transport of its own: the default one keeps connections across the restart.
		transport := &kafkago.Transport{}
		defer transport.CloseIdleConnections()
		client := &kafkago.Client{Addr: kafkago.TCP(b.Addr), Timeout: 10 * time.Second, Transport: transport}
		resp, err := client.OffsetFetch(ctxT(t, 10*time.Second), &kafkago.OffsetFetchRequest{GroupID: group, Topics: map[string][]int{topic: {0, 1, 2}}})
		if err != nil || resp.Error != nil {
			t.Fatalf("%s: kafka-go offset fetch: %v %v", when, err, resp)
		}
		for _, p := range resp.Topics[topic] {
			if p.Error != nil || p.CommittedOffset != want[int32(p.Partition)] {
				t.Fatalf("%s: kafka-go sees partition %d committed at %d (%v), want %d", when, p.Partition, p.CommittedOffset, p.Error, want[int32(p.Partition)])
			}
		}
	}
	check("before restart")
	b.Restart(t)
	check("after clean restart")

	for p, vs := range produceSpread(t, b, topic, "y", 3, 10) {
		all[p] = append(all[p], vs...)
	}
	m2 := startKafkaGo(t, b, "two", group, topic, kafkagoAuto("two", led), syncCommits)
	waitDrained(t, newAdmin(t, b), group, topic, 30*time.Second)
	m2.close()
	want = map[int32]int64{0: 40, 1: 40, 2: 40}
	b.Kill()
	b.StartAgain(t)
	check("after kill -9")
	for _, s := range led.byMember()["two"] {
		if !strings.HasPrefix(s.Value, "y-") {
			t.Fatalf("member started after the restart re-read %s (offset %d): committed offsets not used", s.Value, s.Offset)
		}
	}
	checkAll(t, all, led.all(), nil)
}
