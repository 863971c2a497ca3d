package broker

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-streaming/samsa/internal/protocol"
)

// lockedBuffer is a bytes.Buffer for a logger written from another goroutine.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// TestAnswerLaterPanic: a handler's goroutine that panics closes its answer channel —
// the server then closes the connection — and logs the panic with the request, and
// the process goes on.
func TestAnswerLaterPanic(t *testing.T) {
	var logged lockedBuffer
	b := &Broker{logger: slog.New(slog.NewTextHandler(&logged, nil))}
	req := &protocol.Request{Key: int16(kmsg.Fetch), Version: 17, ClientAddr: "127.0.0.1:5000"}
	out := make(chan protocol.Response, 1)
	b.answerLater(req, out, func() {
		var parts []int
		_ = parts[len(req.ClientAddr)] // index out of range
	})
	select {
	case resp, ok := <-out:
		if ok {
			t.Fatalf("answer %+v after a panic, want the channel closed", resp)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no answer after the handler's goroutine panicked")
	}
	for _, want := range []string{"request handler panicked", "api_key=1", "version=17", "client=127.0.0.1:5000", "index out of range", "registry_test.go"} {
		if !strings.Contains(logged.String(), want) {
			t.Fatalf("log %q lacks %q", logged.String(), want)
		}
	}
}
