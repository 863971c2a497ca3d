package perf

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-streaming/samsa/internal/testutil"
)

const heartbeat = 250 * time.Millisecond

func startBroker(b *testing.B, extra ...string) *testutil.Broker {
	b.Helper()
	var args []string
	if path := os.Getenv("PERF_BROKER_CPUPROFILE"); path != "" {
		// Written when the broker stops; one file per run of the function.
		args = append(args, "--cpuprofile", fmt.Sprintf("%s.%d", path, b.N))
	}
	return testutil.StartBrokerArgs(b, args, append(brokerOverrides(), extra...)...)
}

// brokerOverrides are the properties every benchmark's broker runs with.
func brokerOverrides() []string {
	return []string{
		"group.initial.rebalance.delay.ms=0",
		"offsets.topic.num.partitions=4",
		"group.consumer.min.heartbeat.interval.ms=50",
		"group.consumer.heartbeat.interval.ms=" + strconv.Itoa(int(heartbeat.Milliseconds())),
		"group.consumer.min.session.timeout.ms=1000",
		"group.consumer.session.timeout.ms=10000",
		"group.share.min.heartbeat.interval.ms=1000", "group.share.heartbeat.interval.ms=1000",
		"log.flush.interval.messages=9223372036854775807",
	}
}

func admin(b *testing.B, br *testutil.Broker) (*kgo.Client, *kadm.Client) {
	b.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(br.Addr))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(cl.Close)
	return cl, kadm.NewClient(cl)
}

// createTopic creates a topic and waits until every partition has a leader (on a
// loaded machine creating thousands of partitions outlasts the request's timeout).
func createTopic(b *testing.B, adm *kadm.Client, name string, partitions int32) {
	b.Helper()
	createTopicRF(b, adm, name, partitions, 1)
}

// createTopicRF is createTopic with replication factor rf.
func createTopicRF(b *testing.B, adm *kadm.Client, name string, partitions int32, rf int16) {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if _, err := adm.CreateTopic(ctx, partitions, rf, nil, name); err != nil {
		b.Logf("create %s: %v (waiting for it anyway)", name, err)
	}
	waitCond(b, 5*time.Minute, "topic "+name, func() bool {
		td, err := adm.ListTopics(ctx, name)
		if err != nil || td[name].Err != nil || len(td[name].Partitions) != int(partitions) {
			return false
		}
		for _, p := range td[name].Partitions {
			if p.Leader < 0 {
				return false
			}
		}
		return true
	})
}

// ownership follows who owns which partition from the members' callbacks.
type ownership struct {
	mu           sync.Mutex
	owner        map[int32]string
	count        map[string]int
	since        map[int32]time.Time // partition -> when it lost its owner
	maxUnowned   time.Duration
	doubleOwners int
}

func newOwnership() *ownership {
	return &ownership{owner: map[int32]string{}, count: map[string]int{}, since: map[int32]time.Time{}}
}

func (o *ownership) assign(m string, ps []int32) {
	now := time.Now()
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, p := range ps {
		if cur, ok := o.owner[p]; ok && cur != m {
			o.doubleOwners++
		}
		o.owner[p] = m
		o.count[m]++
		if s, ok := o.since[p]; ok {
			o.maxUnowned = max(o.maxUnowned, now.Sub(s))
			delete(o.since, p)
		}
	}
}

func (o *ownership) revoke(m string, ps []int32) {
	now := time.Now()
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, p := range ps {
		if o.owner[p] == m {
			delete(o.owner, p)
			o.count[m]--
			o.since[p] = now
		}
	}
}

// balanced reports whether members members own all partitions, each member
// floor or ceil of its share.
func (o *ownership) balanced(members, partitions int) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.owner) != partitions || len(o.count) < members {
		return false
	}
	lo := partitions / members
	n := 0
	for _, c := range o.count {
		if c > 0 {
			n++
		}
		if c < lo || c > lo+1 {
			return false
		}
	}
	return n == members
}

func (o *ownership) resetGaps() {
	o.mu.Lock()
	o.maxUnowned = 0
	clear(o.since)
	o.mu.Unlock()
}

func waitCond(b *testing.B, timeout time.Duration, what string, cond func() bool) time.Duration {
	b.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > timeout {
			b.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
	return time.Since(start)
}

// joinSettle starts 50 members and waits until they are balanced. Then a 51st member
// joins at once — within the group's assignment interval of its last assignment, which
// KIP-1263 (Kafka 4.3) makes it wait for ("burst") — and, once the group has stayed
// balanced for that interval, a 52nd ("stable"), as a member joining a settled group
// does. It returns how long the group took to be balanced after each join, the longest
// a partition was without an owner after either, and how many times a partition was
// assigned while another member owned it.
func joinSettle(b *testing.B, br *testutil.Broker, topic, group string, partitions int, kip848 bool) (burst, stable, gap time.Duration, doubles int) {
	own := newOwnership()
	var clients []*kgo.Client
	start := func(i int) {
		name := "m" + strconv.Itoa(i)
		opts := []kgo.Opt{
			kgo.SeedBrokers(br.Addr), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
			kgo.FetchMaxWait(time.Second), kgo.DisableAutoCommit(),
			kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, ps map[string][]int32) { own.assign(name, ps[topic]) }),
			kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, ps map[string][]int32) { own.revoke(name, ps[topic]) }),
			kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, ps map[string][]int32) { own.revoke(name, ps[topic]) }),
		}
		if kip848 {
			opts = append(opts, kgo.ServerSideBalancer())
		} else {
			opts = append(opts, kgo.HeartbeatInterval(heartbeat), kgo.SessionTimeout(10*time.Second))
		}
		cl, err := kgo.NewClient(opts...)
		if err != nil {
			b.Fatal(err)
		}
		clients = append(clients, cl)
		go func() {
			for {
				if fs := cl.PollFetches(context.Background()); fs.IsClientClosed() {
					return
				}
			}
		}()
	}
	defer func() {
		var wg sync.WaitGroup
		for _, cl := range clients {
			wg.Add(1)
			go func() { defer wg.Done(); cl.Close() }()
		}
		wg.Wait()
	}()
	for i := range 50 {
		start(i)
	}
	waitCond(b, 2*time.Minute, "50 members balanced", func() bool { return own.balanced(50, partitions) })
	own.resetGaps()
	start(50)
	burst = waitCond(b, 2*time.Minute, "51 members balanced", func() bool { return own.balanced(51, partitions) })
	var since time.Time
	waitCond(b, 2*time.Minute, "51 members balanced for the assignment interval", func() bool {
		if !own.balanced(51, partitions) {
			since = time.Time{}
			return false
		}
		if since.IsZero() {
			since = time.Now()
		}
		return time.Since(since) >= assignmentInterval
	})
	start(51)
	stable = waitCond(b, 2*time.Minute, "52 members balanced", func() bool { return own.balanced(52, partitions) })
	own.mu.Lock()
	defer own.mu.Unlock()
	return burst, stable, own.maxUnowned, own.doubleOwners
}

// assignmentInterval is group.consumer.assignment.interval.ms at its default, which
// the benchmarks' broker keeps.
const assignmentInterval = time.Second

// BenchmarkGroupJoinSettle: a member joins a group of 50 members on 500 partitions
// right after it settled, and another once it has stayed settled for the assignment
// interval (joinSettle). Each iteration measures the KIP-848 protocol and the classic
// cooperative one (kgo's default cooperative-sticky balancer), both with a 250 ms
// heartbeat interval.
func BenchmarkGroupJoinSettle(b *testing.B) {
	br := startBroker(b)
	_, adm := admin(b, br)
	const partitions = 500
	createTopic(b, adm, "settle", partitions)
	var s848, sClassic, burst848, burstClassic, gap848 []time.Duration
	for i := range b.N {
		for _, kip848 := range []bool{true, false} {
			group := fmt.Sprintf("settle-%d-%v", i, kip848)
			burst, stable, gap, doubles := joinSettle(b, br, "settle", group, partitions, kip848)
			if doubles > 0 {
				b.Fatalf("%s: a partition was assigned while another member owned it (%d times)", group, doubles)
			}
			if kip848 {
				s848, burst848, gap848 = append(s848, stable), append(burst848, burst), append(gap848, gap)
			} else {
				sClassic, burstClassic = append(sClassic, stable), append(burstClassic, burst)
			}
			b.Logf("iteration %d kip848=%v: settled in %v (joining a settled group), %v (joining right after it settled), longest without owner %v",
				i, kip848, stable, burst, gap)
		}
	}
	b.ReportMetric(ms(median(s848)), "kip848-settle-ms")
	b.ReportMetric(ms(median(sClassic)), "classic-settle-ms")
	b.ReportMetric(ms(median(burst848)), "kip848-burst-settle-ms")
	b.ReportMetric(ms(median(burstClassic)), "classic-burst-settle-ms")
	b.ReportMetric(ms(slices.Max(gap848)), "kip848-max-unowned-ms")
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// produce100 writes n 100-byte records to topic through seeds, in batches of at most
// 16 KiB (the Java producer's default batch.size): to partition 0 with
// kgo.RecordPartitioner(kgo.ManualPartitioner()) in opts, else spread by franz-go's
// default partitioner.
func produce100(b *testing.B, seeds []string, topic string, n int, opts ...kgo.Opt) {
	b.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic(topic),
		kgo.ProducerLinger(5 * time.Millisecond), kgo.MaxBufferedRecords(100_000),
		kgo.ProducerBatchMaxBytes(16384)}, opts...)...)
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	val := []byte(strings.Repeat("x", 100))
	var failed atomic.Value
	for range n {
		cl.Produce(context.Background(), &kgo.Record{Value: val}, func(_ *kgo.Record, err error) {
			if err != nil {
				failed.Store(err)
			}
		})
	}
	if err := cl.Flush(context.Background()); err != nil {
		b.Fatal(err)
	}
	if err, _ := failed.Load().(error); err != nil {
		b.Fatal(err)
	}
}

// classicRate reads n records of partition 0 with one classic consumer: a group
// member, or a consumer without a group when group is empty (the null broker serves no
// classic group). pid is the broker's process.
func classicRate(b *testing.B, addr string, pid int, topic, group string, n int) float64 {
	opts := []kgo.Opt{kgo.SeedBrokers(addr), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())}
	if group != "" {
		opts = append(opts, kgo.ConsumerGroup(group))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	client0, broker0 := processCPU(b), cpuTicks(b, pid)
	var start time.Time
	got := 0
	for got < n {
		fs := cl.PollFetches(context.Background())
		if start.IsZero() && fs.NumRecords() > 0 {
			start = time.Now()
		}
		got += fs.NumRecords()
	}
	elapsed := time.Since(start)
	b.Logf("classic: client CPU %.2f µs/record, broker CPU %.2f µs/record, load %s",
		1e6*(processCPU(b)-client0)/float64(n), 1e4*float64(cpuTicks(b, pid)-broker0)/float64(n), loadavg())
	return float64(n) / elapsed.Seconds()
}

// shareRate reads n records of topic with four share consumers, each record
// accepted, and returns their rate once all four read: the records read from the
// fourth consumer's first to the last, over that time. (The group assigns its members'
// joins together once its assignment interval has passed since the first's, KIP-1263:
// the first member reads alone meanwhile.) pids are the brokers' processes, metrics
// their metrics listeners (none for the null broker); raw, when not nil, first sets
// the group's share.auto.offset.reset to earliest (the null broker has no such
// config).
func shareRate(b *testing.B, addr string, pids []int, metrics []string, raw *kgo.Client, topic, group string, n, maxRecords int) float64 {
	if raw != nil {
		setShareEarliest(b, raw, group)
	}
	waits0 := shareWaits(b, metrics)
	flush := os.Getenv("PERF_SHARE_FLUSH") != ""
	var got, reading, allFrom, gotBefore atomic.Int64
	done := make(chan struct{})
	client0, broker0 := processCPU(b), cpuTicksOf(b, pids)
	var clients []*kgo.Client
	hook := &shareFetchHook{}
	for range 4 {
		var cl *kgo.Client
		var err error
		// The share consumers' goroutines carry the label phase=share (for
		// `go tool pprof -tagfocus phase=share` of a -cpuprofile).
		pprof.Do(context.Background(), pprof.Labels("phase", "share"), func(context.Context) {
			cl, err = kgo.NewClient(kgo.SeedBrokers(addr), kgo.ShareGroup(group), kgo.ConsumeTopics(topic),
				kgo.ShareMaxRecords(int32(maxRecords)), kgo.WithHooks(hook))
		})
		if err != nil {
			b.Fatal(err)
		}
		clients = append(clients, cl)
		go func() {
			first := true
			for {
				fs := cl.PollFetches(context.Background())
				if fs.IsClientClosed() {
					return
				}
				if k := fs.NumRecords(); k > 0 {
					if flush {
						// Acknowledged in a ShareAcknowledge of their own, as a consumer
						// that commits after each poll does (else with its next fetch).
						if err := cl.FlushAcks(context.Background()); err != nil {
							b.Errorf("FlushAcks: %v", err)
						}
					}
					if first && reading.Add(1) == 4 {
						gotBefore.Store(got.Load())
						allFrom.Store(time.Now().UnixNano())
					}
					first = false
					if got.Add(int64(k)) >= int64(n) {
						hook.finished.Store(true)
						select {
						case done <- struct{}{}:
						default:
						}
					}
				}
			}
		}()
	}
	select {
	case <-done:
	case <-time.After(5 * time.Minute):
		b.Fatalf("share consumers read %d of %d records in 5 minutes", got.Load(), n)
	}
	if allFrom.Load() == 0 {
		b.Fatalf("only %d of the 4 share consumers read records", reading.Load())
	}
	elapsed := time.Since(time.Unix(0, allFrom.Load()))
	clientCPU, brokerCPU := processCPU(b)-client0, float64(cpuTicksOf(b, pids)-broker0)/100
	for _, cl := range clients {
		cl.Close()
	}
	reqs := hook.requests.Load()
	waited := "no broker metrics"
	if len(metrics) > 0 {
		w := shareWaits(b, metrics) - waits0
		waited = fmt.Sprintf("%d waited for records (%.0f %%)", w, 100*float64(w)/float64(max(reqs, 1)))
	}
	b.Logf("share: %d ShareFetch requests (%.0f records, %.0f bytes each, %d without records, %s, %.2f ms round trip, %d over 10 ms), client CPU %.2f µs/record, broker CPU %.2f µs/record, load %s",
		reqs, float64(n)/float64(max(reqs, 1)), float64(hook.bytes.Load())/float64(max(reqs, 1)), hook.empty.Load(), waited,
		float64(hook.nanos.Load())/1e6/float64(max(reqs, 1)), hook.slow.Load(), 1e6*clientCPU/float64(n), 1e6*brokerCPU/float64(n), loadavg())
	b.Logf("share: %d of the %d records read before all four consumers read", gotBefore.Load(), n)
	if acks := hook.acks.Load(); acks > 0 {
		b.Logf("share: %d ShareAcknowledge requests, %.2f ms round trip", acks, float64(hook.ackNanos.Load())/1e6/float64(acks))
	}
	return float64(n-int(gotBefore.Load())) / elapsed.Seconds()
}

// shareWaits is the ShareFetch requests the brokers whose metrics listeners are at
// addrs answered after a wait (samsa_share_fetch_waits_total, both results): with
// nothing to acquire at first — the window full, or no record left — they waited for
// records up to MaxWaitMillis.
func shareWaits(b *testing.B, addrs []string) int64 {
	var sum int64
	for _, addr := range addrs {
		families, err := testutil.ScrapeMetrics(context.Background(), addr)
		if err != nil {
			b.Fatal(err)
		}
		if f := families["samsa_share_fetch_waits_total"]; f != nil {
			for _, m := range f.GetMetric() {
				sum += int64(m.GetCounter().GetValue())
			}
		}
	}
	return sum
}

// setShareEarliest sets group's share.auto.offset.reset to earliest.
func setShareEarliest(b *testing.B, raw *kgo.Client, group string) {
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
	res.Configs = []kmsg.IncrementalAlterConfigsRequestResourceConfig{{Name: "share.auto.offset.reset", Value: kmsg.StringPtr("earliest")}}
	req.Resources = append(req.Resources, res)
	if _, err := req.RequestWith(context.Background(), raw); err != nil {
		b.Fatal(err)
	}
}

// shareFetchHook counts the ShareFetch round trips, those whose response carried no
// records (under 256 bytes), their response bytes and their time from the request's
// write to the end of the response's read — until every record was read: the fetches
// after that wait out their MaxWait for records that do not come.
type shareFetchHook struct {
	requests, empty atomic.Int64
	bytes, nanos    atomic.Int64
	slow            atomic.Int64 // round trips over 10 ms
	acks, ackNanos  atomic.Int64 // ShareAcknowledge round trips and their time
	finished        atomic.Bool
}

func (h *shareFetchHook) OnBrokerE2E(_ kgo.BrokerMetadata, key int16, e2e kgo.BrokerE2E) {
	if e2e.Err() != nil || h.finished.Load() {
		return
	}
	if key == int16(kmsg.ShareAcknowledge) {
		h.acks.Add(1)
		h.ackNanos.Add(int64(e2e.DurationE2E()))
		return
	}
	if key != int16(kmsg.ShareFetch) {
		return
	}
	h.requests.Add(1)
	h.bytes.Add(int64(e2e.BytesRead))
	if e2e.BytesRead < 256 {
		h.empty.Add(1)
	}
	h.nanos.Add(int64(e2e.DurationE2E()))
	if e2e.DurationE2E() > 10*time.Millisecond {
		h.slow.Add(1)
	}
}

// processCPU is this process's user+system CPU time in seconds.
func processCPU(b *testing.B) float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

// loadavg is the machine's 1-minute load average.
func loadavg() string {
	data, _ := os.ReadFile("/proc/loadavg")
	return strings.Fields(string(data) + " ?")[0]
}

// envInt reads a positive integer from the environment, def when unset.
func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// BenchmarkShareConsume: 4 share consumers against one classic consumer on one
// partition of 100-byte records. PERF_SHARE_RECORDS records (default 300,000); each
// share consumer asks for PERF_SHARE_MAX_RECORDS records a fetch (default 500, the
// Java client's max.poll.records); the broker allows PERF_SHARE_LOCKS records in
// flight (group.share.partition.max.record.locks, default 2000). Each phase logs the
// CPU per record of this process (the clients) and of the broker, and the share
// phase its ShareFetch round trips; with PERF_BROKER_CPUPROFILE=FILE the broker
// writes a CPU profile of its whole run to FILE.N (N: b.N of that run), and the
// share consumers' goroutines carry the pprof label phase=share. Besides each rate's
// median it reports the median of the iterations' share/classic ratios (issue 14's
// target: at least 0.5) and of Samsa's share rate over the null broker's.
func BenchmarkShareConsume(b *testing.B) {
	n := envInt("PERF_SHARE_RECORDS", 300_000)
	maxRecords := envInt("PERF_SHARE_MAX_RECORDS", 500)
	metrics := fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(b))
	br := startBroker(b, "group.share.partition.max.record.locks="+strconv.Itoa(envInt("PERF_SHARE_LOCKS", 2000)),
		"group.share.max.partition.max.record.locks=10000", "metrics.listener="+metrics) // PERF_SHARE_LOCKS up to Kafka's 10,000
	raw, adm := admin(b, br)
	createTopic(b, adm, "share-rate", 1)
	produce100(b, []string{br.Addr}, "share-rate", n, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	// The client's own ceilings: the same consumers against a null broker in its own
	// process, whose canned batches are shaped as produce100's (100-byte values,
	// 16 KiB before snappy, franz-go's default codec).
	nullAddr, nullPid := startNullBroker(b, "--record-size", "100", "--batch-bytes", "16384", "--compression", "snappy")
	var classic, shared, classicNull, sharedNull, ratio, ofNull []float64
	for i := range b.N {
		c := classicRate(b, br.Addr, br.Pid(), "share-rate", fmt.Sprintf("classic-%d", i), n)
		s := shareRate(b, br.Addr, []int{br.Pid()}, []string{metrics}, raw, "share-rate", fmt.Sprintf("share-%d", i), n, maxRecords)
		cn := classicRate(b, nullAddr, nullPid, "share-rate", "", n)
		sn := shareRate(b, nullAddr, []int{nullPid}, nil, nil, "share-rate", fmt.Sprintf("share-%d", i), n, maxRecords)
		classic, shared = append(classic, c), append(shared, s)
		classicNull, sharedNull = append(classicNull, cn), append(sharedNull, sn)
		ratio, ofNull = append(ratio, s/c), append(ofNull, s/sn)
		b.Logf("iteration %d: classic %.0f rec/s, 4 share consumers %.0f rec/s (%.2f); null broker: classic %.0f rec/s, 4 share consumers %.0f rec/s (%.2f); samsa/null: classic %.2f, share %.2f",
			i, c, s, s/c, cn, sn, sn/cn, c/cn, s/sn)
	}
	for _, m := range []struct {
		rates []float64
		unit  string
	}{{classic, "classic-rec/s"}, {shared, "share-rec/s"}, {classicNull, "null-classic-rec/s"}, {sharedNull, "null-share-rec/s"},
		{ratio, "share/classic"}, {ofNull, "share-samsa/null"}} {
		slices.Sort(m.rates)
		b.ReportMetric(m.rates[len(m.rates)/2], m.unit)
	}
}

// startNullBroker runs `samsa bench null-broker` with args in a process of its own,
// stopped when b ends, and returns its address and process id.
func startNullBroker(b *testing.B, args ...string) (string, int) {
	b.Helper()
	cmd := exec.Command(testutil.SamsaBinary(b), append([]string{"bench", "null-broker", "--listen", "127.0.0.1:0"}, args...)...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	const ready = "null broker listening on "
	line, err := bufio.NewReader(out).ReadString('\n')
	if !strings.HasPrefix(line, ready) {
		b.Fatalf("null broker did not start (printed %q): %v", line, err)
	}
	return strings.TrimSpace(strings.TrimPrefix(line, ready)), cmd.Process.Pid
}

// cpuTicks is a process's user+system CPU time in clock ticks (/proc/PID/stat).
func cpuTicks(b *testing.B, pid int) int64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	fields := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+2:]))
	utime, _ := strconv.ParseInt(fields[11], 10, 64)
	stime, _ := strconv.ParseInt(fields[12], 10, 64)
	return utime + stime
}

// cpuTicksOf is cpuTicks summed over processes.
func cpuTicksOf(b *testing.B, pids []int) int64 {
	var sum int64
	for _, pid := range pids {
		sum += cpuTicks(b, pid)
	}
	return sum
}

// BenchmarkClusterShareConsume: 4 share consumers on a cluster of three `samsa serve`
// processes, reading PERF_SHARE_RECORDS records (default 300,000) of 100 bytes spread
// over PERF_CLUSTER_SHARE_PARTITIONS partitions (default 60) of replication factor 3.
// Every acquisition and acknowledgement writes its share partition's state on that
// state's share coordinator, any of the three nodes, and waits for it to replicate.
// Each iteration logs its rate, its ShareFetch round trips, and the CPU per record of
// the clients and of the three brokers together. With PERF_SHARE_FLUSH set, each
// consumer acknowledges what it polled in a ShareAcknowledge of its own (kgo's
// FlushAcks) before it polls again.
func BenchmarkClusterShareConsume(b *testing.B) {
	n := envInt("PERF_SHARE_RECORDS", 300_000)
	partitions := envInt("PERF_CLUSTER_SHARE_PARTITIONS", 60)
	c := testutil.StartCluster(b, testutil.ClusterOptions{Overrides: brokerOverrides(), Metrics: true})
	addrs := c.BrokerAddrs()
	var pids []int
	var metrics []string
	for _, node := range c.Nodes() {
		pids = append(pids, node.Pid())
		metrics = append(metrics, node.MetricsAddr)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	createTopicRF(b, kadm.NewClient(cl), "cluster-share", int32(partitions), 3)
	produce100(b, addrs, "cluster-share", n)
	var rates []float64
	for i := range b.N {
		r := shareRate(b, addrs[0], pids, metrics, cl, "cluster-share", fmt.Sprintf("cluster-share-%d", i), n, 500)
		rates = append(rates, r)
		b.Logf("iteration %d: 4 share consumers, %d partitions of RF 3 on 3 nodes: %.0f rec/s", i, partitions, r)
	}
	slices.Sort(rates)
	b.ReportMetric(rates[len(rates)/2], "share-rec/s")
}

type fetchBytes struct{ bytes, requests atomic.Int64 }

func (f *fetchBytes) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, n int, _, _ time.Duration, err error) {
	if key == int16(kmsg.Fetch) && err == nil {
		f.bytes.Add(int64(n))
		f.requests.Add(1)
	}
}

// idleFetch consumes every partition of topic for d, a record produced to one
// partition every 100 ms; it returns Fetch request bytes, requests and broker CPU
// seconds.
func idleFetch(b *testing.B, br *testutil.Broker, topic string, d time.Duration, sessions bool) (int64, int64, float64) {
	hook := &fetchBytes{}
	opts := []kgo.Opt{kgo.SeedBrokers(br.Addr), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtEnd()),
		kgo.FetchMaxWait(500 * time.Millisecond), kgo.WithHooks(hook)}
	if !sessions {
		opts = append(opts, kgo.DisableFetchSessions())
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	prod, err := kgo.NewClient(kgo.SeedBrokers(br.Addr), kgo.DefaultProduceTopic(topic))
	if err != nil {
		b.Fatal(err)
	}
	defer prod.Close()
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		for ctx.Err() == nil {
			cl.PollFetches(ctx)
		}
	}()
	// Warm up: the first fetches load metadata and open the session.
	time.Sleep(3 * time.Second)
	b0, r0, c0 := hook.bytes.Load(), hook.requests.Load(), cpuTicks(b, br.Pid())
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		prod.ProduceSync(ctx, kgo.StringRecord("tick"))
		time.Sleep(100 * time.Millisecond)
	}
	cancel()
	return hook.bytes.Load() - b0, hook.requests.Load() - r0, float64(cpuTicks(b, br.Pid())-c0) / 100
}

// BenchmarkFetchSessions: a consumer of 10,000 partitions with and without
// incremental fetch sessions, 20 s each per iteration.
func BenchmarkFetchSessions(b *testing.B) {
	br := startBroker(b)
	_, adm := admin(b, br)
	createTopic(b, adm, "wide", 10_000)
	for i := range b.N {
		for _, sessions := range []bool{true, false} {
			bytes, reqs, cpu := idleFetch(b, br, "wide", 20*time.Second, sessions)
			b.Logf("iteration %d sessions=%v: %d Fetch requests, %d bytes (%.0f per request), broker CPU %.2f s (%.2f ms per request)",
				i, sessions, reqs, bytes, float64(bytes)/float64(max(reqs, 1)), cpu, 1000*cpu/float64(max(reqs, 1)))
			name := map[bool]string{true: "session", false: "full"}[sessions]
			b.ReportMetric(float64(bytes)/float64(max(reqs, 1)), name+"-req-bytes")
			b.ReportMetric(1000*cpu/float64(max(reqs, 1)), name+"-broker-cpu-ms/req")
		}
	}
}
