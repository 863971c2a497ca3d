package console

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net/http"
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
	cmd := exec.Command(testutil.SamsaBinary(t), "console", "-b", broker.Addr, "--listen", "127.0.0.1:0")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
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
	}()
	var url string
	select {
	case url = <-urls:
	case <-time.After(30 * time.Second):
		t.Fatal("samsa console logged no url within 30s")
	}
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
		t.Errorf("GET %s: %d %s", url, resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	if !regexp.MustCompile(`<title>[^<]*Samsa[^<]*</title>`).Match(body) {
		t.Errorf("the title does not contain Samsa:\n%.300s", body)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("samsa console after SIGTERM: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Error("samsa console did not stop within 15s of SIGTERM")
	}
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
	testutil.StartBroker(t, "console.listener="+addr)
	resp, err := http.Get("http://" + addr + "/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `data-testid="broker-count">1<`) {
		t.Errorf("GET / of the console in samsa serve: %d\n%.500s", resp.StatusCode, body)
	}
}
