package testutil

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The exactly-once pipeline the transaction tests run: consume-transform-produce
// workers (internal/testutil/eosworker, franz-go's GroupTransactSession), each a
// process of its own that the test kills with kill -9 and starts again, fed by an
// input producer, checked by reading the output read_committed.

// EOSDebugDir, when set (SAMSA_EOS_DEBUG_DIR), makes the workers log the client's
// debug lines there, one file per process.
var EOSDebugDir = os.Getenv("SAMSA_EOS_DEBUG_DIR")

var (
	workerOnce sync.Once
	workerPath string
	workerErr  error
)

// eosWorkerBinary builds internal/testutil/eosworker once per test process.
func eosWorkerBinary(t testing.TB) string {
	t.Helper()
	workerOnce.Do(func() {
		dir, err := os.MkdirTemp("", "samsa-eosworker")
		if err != nil {
			workerErr = err
			return
		}
		workerPath = filepath.Join(dir, "eosworker")
		cmd := exec.Command("go", "build", "-o", workerPath, "./internal/testutil/eosworker")
		cmd.Dir = RepoRoot()
		if out, err := cmd.CombinedOutput(); err != nil {
			workerErr = fmt.Errorf("go build eosworker: %v\n%s", err, out)
		}
	})
	if workerErr != nil {
		t.Fatal(workerErr)
	}
	return workerPath
}

// EOSWorker is one running pipeline process.
type EOSWorker struct {
	Name      string
	cmd       *exec.Cmd
	stdin     io.WriteCloser
	committed atomic.Int64 // input records committed, as the process last reported
	done      chan struct{}
}

// EOSPipeline runs the consume-transform-produce workers of one test.
type EOSPipeline struct {
	t       testing.TB
	bin     string
	brokers string
	// In and Out are the topics, Group the consumer group.
	In, Out, Group string
	// SessionTimeout is the workers' group session timeout (the broker's
	// group.min.session.timeout.ms must allow it).
	SessionTimeout time.Duration
	stop           chan struct{} // closed when the test ends
	mu             sync.Mutex
	workers        map[string]*EOSWorker // the current process of each worker
	all            []*EOSWorker          // every process started
	stderr         strings.Builder
}

// NewEOSPipeline returns a pipeline over brokers of topics name-in and name-out and
// group name.
func NewEOSPipeline(t testing.TB, brokers []string, name string) *EOSPipeline {
	p := &EOSPipeline{t: t, bin: eosWorkerBinary(t), brokers: strings.Join(brokers, ","), In: name + "-in", Out: name + "-out",
		Group: name, SessionTimeout: 2 * time.Second, stop: make(chan struct{}), workers: map[string]*EOSWorker{}}
	t.Cleanup(func() { close(p.stop) })
	return p
}

// Start starts worker name (its transactional id is eos-NAME).
func (p *EOSPipeline) Start(name string) *EOSWorker {
	p.t.Helper()
	args := []string{"-brokers", p.brokers, "-in", p.In, "-out", p.Out, "-group", p.Group, "-txn-id", "eos-" + name,
		"-session-timeout", p.SessionTimeout.String()}
	if EOSDebugDir != "" {
		args = append(args, "-debug")
	}
	cmd := exec.Command(p.bin, args...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		p.t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		p.t.Fatal(err)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		p.t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		p.t.Fatal(err)
	}
	w := &EOSWorker{Name: name, cmd: cmd, stdin: stdin, done: make(chan struct{})}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if n, ok := strings.CutPrefix(sc.Text(), "committed "); ok {
				v, _ := strconv.ParseInt(n, 10, 64)
				w.committed.Store(v)
			}
		}
	}()
	go p.logStderr(name, stderr)
	go func() {
		_ = cmd.Wait()
		close(w.done)
	}()
	p.mu.Lock()
	p.workers[name] = w
	p.all = append(p.all, w)
	p.mu.Unlock()
	p.t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-w.done
	})
	return w
}

func (p *EOSPipeline) logStderr(name string, stderr io.Reader) {
	var f *os.File
	if EOSDebugDir != "" {
		f, _ = os.Create(filepath.Join(EOSDebugDir, fmt.Sprintf("%s-%d.log", name, time.Now().UnixNano())))
		defer f.Close()
	}
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		if f != nil {
			fmt.Fprintln(f, sc.Text())
			continue
		}
		p.mu.Lock()
		fmt.Fprintf(&p.stderr, "[%s] %s\n", name, sc.Text())
		p.mu.Unlock()
	}
}

// Restart kills worker name with SIGKILL, in the middle of whatever it was doing, and
// starts it again.
func (p *EOSPipeline) Restart(name string) {
	p.mu.Lock()
	w := p.workers[name]
	p.mu.Unlock()
	_ = w.cmd.Process.Kill()
	<-w.done
	p.Start(name)
}

// StopAll asks every worker to stop and waits for them.
func (p *EOSPipeline) StopAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, w := range p.workers {
		w.stdin.Close()
	}
	for _, w := range p.workers {
		select {
		case <-w.done:
		case <-time.After(20 * time.Second):
			_ = w.cmd.Process.Kill()
			<-w.done
		}
	}
}

// Progress is the number of input records the pipeline committed, as its workers
// reported (every process ever started counts what it committed before it died).
func (p *EOSPipeline) Progress() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	var n int64
	for _, w := range p.all {
		n += w.committed.Load()
	}
	return n
}

// EOSValue is the value of input record i.
func EOSValue(i int) string { return fmt.Sprintf("v-%06d", i) }

// Feed produces n input records with in, in 20 chunks at least every apart and never
// more than two ahead of the pipeline, and returns a channel that receives the outcome
// once all are written — an error if the pipeline made no progress for stall.
func (p *EOSPipeline) Feed(in *kgo.Client, n int, every, stall time.Duration) <-chan error {
	const chunks = 20
	produced := make(chan error, 1)
	go func() {
		next := time.Now()
		for k := range chunks {
			select {
			case <-time.After(time.Until(next)):
			case <-p.stop:
				produced <- nil
				return
			}
			next = next.Add(every)
			last, since := p.Progress(), time.Now()
			for p.Progress() < int64((k-2)*n/chunks) {
				if now := p.Progress(); now != last {
					last, since = now, time.Now()
				} else if time.Since(since) > stall {
					produced <- fmt.Errorf("the pipeline committed nothing for %v (at %d of %d records)", stall, now, n)
					return
				}
				select {
				case <-time.After(20 * time.Millisecond):
				case <-p.stop:
					produced <- nil
					return
				}
			}
			recs := make([]*kgo.Record, 0, n/chunks)
			for i := k * n / chunks; i < (k+1)*n/chunks; i++ {
				v := EOSValue(i)
				recs = append(recs, &kgo.Record{Topic: p.In, Key: []byte(v), Value: []byte(v)})
			}
			if err := in.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
				produced <- err
				return
			}
		}
		produced <- nil
	}()
	return produced
}

// WaitProgress waits until the pipeline committed at least n input records.
func (p *EOSPipeline) WaitProgress(n int64, timeout time.Duration) {
	p.t.Helper()
	p.waitUntil(timeout, func(context.Context) bool { return p.Progress() >= n },
		func() string {
			return fmt.Sprintf("the pipeline committed %d records, not %d, within %v", p.Progress(), n, timeout)
		})
}

// Fatalf fails the test with the workers' standard error.
func (p *EOSPipeline) Fatalf(format string, args ...any) {
	p.t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.t.Fatalf(format+"\nworkers' standard error:\n%s", append(args, p.stderr.String())...)
}

// waitUntil polls cond, with a context that ends at the deadline, until it holds;
// after timeout it fails the test with failure() and the workers' standard error.
func (p *EOSPipeline) waitUntil(timeout time.Duration, cond func(ctx context.Context) bool, failure func() string) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	for !cond(ctx) {
		select {
		case <-ctx.Done():
			p.Fatalf("%s", failure())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// WaitCaughtUp waits until the group's committed offsets reach the input's end.
func (p *EOSPipeline) WaitCaughtUp(adm *kadm.Client, timeout time.Duration) {
	p.t.Helper()
	var ends kadm.ListedOffsets
	p.waitUntil(timeout, func(ctx context.Context) bool {
		if ends == nil {
			e, err := adm.ListEndOffsets(ctx, p.In)
			if err != nil {
				return false
			}
			ends = e
		}
		committed, err := adm.FetchOffsets(ctx, p.Group)
		if err != nil {
			return false
		}
		caughtUp := true
		ends.Each(func(lo kadm.ListedOffset) {
			if c, ok := committed.Lookup(p.In, lo.Partition); !ok || c.At < lo.Offset {
				caughtUp = false
			}
		})
		return caughtUp
	}, func() string { return fmt.Sprintf("the group did not commit the whole input within %v", timeout) })
}

// WaitSettled waits until no transaction is open in the output topic: every
// partition's last stable offset has reached its high watermark. A worker killed or
// stopped in the middle of a transaction leaves it open until its coordinator aborts
// it at the transaction timeout (10 s, noticed every
// transaction.abort.timed.out.transaction.cleanup.interval.ms), and until then
// read_committed consumers see nothing in that partition from its first record on —
// the other workers' committed records after it included.
func (p *EOSPipeline) WaitSettled(adm *kadm.Client, timeout time.Duration) {
	p.t.Helper()
	start := time.Now()
	var open []string
	p.waitUntil(timeout, func(ctx context.Context) bool {
		stable, err1 := adm.ListCommittedOffsets(ctx, p.Out)
		ends, err2 := adm.ListEndOffsets(ctx, p.Out)
		if errors.Join(err1, err2) != nil || len(ends[p.Out]) == 0 {
			return false
		}
		open = open[:0]
		ends.Each(func(end kadm.ListedOffset) {
			if s, ok := stable.Lookup(p.Out, end.Partition); !ok || s.Offset < end.Offset {
				open = append(open, fmt.Sprintf("%s-%d (last stable offset %d, high watermark %d)", p.Out, end.Partition, s.Offset, end.Offset))
			}
		})
		return len(open) == 0
	}, func() string { return fmt.Sprintf("transactions still open in the output after %v: %v", timeout, open) })
	if d := time.Since(start); d > time.Second {
		p.t.Logf("the output settled after %v (a transaction was left open)", d.Round(time.Millisecond))
	}
}

// CheckExactlyOnce checks that values (the output as read_committed) hold every
// input value [0, n) exactly once.
func CheckExactlyOnce(t testing.TB, values []string, n int) {
	t.Helper()
	seen := make(map[string]int, n)
	for _, v := range values {
		seen[v]++
	}
	var missing, dup []string
	for i := range n {
		v := EOSValue(i)
		switch c := seen[v]; {
		case c == 0:
			missing = append(missing, v)
		case c > 1:
			dup = append(dup, fmt.Sprintf("%s×%d", v, c))
		}
	}
	first := func(s []string) []string { return s[:min(len(s), 10)] }
	if len(values) != n || len(missing) > 0 || len(dup) > 0 {
		t.Fatalf("output read_committed: %d records for %d inputs; missing %d %v; duplicated %d %v",
			len(values), n, len(missing), first(missing), len(dup), first(dup))
	}
}

// ReadAll reads every record of topic with a fresh franz-go consumer over brokers, up
// to its end offsets — its last stable offsets with committed (read_committed) — and
// returns their values in partition and offset order. How far it read is the offset of
// the last batch it was handed, so control batches are kept (a transactional
// partition ends with a marker), and not the high watermark a fetch reports, which is
// where the partition ends, not where the fetch stopped.
func ReadAll(t testing.TB, brokers []string, topic string, committed bool, timeout time.Duration) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	level := kgo.ReadUncommitted()
	if committed {
		level = kgo.ReadCommitted()
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(level), kgo.KeepControlRecords())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	list := adm.ListEndOffsets
	if committed {
		list = adm.ListCommittedOffsets
	}
	ends, err := list(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	got := map[int32][]string{}
	pos := map[int32]int64{}
	done := func() bool {
		for _, lo := range ends[topic] {
			if pos[lo.Partition] < lo.Offset {
				return false
			}
		}
		return true
	}
	for !done() {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %v of %s before the deadline (ends %v)", pos, topic, ends[topic])
		}
		fs.EachError(func(_ string, p int32, err error) { t.Fatalf("fetch %s/%d: %v", topic, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			pos[r.Partition] = max(pos[r.Partition], r.Offset+1)
			if !r.Attrs.IsControl() {
				got[r.Partition] = append(got[r.Partition], string(r.Value))
			}
		})
	}
	var out []string
	for p := range int32(len(ends[topic])) {
		out = append(out, got[p]...)
	}
	return out
}
