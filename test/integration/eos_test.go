package integration

import (
	"bufio"
	"context"
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

	"github.com/samsa-streaming/samsa/internal/testutil"
)

var debugDir = os.Getenv("SAMSA_EOS_DEBUG_DIR")

var (
	workerOnce sync.Once
	workerPath string
	workerErr  error
)

// eosWorkerBinary builds test/integration/eosworker once per test process.
func eosWorkerBinary(t testing.TB) string {
	t.Helper()
	workerOnce.Do(func() {
		dir, err := os.MkdirTemp("", "samsa-eosworker")
		if err != nil {
			workerErr = err
			return
		}
		workerPath = filepath.Join(dir, "eosworker")
		cmd := exec.Command("go", "build", "-o", workerPath, "./test/integration/eosworker")
		cmd.Dir = testutil.RepoRoot()
		if out, err := cmd.CombinedOutput(); err != nil {
			workerErr = fmt.Errorf("go build eosworker: %v\n%s", err, out)
		}
	})
	if workerErr != nil {
		t.Fatal(workerErr)
	}
	return workerPath
}

// eosWorker is one running pipeline process.
type eosWorker struct {
	name      string
	cmd       *exec.Cmd
	stdin     io.WriteCloser
	committed atomic.Int64 // records committed, as the process last reported
	done      chan struct{}
}

// eosPipeline runs the consume-transform-produce workers of one test.
type eosPipeline struct {
	t              *testing.T
	bin, brokers   string
	in, out, group string
	stop           chan struct{} // closed when the test ends
	mu             sync.Mutex
	workers        map[string]*eosWorker // the current process of each worker
	all            []*eosWorker          // every process started
	stderr         strings.Builder
}

// newPipeline returns a pipeline of topics name-in and name-out and group name.
func newPipeline(t *testing.T, brokers, name string) *eosPipeline {
	p := &eosPipeline{t: t, bin: eosWorkerBinary(t), brokers: brokers, in: name + "-in", out: name + "-out", group: name,
		stop: make(chan struct{}), workers: map[string]*eosWorker{}}
	t.Cleanup(func() { close(p.stop) })
	return p
}

func (p *eosPipeline) start(name string) *eosWorker {
	p.t.Helper()
	args := []string{"-brokers", p.brokers, "-in", p.in, "-out", p.out, "-group", p.group, "-txn-id", "eos-" + name,
		"-session-timeout", "2s"}
	if debugDir != "" {
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
	w := &eosWorker{name: name, cmd: cmd, stdin: stdin, done: make(chan struct{})}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if n, ok := strings.CutPrefix(sc.Text(), "committed "); ok {
				v, _ := strconv.ParseInt(n, 10, 64)
				w.committed.Store(v)
			}
		}
	}()
	go func() {
		var f *os.File
		if debugDir != "" {
			f, _ = os.Create(filepath.Join(debugDir, fmt.Sprintf("%s-%d.log", name, time.Now().UnixNano())))
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
	}()
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

// kill ends a worker with SIGKILL, in the middle of whatever it was doing.
func (p *eosPipeline) kill(w *eosWorker) {
	_ = w.cmd.Process.Kill()
	<-w.done
}

// stopAll asks every worker to stop and waits for them.
func (p *eosPipeline) stopAll() {
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

// waitCommitted waits until the group's committed offsets reach the input's end.
func (p *eosPipeline) waitCaughtUp(adm *kadm.Client, timeout time.Duration) {
	p.t.Helper()
	ctx := ctxT(p.t, timeout)
	ends, err := adm.ListEndOffsets(ctx, p.in)
	if err != nil {
		p.t.Fatal(err)
	}
	for {
		committed, err := adm.FetchOffsets(ctx, p.group)
		if err == nil {
			behind := false
			ends.Each(func(lo kadm.ListedOffset) {
				if c, ok := committed.Lookup(p.in, lo.Partition); !ok || c.At < lo.Offset {
					behind = true
				}
			})
			if !behind {
				return
			}
		}
		select {
		case <-ctx.Done():
			p.mu.Lock()
			p.t.Fatalf("the group did not commit the whole input within %v:\n%s", timeout, p.stderr.String())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// checkExactlyOnce reads the output with read_committed and checks that it holds every
// input value exactly once.
func checkExactlyOnce(t *testing.T, b *testutil.Broker, out string, n int) {
	t.Helper()
	got := readAll(t, b, out, true)
	seen := make(map[string]int, n)
	for _, v := range got {
		seen[v]++
	}
	var missing, dup []string
	for i := range n {
		v := eosValue(i)
		switch c := seen[v]; {
		case c == 0:
			missing = append(missing, v)
		case c > 1:
			dup = append(dup, fmt.Sprintf("%s×%d", v, c))
		}
	}
	if len(got) != n || len(missing) > 0 || len(dup) > 0 {
		t.Fatalf("output read_committed: %d records for %d inputs; missing %d %v; duplicated %d %v",
			len(got), n, len(missing), head(missing), len(dup), head(dup))
	}
}

func head(s []string) []string { return s[:min(len(s), 10)] }

func eosValue(i int) string { return fmt.Sprintf("v-%06d", i) }

// eosBrokerOverrides let the pipeline's members use a 2 s session timeout, so that a
// killed member's partitions move on quickly.
var eosBrokerOverrides = []string{"group.initial.rebalance.delay.ms=0", "group.min.session.timeout.ms=1000"}

// progress is the number of input records the pipeline committed, as its workers
// reported (every process ever started counts what it committed before it died).
func (p *eosPipeline) progress() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	var n int64
	for _, w := range p.all {
		n += w.committed.Load()
	}
	return n
}

// runWithKills feeds n input records in chunks (never more than two chunks ahead of
// the pipeline) while kills run: each kill waits until the pipeline committed its
// share of the input, kill -9s the worker and starts it again.
func (p *eosPipeline) runWithKills(in *kgo.Client, n int, kills []string) {
	p.t.Helper()
	const chunks = 20
	produced := make(chan error, 1)
	go func() {
		for k := range chunks {
			for p.progress() < int64((k-2)*n/chunks) {
				select {
				case <-time.After(20 * time.Millisecond):
				case <-p.stop:
					produced <- nil
					return
				}
			}
			recs := make([]*kgo.Record, 0, n/chunks)
			for i := k * n / chunks; i < (k+1)*n/chunks; i++ {
				v := eosValue(i)
				recs = append(recs, &kgo.Record{Topic: p.in, Key: []byte(v), Value: []byte(v)})
			}
			if err := in.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
				produced <- err
				return
			}
		}
		produced <- nil
	}()
	for i, name := range kills {
		share := int64((i + 1) * n / (len(kills) + 2))
		testutil.WaitFor(p.t, 90*time.Second, func() bool { return p.progress() >= share }, fmt.Sprintf("the pipeline commits %d records", share))
		p.mu.Lock()
		w := p.workers[name]
		p.mu.Unlock()
		p.kill(w)
		p.start(name)
	}
	if err := <-produced; err != nil {
		p.t.Fatalf("producing the input: %v", err)
	}
}

// TestExactlyOncePipelineSurvivesKills: a consume-transform-produce pipeline of three
// processes (franz-go's GroupTransactSession), its members killed with kill -9 in the
// middle of the stream and restarted, writes every input record to its output exactly
// once as read_committed consumers see it.
func TestExactlyOncePipelineSurvivesKills(t *testing.T) {
	b := testutil.StartBroker(t, eosBrokerOverrides...)
	adm := newAdmin(t, b)
	p := newPipeline(t, b.Addr, "eos")
	createTopic(t, adm, p.in, 4, nil)
	createTopic(t, adm, p.out, 4, nil)
	const n = 6000
	for _, name := range []string{"a", "b", "c"} {
		p.start(name)
	}
	p.runWithKills(newClient(t, b), n, []string{"b", "c", "b", "a"})
	p.waitCaughtUp(adm, 90*time.Second)
	p.stopAll()
	checkExactlyOnce(t, b, p.out, n)
}
