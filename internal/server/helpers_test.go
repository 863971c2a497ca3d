package server

import (
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-streaming/samsa/internal/protocol"
)

// testDeadline bounds every wait in these tests.
const testDeadline = 10 * time.Second

// handlerFunc adapts a function to protocol.Handler.
type handlerFunc func(req *protocol.Request) <-chan protocol.Response

func (f handlerFunc) Handle(req *protocol.Request) <-chan protocol.Response { return f(req) }

// servedVersions serves ApiVersions 0..4, Heartbeat 0..4 and Metadata 0..12; every
// other key (known to kmsg or not) is not served.
func servedVersions(key int16) (int16, int16, bool) {
	switch key {
	case apiVersionsKey:
		return 0, 4, true
	case 12:
		return 0, 4, true
	case 3:
		return 0, 12, true
	}
	return 0, 0, false
}

func servedAPIKeys() []kmsg.ApiVersionsResponseApiKey {
	var keys []kmsg.ApiVersionsResponseApiKey
	for _, k := range []int16{3, 12, apiVersionsKey} {
		lo, hi, _ := servedVersions(k)
		keys = append(keys, kmsg.ApiVersionsResponseApiKey{ApiKey: k, MinVersion: lo, MaxVersion: hi})
	}
	return keys
}

// apiVersionsHandler answers ApiVersions with servedAPIKeys and passes every other
// request to next (or panics the test's expectations if next is nil).
func apiVersionsHandler(next handlerFunc) handlerFunc {
	return func(req *protocol.Request) <-chan protocol.Response {
		if req.Key == apiVersionsKey {
			return protocol.Ready(protocol.Response{Body: &kmsg.ApiVersionsResponse{ApiKeys: servedAPIKeys()}})
		}
		return next(req)
	}
}

// testLogger writes server logs through t.Log.
func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) { w.t.Helper(); w.t.Log(string(p)); return len(p), nil }

// startServer starts a server on 127.0.0.1:0 with the given handler; mutate adjusts
// the config before New.
func startServer(t *testing.T, h protocol.Handler, mutate func(*Config)) (*Server, string) {
	t.Helper()
	cfg := Config{
		Listeners: Listen("127.0.0.1:0"),
		Handler:   h,
		Versions:  servedVersions,
		APIKeys:   servedAPIKeys,
		Logger:    testLogger(t),
	}
	if mutate != nil {
		mutate(&cfg)
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if err := s.Start(); err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s, s.Addrs()[0].String()
}

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, testDeadline)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	t.Cleanup(func() { c.Close() })
	if err := c.SetDeadline(time.Now().Add(testDeadline)); err != nil {
		t.Fatal(err)
	}
	return c
}

// encodeRequest builds a framed request (size prefix included) for body at version.
func encodeRequest(body kmsg.Request, version int16, correlationID int32, clientID string) []byte {
	body.SetVersion(version)
	b := []byte{0, 0, 0, 0}
	b = binary.BigEndian.AppendUint16(b, uint16(body.Key()))
	b = binary.BigEndian.AppendUint16(b, uint16(version))
	b = binary.BigEndian.AppendUint32(b, uint32(correlationID))
	b = binary.BigEndian.AppendUint16(b, uint16(len(clientID)))
	b = append(b, clientID...)
	if body.IsFlexible() {
		b = append(b, 0)
	}
	b = body.AppendTo(b)
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	return b
}

func send(t *testing.T, c net.Conn, frame []byte) {
	t.Helper()
	if _, err := c.Write(frame); err != nil {
		t.Fatalf("write: %v", err)
	}
}

// readFrame reads one response frame and returns its correlation id and the rest.
func readFrame(t *testing.T, c net.Conn) (int32, []byte) {
	t.Helper()
	var size [4]byte
	if _, err := io.ReadFull(c, size[:]); err != nil {
		t.Fatalf("read response size: %v", err)
	}
	frame := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(c, frame); err != nil {
		t.Fatalf("read response frame: %v", err)
	}
	if len(frame) < 4 {
		t.Fatalf("response frame of %d bytes", len(frame))
	}
	return int32(binary.BigEndian.Uint32(frame)), frame[4:]
}

// readResponse reads one response and decodes it into resp at version; flexible says
// whether the response header carries a tag buffer.
func readResponse(t *testing.T, c net.Conn, resp kmsg.Response, version int16, flexibleHeader bool) int32 {
	t.Helper()
	corr, rest := readFrame(t, c)
	if flexibleHeader {
		if len(rest) == 0 || rest[0] != 0 {
			t.Fatalf("expected an empty response header tag buffer, got %x", rest[:min(len(rest), 8)])
		}
		rest = rest[1:]
	}
	resp.SetVersion(version)
	if err := resp.ReadFrom(rest); err != nil {
		t.Fatalf("decode %T v%d: %v", resp, version, err)
	}
	return corr
}

// expectClosed waits (bounded) for the server to close c without sending anything: a
// read ends in EOF or a connection reset rather than data or a timeout.
func expectClosed(t *testing.T, c net.Conn) {
	t.Helper()
	if got := readUntilClosed(t, c); len(got) != 0 {
		t.Fatalf("expected the server to close the connection, read %d bytes: %x", len(got), got)
	}
}

// expectTLSClosed is expectClosed for a TLS listener, whose TLS stack may answer
// garbage with one alert record (content type 21, two bytes of alert) before it closes.
func expectTLSClosed(t *testing.T, c net.Conn) {
	t.Helper()
	if got := readUntilClosed(t, c); len(got) != 0 && (len(got) != 7 || got[0] != 21) {
		t.Fatalf("expected the server to close the connection, at most after a TLS alert; read %d bytes: %x", len(got), got)
	}
}

// readUntilClosed reads c until the server closes it (EOF, a reset or any other read
// error) and returns what it read; a connection still open after testDeadline fails
// the test.
func readUntilClosed(t *testing.T, c net.Conn) []byte {
	t.Helper()
	if err := c.SetReadDeadline(time.Now().Add(testDeadline)); err != nil {
		t.Fatal(err)
	}
	var got []byte
	buf := make([]byte, 1024)
	for {
		n, err := c.Read(buf)
		got = append(got, buf[:n]...)
		if err == nil {
			continue
		}
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatalf("connection still open after %s (read %x)", testDeadline, got)
		}
		return got
	}
}

// waitFor polls cond until it holds or the test deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(testDeadline)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// roundTripApiVersions checks that a fresh connection to addr gets a correct
// ApiVersions v3 answer.
func roundTripApiVersions(t *testing.T, addr string) {
	t.Helper()
	c := dial(t, addr)
	send(t, c, encodeRequest(&kmsg.ApiVersionsRequest{ClientSoftwareName: "test", ClientSoftwareVersion: "1"}, 3, 77, "probe"))
	var resp kmsg.ApiVersionsResponse
	if corr := readResponse(t, c, &resp, 3, false); corr != 77 {
		t.Fatalf("correlation id %d, want 77", corr)
	}
	if resp.ErrorCode != 0 || len(resp.ApiKeys) != len(servedAPIKeys()) {
		t.Fatalf("ApiVersions response: error %d, %d keys", resp.ErrorCode, len(resp.ApiKeys))
	}
}

// recorder records handled requests, safe for concurrent use.
type recorder struct {
	mu   sync.Mutex
	reqs []*protocol.Request
}

func (r *recorder) add(req *protocol.Request) {
	r.mu.Lock()
	r.reqs = append(r.reqs, req)
	r.mu.Unlock()
}

func (r *recorder) len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.reqs)
}
