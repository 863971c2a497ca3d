package bench

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// childEnv marks a process started by startNullProcess. The samsa binary ignores it;
// the bench package's test binary, which cannot run `samsa bench`, uses it to act as
// one (see TestMain).
const childEnv = "SAMSA_BENCH_CHILD"

// startNullProcess runs the null broker in a process of its own — this binary's
// `bench null-broker`, on a free loopback port — as the broker under test runs in
// its own process: the client then pays the same cost of talking to another process
// (context switches, a second Go runtime) against both, and the ratio between them
// is the broker's own work. The returned stop ends the process.
func startNullProcess(opts nullOptions) (addr string, stop func(), err error) {
	exe, err := os.Executable()
	if err != nil {
		return "", nil, fmt.Errorf("bench: null broker process: %w", err)
	}
	args := []string{"bench", "null-broker", "--listen", "127.0.0.1:0",
		"--partitions", fmt.Sprint(max(opts.partitions, 1))}
	if opts.recordSize > 0 {
		args = append(args, "--record-size", fmt.Sprint(opts.recordSize))
	}
	if opts.batchBytes > 0 {
		args = append(args, "--batch-bytes", fmt.Sprint(opts.batchBytes))
	}
	cmd := exec.Command(exe, args...)
	cmd.Env = append(os.Environ(), childEnv+"=1")
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return "", nil, err
	}
	if err := cmd.Start(); err != nil {
		return "", nil, fmt.Errorf("bench: starting the null broker process: %w", err)
	}
	stop = func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	}
	const ready = "null broker listening on "
	line, err := bufio.NewReader(out).ReadString('\n')
	if !strings.HasPrefix(line, ready) {
		stop()
		return "", nil, fmt.Errorf("bench: the null broker process did not start (printed %q): %v", line, err)
	}
	return strings.TrimSpace(strings.TrimPrefix(line, ready)), stop, nil
}
