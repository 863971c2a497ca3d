package console

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/samsa-streaming/samsa/internal/testutil"
)

// testCommand runs `samsa console` as a user would: it logs its URL, GET / answers
// 200 text/html with "Samsa" in the title, and SIGTERM stops it with exit code 0.
func testCommand(t *testing.T, broker *testutil.Broker) {
	p := startCommand(t, nil, "-b", broker.Addr)
	resp, err := http.Get(p.url)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
		t.Errorf("GET %s: %d %s", p.url, resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	if !regexp.MustCompile(`<title>[^<]*Samsa[^<]*</title>`).Match(body) {
		t.Errorf("the title does not contain Samsa:\n%.300s", body)
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.exited:
		if p.exitErr != nil {
			t.Errorf("samsa console after SIGTERM: %v", p.exitErr)
		}
	case <-time.After(15 * time.Second):
		t.Error("samsa console did not stop within 15s of SIGTERM")
	}
}

// consoleProcess is a running `samsa console`.
type consoleProcess struct {
	cmd     *exec.Cmd
	url     string        // what it logged it serves
	exited  chan struct{} // closed when it exited and its stderr was read to the end
	exitErr error         // cmd.Wait's, once exited is closed
}

// startCommand starts `samsa console --listen 127.0.0.1:0 args...` with env added to
// the test's environment and waits for the URL it logs. The end of the test kills it.
func startCommand(t *testing.T, env []string, args ...string) *consoleProcess {
	t.Helper()
	cmd := exec.Command(testutil.SamsaBinary(t), append([]string{"console", "--listen", "127.0.0.1:0"}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &consoleProcess{cmd: cmd, exited: make(chan struct{})}
	urls := make(chan string, 1)
	go func() {
		re := regexp.MustCompile(`url=(http://\S+)`)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			t.Log(sc.Text())
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				urls <- m[1]
			}
		}
		p.exitErr = cmd.Wait() // after the last read, as exec.Cmd requires
		close(p.exited)
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		select {
		case <-p.exited:
		case <-time.After(15 * time.Second):
			t.Error("samsa console did not exit within 15s of SIGKILL")
		}
	})
	select {
	case p.url = <-urls:
		return p
	case <-p.exited:
		t.Fatalf("samsa console exited before it logged its url: %v", p.exitErr)
	case <-time.After(30 * time.Second):
		t.Fatal("samsa console logged no url within 30s")
	}
	return nil
}

func TestCommandRefusesBadSettings(t *testing.T) {
	out, err := exec.Command(testutil.SamsaBinary(t), "console", "-b", "nohost", "--listen", "8080").CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("exit %v, want 1:\n%s", err, out)
	}
	for _, want := range []string{`brokers: "nohost" is not host:port`, `listen: "8080" is not host:port`} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// TestServeConsoleListener: `samsa serve` with console.listener set serves the
// console for its own cluster.
func TestServeConsoleListener(t *testing.T) {
	addr := fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t))
	testutil.StartBroker(t, "console.listener="+addr, "console.allowed.hosts=console.example")
	get := func(host string) (int, string) {
		req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/", nil)
		req.Host = host
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp.StatusCode, string(body)
	}
	for _, host := range []string{addr, "console.example"} {
		if status, body := get(host); status != http.StatusOK || !strings.Contains(body, `data-testid="broker-count">1<`) {
			t.Errorf("GET / of the console in samsa serve, Host %s: %d\n%.500s", host, status, body)
		}
	}
	if status, _ := get("evil.example"); status != http.StatusMisdirectedRequest {
		t.Errorf("GET / with Host evil.example (not in console.allowed.hosts): %d, want 421", status)
	}
}
