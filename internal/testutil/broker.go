// Package testutil starts real `samsa serve` processes for integration tests and offers
// small helpers: WaitFor, so tests wait for conditions instead of sleeping, and Words,
// compressible test data. StartBroker starts one node; StartCluster (cluster.go)
// starts several as one cluster, each node controllable (kill -9, SIGSTOP/SIGCONT,
// SIGTERM, restart), and Proxy (proxy.go) is a fault-injecting TCP proxy a Cluster
// puts on the links to its controllers and in front of its brokers' replication
// listeners so that tests can cut them. EOSPipeline (eos.go) runs the exactly-once
// consume-transform-produce workers (internal/testutil/eosworker) as processes the
// transaction tests kill.
//
// The samsa binary is built once per test process (go build ./cmd/samsa) into a
// temporary directory.
package testutil

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// RepoRoot returns the repository root (the directory holding go.mod).
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// SamsaBinary builds ./cmd/samsa once per test process and returns the binary's path.
// Under `go test -race` the binary is built with the race detector as well.
func SamsaBinary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		// One binary per test process, named by its pid; binaries of processes that
		// have exited are removed here, since a test process has no exit hook.
		dir := filepath.Join(os.TempDir(), "samsa-test-bins")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			buildErr = err
			return
		}
		removeStaleBinaries(dir)
		binPath = filepath.Join(dir, fmt.Sprintf("samsa-%d", os.Getpid()))
		args := []string{"build", "-o", binPath}
		if raceEnabled {
			args = append(args, "-race")
		}
		cmd := exec.Command("go", append(args, "./cmd/samsa")...)
		cmd.Dir = RepoRoot()
		out, err := cmd.CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build ./cmd/samsa: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

var builtAt struct {
	sync.Mutex
	bins map[string]string // commit → binary
}

// BuildSamsaAt builds ./cmd/samsa as it was at commit of this repository (git
// archive of that commit, then go build: its modules must be in the module cache or
// the module proxy), once per test process, and returns the binary's path. The
// test is skipped, saying so, in a clone without the commit (a shallow one).
func BuildSamsaAt(t testing.TB, commit string) string {
	t.Helper()
	builtAt.Lock()
	defer builtAt.Unlock()
	if bin, ok := builtAt.bins[commit]; ok {
		return bin
	}
	dir := filepath.Join(os.TempDir(), "samsa-test-bins")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	src, err := os.MkdirTemp("", "samsa-at-"+commit[:min(len(commit), 12)])
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(src)
	if err := exec.Command("git", "-C", RepoRoot(), "cat-file", "-e", commit+"^{commit}").Run(); err != nil {
		// A shallow clone, or a tree exported without its history: the build to
		// compare with is not here, and nothing can fetch it.
		t.Skipf("commit %s is not in this clone (git cat-file: %v): a test against an older build needs a clone with its history", commit, err)
	}
	archive := exec.Command("bash", "-c", `set -o pipefail; git -C "$1" archive --format=tar "$2" | tar -x -C "$3"`, "bash", RepoRoot(), commit, src)
	if out, err := archive.CombinedOutput(); err != nil {
		t.Fatalf("the tree of commit %s: %v\n%s", commit, err, out)
	}
	bin := filepath.Join(dir, fmt.Sprintf("samsa-%d-%s", os.Getpid(), commit[:min(len(commit), 12)]))
	build := exec.Command("go", "build", "-o", bin, "./cmd/samsa")
	build.Dir = src
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/samsa at %s: %v\n%s", commit, err, out)
	}
	if builtAt.bins == nil {
		builtAt.bins = map[string]string{}
	}
	builtAt.bins[commit] = bin
	return bin
}

// removeStaleBinaries deletes test binaries whose process is gone.
func removeStaleBinaries(dir string) {
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		var pid int
		if _, err := fmt.Sscanf(e.Name(), "samsa-%d", &pid); err != nil {
			continue
		}
		if syscall.Kill(pid, 0) == syscall.ESRCH {
			os.Remove(filepath.Join(dir, e.Name()))
		}
	}
}

// Broker is a running `samsa serve` process.
type Broker struct {
	Addr      string // host:port of the PLAINTEXT listener
	Dir       string // log.dirs
	Overrides []string
	// Args are extra `samsa serve` arguments (such as --add-scram).
	Args []string

	t      testing.TB
	bin    string
	mu     sync.Mutex
	cmd    *exec.Cmd
	done   chan struct{}
	logBuf *lockedBuffer
	// earlier holds the logs of the process's earlier runs (before restarts).
	earlier []*lockedBuffer
}

// FreePort returns a port on 127.0.0.1 that was free a moment ago.
func FreePort(t testing.TB) int {
	t.Helper()
	return FreePorts(t, 1)[0]
}

// FreePorts returns n different ports on 127.0.0.1 that were free a moment ago (each
// held until all are chosen, so that none is handed out twice) and that no earlier
// call handed out in this process (see freshListener).
func FreePorts(t testing.TB, n int) []int {
	t.Helper()
	ports := make([]int, n)
	for i := range ports {
		l, err := freshListener()
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		ports[i] = l.Addr().(*net.TCPAddr).Port
	}
	return ports
}

// freshListener listens on a port of 127.0.0.1 the kernel chooses, and that no
// listener, FreePorts or clusterPort of this process had before. A node of a finished
// test's cluster may still run, or another node still send to it, for a moment: a new
// node on its port would take that traffic for its own (one that has not learnt its
// cluster id yet cannot tell another cluster's Raft messages from its own).
func freshListener() (net.Listener, error) {
	handedOut.Lock()
	defer handedOut.Unlock()
	var taken []net.Listener // held, so that the kernel offers another port next
	defer func() {
		for _, l := range taken {
			l.Close()
		}
	}()
	for {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		port := l.Addr().(*net.TCPAddr).Port
		if !handedOut.ports[port] {
			handedOut.ports[port] = true
			return l, nil
		}
		taken = append(taken, l)
	}
}

// handedOut is every port this process's tests were given.
var handedOut = struct {
	sync.Mutex
	ports map[int]bool
}{ports: map[int]bool{}}

// StartBroker starts `samsa serve` on a free port with data in a fresh temporary
// directory, waits until it logs that it is ready, and stops it when the test ends.
// overrides are extra `key=value` properties.
func StartBroker(t testing.TB, overrides ...string) *Broker {
	t.Helper()
	return StartBrokerArgs(t, nil, overrides...)
}

// StartBrokerArgs is StartBroker with extra `samsa serve` arguments.
func StartBrokerArgs(t testing.TB, args []string, overrides ...string) *Broker {
	t.Helper()
	b := &Broker{
		Dir:       t.TempDir(),
		Overrides: overrides,
		Args:      args,
		t:         t,
		bin:       SamsaBinary(t),
	}
	b.startOnFreePort(t, 0, nil)
	return b
}

// startOnFreePort starts b on a free port for its PLAINTEXT listener and extra more
// for other listeners (prepare, if set, adjusts b once b.Addr and the extra ports are
// chosen), retrying with new ports when another test took one, and stops it when the
// test ends.
func (b *Broker) startOnFreePort(t testing.TB, extra int, prepare func(extra []int)) {
	t.Helper()
	// A free port can be taken by another test between the check and the bind: try a
	// few before giving up.
	for attempt := 1; ; attempt++ {
		ports := FreePorts(t, 1+extra)
		b.Addr = fmt.Sprintf("127.0.0.1:%d", ports[0])
		if prepare != nil {
			prepare(ports[1:])
		}
		err := b.tryStart()
		if err == nil {
			break
		}
		if attempt == 3 || !strings.Contains(err.Error(), "address already in use") {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		b.Stop()
		if log := b.FullLog(); strings.Contains(log, "WARNING: DATA RACE") {
			t.Errorf("the broker reported a data race:\n%s", log)
		}
	})
}

func (b *Broker) args() []string {
	args := []string{"serve", "--override", "log.dirs=" + b.Dir}
	if b.Addr != "" {
		args = append(args, "--override", "listeners=PLAINTEXT://"+b.Addr)
	}
	for _, o := range b.Overrides {
		args = append(args, "--override", o)
	}
	return append(args, b.Args...)
}

func (b *Broker) start(t testing.TB) {
	t.Helper()
	if err := b.tryStart(); err != nil {
		t.Fatal(err)
	}
}

// tryStart starts the process and waits until it is ready.
func (b *Broker) tryStart() error {
	cmd := exec.Command(b.bin, b.args()...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return err
	}
	cmd.Stdout = io.Discard
	if err := cmd.Start(); err != nil {
		return err
	}
	ready := make(chan struct{})
	done := make(chan struct{})
	buf := &lockedBuffer{}
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64*1024), 1024*1024)
		signalled := false
		for sc.Scan() {
			line := sc.Text()
			buf.add(line)
			if !signalled && strings.Contains(line, `msg="samsa ready"`) {
				signalled = true
				close(ready)
			}
		}
		_ = cmd.Wait()
		close(done)
	}()
	b.mu.Lock()
	if b.logBuf != nil {
		b.earlier = append(b.earlier, b.logBuf)
	}
	b.cmd, b.done, b.logBuf = cmd, done, buf
	b.mu.Unlock()
	select {
	case <-ready:
		return nil
	case <-done:
		return fmt.Errorf("samsa serve exited before it was ready:\n%s", buf.String())
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		return fmt.Errorf("samsa serve not ready within 30s:\n%s", buf.String())
	}
}

// Pid returns the broker process's id (0 when it is not running), for benchmarks
// that read its CPU time.
func (b *Broker) Pid() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.cmd == nil || b.cmd.Process == nil {
		return 0
	}
	return b.cmd.Process.Pid
}

// Exited reports whether the process has ended by itself or been stopped, and how
// (nil for exit code 0).
func (b *Broker) Exited() (bool, error) {
	b.mu.Lock()
	cmd, done := b.cmd, b.done
	b.mu.Unlock()
	if cmd == nil {
		return false, nil
	}
	select {
	case <-done:
		return true, exitErr(cmd)
	default:
		return false, nil
	}
}

// Log returns everything the broker has written to stderr so far.
func (b *Broker) Log() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.logBuf == nil {
		return ""
	}
	return b.logBuf.String()
}

// FullLog returns what every run of the process wrote to stderr, the earlier runs
// (before restarts) first, each run after a line naming it.
func (b *Broker) FullLog() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var sb strings.Builder
	for i, l := range append(append([]*lockedBuffer(nil), b.earlier...), b.logBuf) {
		if l == nil {
			continue
		}
		fmt.Fprintf(&sb, "=== run %d of the process\n%s", i+1, l.String())
	}
	return sb.String()
}

// Stop sends SIGTERM and waits for the process to exit (it is killed after 15 s).
// It returns the exit error, if any.
func (b *Broker) Stop() error {
	return b.signal(syscall.SIGTERM, 15*time.Second)
}

// Kill sends SIGKILL and waits for the process to exit.
func (b *Broker) Kill() {
	_ = b.signal(syscall.SIGKILL, 10*time.Second)
}

// Pause and Resume stop and continue the process (SIGSTOP/SIGCONT).
func (b *Broker) Pause()  { b.sendSignal(syscall.SIGSTOP) }
func (b *Broker) Resume() { b.sendSignal(syscall.SIGCONT) }

func (b *Broker) sendSignal(sig os.Signal) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.cmd != nil {
		_ = b.cmd.Process.Signal(sig)
	}
}

func (b *Broker) signal(sig os.Signal, grace time.Duration) error {
	b.mu.Lock()
	cmd, done := b.cmd, b.done
	b.mu.Unlock()
	if cmd == nil {
		return nil
	}
	select {
	case <-done:
		return exitErr(cmd)
	default:
	}
	_ = cmd.Process.Signal(sig)
	select {
	case <-done:
	case <-time.After(grace):
		_ = cmd.Process.Kill()
		<-done
		return fmt.Errorf("samsa serve did not exit within %v of %v", grace, sig)
	}
	return exitErr(cmd)
}

func exitErr(cmd *exec.Cmd) error {
	if cmd.ProcessState != nil && !cmd.ProcessState.Success() {
		return fmt.Errorf("samsa serve exited: %v", cmd.ProcessState)
	}
	return nil
}

// Restart stops the broker cleanly (if running) and starts it again on the same
// address and data directory.
func (b *Broker) Restart(t testing.TB) {
	t.Helper()
	if err := b.Stop(); err != nil {
		t.Fatalf("stop before restart: %v\n%s", err, b.Log())
	}
	b.start(t)
}

// StartAgain starts a stopped or killed broker on the same address and data.
func (b *Broker) StartAgain(t testing.TB) {
	t.Helper()
	b.start(t)
}

// TryStartAgain is StartAgain returning the error (with the process's output when it
// exited before it was ready) instead of failing the test.
func (b *Broker) TryStartAgain() error { return b.tryStart() }

// WaitFor polls cond until it is true or the timeout passes, then fails the test.
func WaitFor(t testing.TB, timeout time.Duration, cond func() bool, msg string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		if cond() {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for: %s", timeout, msg)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

type lockedBuffer struct {
	mu    sync.Mutex
	lines []string
}

func (l *lockedBuffer) add(s string) {
	l.mu.Lock()
	l.lines = append(l.lines, s)
	l.mu.Unlock()
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}
