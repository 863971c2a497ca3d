package server

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-streaming/samsa/internal/protocol"
)

func TestConfigValidation(t *testing.T) {
	h := handlerFunc(func(*protocol.Request) <-chan protocol.Response { return nil })
	valid := Config{Listeners: Listen("127.0.0.1:0"), Handler: h, Versions: servedVersions}
	tests := []struct {
		name    string
		mutate  func(*Config)
		wantErr []string
	}{
		{name: "valid with defaults", mutate: func(*Config) {}},
		{name: "no listeners", mutate: func(c *Config) { c.Listeners = nil }, wantErr: []string{"listeners"}},
		{
			name: "every problem reported at once",
			mutate: func(c *Config) {
				c.MaxRequestSize = -1
				c.Handler = nil
				c.Versions = nil
				c.MaxInflightPerConn = -5
				c.IdleTimeout = -time.Second
			},
			wantErr: []string{"socket.request.max.bytes", "handler", "versions", "in-flight", "connections.max.idle.ms"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := valid
			tc.mutate(&cfg)
			s, err := New(cfg)
			if len(tc.wantErr) == 0 {
				if err != nil {
					t.Fatalf("New: %v", err)
				}
				if s.cfg.MaxRequestSize != DefaultMaxRequestSize || s.cfg.MaxInflightPerConn != DefaultMaxInflightPerConn || s.cfg.IdleTimeout != DefaultIdleTimeout {
					t.Fatalf("defaults not applied: %+v", s.cfg)
				}
				return
			}
			if !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("New error %v, want ErrInvalidConfig", err)
			}
			for _, want := range tc.wantErr {
				if !bytes.Contains([]byte(err.Error()), []byte(want)) {
					t.Errorf("error %q does not mention %q", err, want)
				}
			}
		})
	}
}

// TestApiVersionsRoundTripKgo drives the server with franz-go's client: its own
// ApiVersions handshake (first at a version above the served range, answered by the
// v0 fallback, then retried: flexible request header, non-flexible response header)
// and an explicit ApiVersions request must work.
func TestApiVersionsRoundTripKgo(t *testing.T) {
	var rec recorder
	_, addr := startServer(t, handlerFunc(func(req *protocol.Request) <-chan protocol.Response {
		rec.add(req)
		return protocol.Ready(protocol.Response{Body: &kmsg.ApiVersionsResponse{ApiKeys: servedAPIKeys()}})
	}), nil)

	client, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ClientID("samsa-test"))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	ctx, cancel := context.WithTimeout(context.Background(), testDeadline)
	defer cancel()
	resp, err := client.Request(ctx, kmsg.NewPtrApiVersionsRequest())
	if err != nil {
		t.Fatalf("ApiVersions through kgo: %v", err)
	}
	got := resp.(*kmsg.ApiVersionsResponse)
	if got.ErrorCode != 0 || len(got.ApiKeys) != 3 {
		t.Fatalf("ApiVersions: error %d, keys %+v", got.ErrorCode, got.ApiKeys)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	// kgo opens with an ApiVersions version newer than served (the v0 fallback makes
	// it retry with a served one), so the handler sees served versions only.
	if len(rec.reqs) == 0 {
		t.Fatal("handler saw no request")
	}
	for _, r := range rec.reqs {
		if r.Key != apiVersionsKey || r.ClientID != "samsa-test" || r.Body.GetVersion() != r.Version || r.ClientAddr == "" {
			t.Errorf("request decoded as %+v", r)
		}
	}
}

// TestApiVersionsRawVersions covers each served ApiVersions version over a raw socket.
func TestApiVersionsRawVersions(t *testing.T) {
	_, addr := startServer(t, apiVersionsHandler(nil), nil)
	c := dial(t, addr)
	for v := int16(0); v <= 4; v++ {
		send(t, c, encodeRequest(kmsg.NewPtrApiVersionsRequest(), v, int32(100+v), "raw"))
		var resp kmsg.ApiVersionsResponse
		if corr := readResponse(t, c, &resp, v, false); corr != int32(100+v) {
			t.Fatalf("v%d: correlation id %d", v, corr)
		}
		if resp.ErrorCode != 0 || len(resp.ApiKeys) != 3 {
			t.Fatalf("v%d: %+v", v, resp)
		}
	}
}

// heartbeatReplyLater is a handler that answers Heartbeat requests only when release
// is called (at once for the generations in ready), with ErrorCode = the request's
// generation, so tests can check which response is which.
type heartbeatReplyLater struct {
	mu      sync.Mutex
	pending map[int32]chan protocol.Response // by generation
	order   []int32                          // generations in Handle order
	none    map[int32]bool                   // generations answered with None
	ready   map[int32]bool                   // generations answered within Handle
}

func newHeartbeatReplyLater() *heartbeatReplyLater {
	return &heartbeatReplyLater{pending: map[int32]chan protocol.Response{}, none: map[int32]bool{}, ready: map[int32]bool{}}
}

func (h *heartbeatReplyLater) Handle(req *protocol.Request) <-chan protocol.Response {
	hb := req.Body.(*kmsg.HeartbeatRequest)
	ch := make(chan protocol.Response, 1)
	h.mu.Lock()
	h.pending[hb.Generation] = ch
	h.order = append(h.order, hb.Generation)
	ready := h.ready[hb.Generation]
	h.mu.Unlock()
	if ready {
		h.release(hb.Generation)
	}
	return ch
}

func (h *heartbeatReplyLater) handled() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.order)
}

// release answers generation gen (once: a second call does nothing).
func (h *heartbeatReplyLater) release(gen int32) {
	h.mu.Lock()
	ch, none := h.pending[gen], h.none[gen]
	delete(h.pending, gen)
	h.mu.Unlock()
	if ch == nil {
		return
	}
	if none {
		ch <- protocol.Response{None: true}
		return
	}
	ch <- protocol.Response{Body: &kmsg.HeartbeatResponse{ErrorCode: int16(gen)}}
}

// TestPipelinedResponsesInOrder sends many requests without waiting, has the handler
// complete them in reverse, and expects responses in request order, with the None
// responses (acks=0 style) silently skipped. Responses ready within Handle (which the
// reader writes itself when nothing waits before them) must still wait behind earlier
// ones that are not.
func TestPipelinedResponsesInOrder(t *testing.T) {
	tests := []struct {
		name  string
		none  []int32 // generations answered with Response.None
		ready []int32 // generations answered within Handle
	}{
		{name: "all answered"},
		{name: "none responses keep order", none: []int32{1, 4, 9}},
		{name: "ready responses wait behind pending ones", ready: []int32{0, 2, 3, 7, 9}},
		{name: "ready and none responses", none: []int32{0, 5}, ready: []int32{0, 1, 5, 6, 8}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHeartbeatReplyLater()
			for _, g := range tc.none {
				h.none[g] = true
			}
			for _, g := range tc.ready {
				h.ready[g] = true
			}
			var observed atomic.Int64
			_, addr := startServer(t, h, func(c *Config) { c.Observer = observerFunc(func() { observed.Add(1) }) })
			c := dial(t, addr)
			const n = 10
			var frames []byte
			for g := int32(0); g < n; g++ {
				version := int16(g % 5) // mix flexible (v4) and non-flexible headers
				frames = append(frames, encodeRequest(&kmsg.HeartbeatRequest{Group: "g", Generation: g, MemberID: "m"}, version, 1000+g, "pipe")...)
			}
			send(t, c, frames) // all at once: one write, many frames
			waitFor(t, "all requests handled", func() bool { return h.handled() == n })
			h.mu.Lock()
			for i, g := range h.order {
				if g != int32(i) {
					t.Fatalf("Handle order %v, want arrival order", h.order)
				}
			}
			h.mu.Unlock()
			for g := int32(n - 1); g >= 0; g-- {
				h.release(g)
			}
			for g := int32(0); g < n; g++ {
				if h.none[g] {
					continue
				}
				version := int16(g % 5)
				var resp kmsg.HeartbeatResponse
				corr := readResponse(t, c, &resp, version, version >= 4)
				if corr != 1000+g || resp.ErrorCode != int16(g) {
					t.Fatalf("response %d: correlation id %d error code %d", g, corr, resp.ErrorCode)
				}
			}
			// The connection still works after the None responses.
			send(t, c, encodeRequest(&kmsg.HeartbeatRequest{Group: "g", Generation: 99}, 4, 5000, "pipe"))
			waitFor(t, "follow-up request handled", func() bool { return h.handled() == n+1 })
			h.release(99)
			var resp kmsg.HeartbeatResponse
			if corr := readResponse(t, c, &resp, 4, true); corr != 5000 || resp.ErrorCode != 99 {
				t.Fatalf("follow-up: correlation id %d error %d", corr, resp.ErrorCode)
			}
			waitFor(t, "observer called for every request", func() bool { return observed.Load() == n+1 })
		})
	}
}

type observerFunc func()

func (f observerFunc) RequestDone(int16, int16, time.Duration, int, int) { f() }

// TestInflightBoundStillAnswersAll uses a pipelining depth smaller than the number of
// requests sent: the reader must pause and resume, answering all in order.
func TestInflightBoundStillAnswersAll(t *testing.T) {
	h := newHeartbeatReplyLater()
	_, addr := startServer(t, h, func(c *Config) { c.MaxInflightPerConn = 2 })
	c := dial(t, addr)
	const n = 8
	for g := int32(0); g < n; g++ {
		send(t, c, encodeRequest(&kmsg.HeartbeatRequest{Group: "g", Generation: g}, 4, g, ""))
	}
	for g := int32(0); g < n; g++ {
		waitFor(t, fmt.Sprintf("request %d handled", g), func() bool { return h.handled() > int(g) })
		h.release(g)
		var resp kmsg.HeartbeatResponse
		if corr := readResponse(t, c, &resp, 4, true); corr != g || resp.ErrorCode != int16(g) {
			t.Fatalf("response %d: correlation id %d error %d", g, corr, resp.ErrorCode)
		}
	}
}

// TestBadInputClosesOnlyThatConnection sends each kind of bad frame on its own
// connection: the server closes it, never calls the handler for it, and keeps
// serving a fresh connection.
func TestBadInputClosesOnlyThatConnection(t *testing.T) {
	frame := func(payload []byte) []byte {
		return append(binary.BigEndian.AppendUint32(nil, uint32(len(payload))), payload...)
	}
	header := func(key, version int16) []byte {
		b := binary.BigEndian.AppendUint16(nil, uint16(key))
		b = binary.BigEndian.AppendUint16(b, uint16(version))
		b = binary.BigEndian.AppendUint32(b, 7)
		return binary.BigEndian.AppendUint16(b, 0xffff) // null client id
	}
	const maxSize = 1 << 20
	tests := []struct {
		name      string
		bytes     []byte
		halfClose bool // close our write side after sending
	}{
		{name: "garbage (HTTP request)", bytes: []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n")},
		{name: "random bytes in a frame", bytes: frame([]byte{0xde, 0xad, 0xbe, 0xef, 1, 2, 3, 4, 5, 6, 7, 8, 9})},
		{name: "truncated frame", bytes: append(binary.BigEndian.AppendUint32(nil, 100), make([]byte, 10)...), halfClose: true},
		{name: "truncated size prefix", bytes: []byte{0, 0}, halfClose: true},
		{name: "oversize size prefix", bytes: binary.BigEndian.AppendUint32(nil, maxSize+1)},
		{name: "negative size prefix", bytes: binary.BigEndian.AppendUint32(nil, 0xffffff00)},
		{name: "empty frame", bytes: frame(nil)},
		{name: "truncated header", bytes: frame([]byte{0, 12, 0, 0, 0})},
		{name: "client id longer than frame", bytes: frame([]byte{0, 12, 0, 0, 0, 0, 0, 1, 0, 50, 'a'})},
		{name: "unknown api key", bytes: frame(header(9999, 0))},
		{name: "api key kmsg knows but not served", bytes: encodeRequest(kmsg.NewPtrFindCoordinatorRequest(), 1, 7, "x")},
		{name: "unsupported version of a served key", bytes: frame(append(header(12, 9), make([]byte, 40)...))},
		{name: "negative version", bytes: frame(append(header(12, -1), make([]byte, 40)...))},
		{name: "malformed body", bytes: frame(append(header(12, 0), 0, 5, 'a'))},
		{name: "bad flexible header tags", bytes: frame(append(header(12, 4), 3, 1, 0xff, 0xff))},
	}
	var rec recorder
	_, addr := startServer(t, apiVersionsHandler(func(req *protocol.Request) <-chan protocol.Response {
		rec.add(req)
		return protocol.Ready(protocol.Response{Body: &kmsg.HeartbeatResponse{}})
	}), func(c *Config) { c.MaxRequestSize = maxSize })
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := dial(t, addr)
			send(t, c, tc.bytes)
			if tc.halfClose {
				if err := c.(*net.TCPConn).CloseWrite(); err != nil {
					t.Fatal(err)
				}
			}
			expectClosed(t, c)
			roundTripApiVersions(t, addr)
		})
	}
	if n := rec.len(); n != 0 {
		t.Fatalf("handler was called %d times for bad input", n)
	}
}

// TestApiVersionsUnsupportedVersionFallback: an ApiVersions version above the served
// range gets a v0 response with UNSUPPORTED_VERSION and the full key list, and the
// connection stays open for the client's retry.
func TestApiVersionsUnsupportedVersionFallback(t *testing.T) {
	var rec recorder
	_, addr := startServer(t, apiVersionsHandler(func(req *protocol.Request) <-chan protocol.Response {
		rec.add(req)
		return nil
	}), nil)
	c := dial(t, addr)
	// A future version with a body the server cannot know: only the header matters.
	frame := binary.BigEndian.AppendUint32(nil, 0)
	frame = binary.BigEndian.AppendUint16(frame, uint16(apiVersionsKey))
	frame = binary.BigEndian.AppendUint16(frame, 99)
	frame = binary.BigEndian.AppendUint32(frame, 4242)
	frame = binary.BigEndian.AppendUint16(frame, 3)
	frame = append(frame, "cli"...)
	frame = append(frame, 0, 0xff, 0xfe, 0x12) // tags and an unknown body
	binary.BigEndian.PutUint32(frame, uint32(len(frame)-4))
	send(t, c, frame)

	var resp kmsg.ApiVersionsResponse
	if corr := readResponse(t, c, &resp, 0, false); corr != 4242 {
		t.Fatalf("correlation id %d, want 4242", corr)
	}
	if resp.ErrorCode != errCodeUnsupportedVersion {
		t.Fatalf("error code %d, want UNSUPPORTED_VERSION", resp.ErrorCode)
	}
	want := servedAPIKeys()
	if len(resp.ApiKeys) != len(want) {
		t.Fatalf("keys %+v, want %+v", resp.ApiKeys, want)
	}
	for i := range want {
		if resp.ApiKeys[i].ApiKey != want[i].ApiKey || resp.ApiKeys[i].MinVersion != want[i].MinVersion || resp.ApiKeys[i].MaxVersion != want[i].MaxVersion {
			t.Fatalf("key %d: %+v, want %+v", i, resp.ApiKeys[i], want[i])
		}
	}
	// The client retries with a served version on the same connection.
	send(t, c, encodeRequest(kmsg.NewPtrApiVersionsRequest(), 3, 4243, "cli"))
	var retry kmsg.ApiVersionsResponse
	if corr := readResponse(t, c, &retry, 3, false); corr != 4243 || retry.ErrorCode != 0 {
		t.Fatalf("retry: correlation id %d error %d", corr, retry.ErrorCode)
	}
	if rec.len() != 0 {
		t.Fatal("the fallback must not reach the handler")
	}
}

// TestHandlerPanicClosesOnlyThatConnection: a panic in Handle closes the connection
// that caused it; other connections, including one opened before, keep working.
func TestHandlerPanicClosesOnlyThatConnection(t *testing.T) {
	_, addr := startServer(t, apiVersionsHandler(func(req *protocol.Request) <-chan protocol.Response {
		if req.Body.(*kmsg.HeartbeatRequest).Group == "boom" {
			panic("handler bug")
		}
		return protocol.Ready(protocol.Response{Body: &kmsg.HeartbeatResponse{}})
	}), nil)
	bystander := dial(t, addr)
	victim := dial(t, addr)
	send(t, victim, encodeRequest(&kmsg.HeartbeatRequest{Group: "boom"}, 4, 1, ""))
	expectClosed(t, victim)

	send(t, bystander, encodeRequest(&kmsg.HeartbeatRequest{Group: "fine"}, 4, 2, ""))
	var resp kmsg.HeartbeatResponse
	if corr := readResponse(t, bystander, &resp, 4, true); corr != 2 {
		t.Fatalf("bystander correlation id %d", corr)
	}
	roundTripApiVersions(t, addr)
}

// TestResponseEncodingPanicClosesOnlyThatConnection: a response body whose encoding
// panics (a broker bug) closes that connection, not the process.
func TestResponseEncodingPanicClosesOnlyThatConnection(t *testing.T) {
	_, addr := startServer(t, apiVersionsHandler(func(req *protocol.Request) <-chan protocol.Response {
		return protocol.Ready(protocol.Response{Body: panickingResponse{kmsg.NewPtrHeartbeatResponse()}})
	}), nil)
	c := dial(t, addr)
	send(t, c, encodeRequest(&kmsg.HeartbeatRequest{Group: "g"}, 4, 1, ""))
	expectClosed(t, c)
	roundTripApiVersions(t, addr)
}

type panickingResponse struct{ *kmsg.HeartbeatResponse }

func (panickingResponse) AppendTo([]byte) []byte { panic("encoder bug") }

// TestResponseCloseClosesAfterWriting: Response.Close writes the response, then closes.
func TestResponseCloseClosesAfterWriting(t *testing.T) {
	_, addr := startServer(t, apiVersionsHandler(func(req *protocol.Request) <-chan protocol.Response {
		return protocol.Ready(protocol.Response{Body: &kmsg.HeartbeatResponse{ErrorCode: 3}, Close: true})
	}), nil)
	c := dial(t, addr)
	send(t, c, encodeRequest(&kmsg.HeartbeatRequest{Group: "g"}, 0, 11, ""))
	var resp kmsg.HeartbeatResponse
	if corr := readResponse(t, c, &resp, 0, false); corr != 11 || resp.ErrorCode != 3 {
		t.Fatalf("correlation id %d error %d", corr, resp.ErrorCode)
	}
	expectClosed(t, c)
}

func TestIdleConnectionIsClosed(t *testing.T) {
	_, addr := startServer(t, apiVersionsHandler(nil), func(c *Config) { c.IdleTimeout = 50 * time.Millisecond })
	c := dial(t, addr)
	send(t, c, encodeRequest(kmsg.NewPtrApiVersionsRequest(), 0, 1, ""))
	var resp kmsg.ApiVersionsResponse
	readResponse(t, c, &resp, 0, false)
	expectClosed(t, c)
}

// TestSlowResponseIsNotIdle: a request whose response takes longer than the idle
// timeout (a long delayed fetch) does not get its connection closed.
func TestSlowResponseIsNotIdle(t *testing.T) {
	h := newHeartbeatReplyLater()
	var observed atomic.Int64
	_, addr := startServer(t, h, func(c *Config) {
		c.IdleTimeout = 20 * time.Millisecond
		c.Observer = observerFunc(func() { observed.Add(1) })
	})
	c := dial(t, addr)
	send(t, c, encodeRequest(&kmsg.HeartbeatRequest{Group: "g", Generation: 5}, 4, 1, ""))
	waitFor(t, "request handled", func() bool { return h.handled() == 1 })
	// Let several idle timeouts pass while the request is in flight.
	start := time.Now()
	waitFor(t, "five idle timeouts to pass", func() bool { return time.Since(start) > 100*time.Millisecond })
	h.release(5)
	var resp kmsg.HeartbeatResponse
	if corr := readResponse(t, c, &resp, 4, true); corr != 1 || resp.ErrorCode != 5 {
		t.Fatalf("correlation id %d error %d", corr, resp.ErrorCode)
	}
}

// chunkFile writes size pseudo-random bytes to a temp file and returns it open, its
// seek position moved away from 0 to catch any use of the shared position.
func chunkFile(t *testing.T, size int) (*os.File, []byte) {
	t.Helper()
	data := make([]byte, size)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	path := filepath.Join(t.TempDir(), "00000000000000000000.log")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	if _, err := f.Seek(12345, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	return f, data
}

// chunkHandler answers Heartbeat requests with a chunked body: a byte prefix naming
// the range, the file range [Generation*stride, +length), and a byte suffix.
func chunkHandler(f *os.File, stride, length int64) handlerFunc {
	return apiVersionsHandler(func(req *protocol.Request) <-chan protocol.Response {
		gen := int64(req.Body.(*kmsg.HeartbeatRequest).Generation)
		return protocol.Ready(protocol.Response{Chunks: []protocol.Chunk{
			{Bytes: []byte(fmt.Sprintf("range-%d:", gen))},
			{File: f, Offset: gen * stride, Length: length},
			{Bytes: []byte(":end")},
			{File: f, Offset: 0, Length: 0}, // empty ranges are legal
		}})
	})
}

// TestChunkResponsesByteExactSendfile: two TCP connections (one with a tiny send
// buffer, so sendfile repeatedly waits for writability) pipeline requests whose
// responses mix bytes and ranges of one shared file; every body arrives byte-exact
// and the file's seek position is untouched.
func TestChunkResponsesByteExactSendfile(t *testing.T) {
	const (
		stride = 100_003
		length = 300_007 // larger than socket buffers, so sendfile hits EAGAIN
		reqs   = 8
	)
	f, data := chunkFile(t, stride*reqs+length)
	s, addr := startServer(t, chunkHandler(f, stride, length), nil)

	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for conn := range 2 {
		var c net.Conn
		if conn == 0 {
			c = dial(t, addr)
		} else {
			c = smallBufferConn(t, s)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			var frames []byte
			for i := range reqs {
				gen := int32((i + conn*3) % reqs)
				frames = append(frames, encodeRequest(&kmsg.HeartbeatRequest{Group: "g", Generation: gen}, 4, int32(i), "")...)
			}
			if _, err := c.Write(frames); err != nil {
				errs <- err
				return
			}
			for i := range reqs {
				gen := int64((i + conn*3) % reqs)
				if err := readChunkResponse(c, int32(i), gen, stride, length, data); err != nil {
					errs <- fmt.Errorf("connection %d: %w", conn, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if pos, err := f.Seek(0, io.SeekCurrent); err != nil || pos != 12345 {
		t.Fatalf("file seek position %d (%v), want 12345 untouched", pos, err)
	}
}

// smallBufferConn connects a client to s through a TCP connection whose server-side
// send buffer (32 KiB) is far smaller than a response, so sendfile fills the socket and has to wait for the poller.
func smallBufferConn(t *testing.T, s *Server) net.Conn {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	client := dial(t, ln.Addr().String())
	serverSide, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	if err := serverSide.(*net.TCPConn).SetWriteBuffer(32 << 10); err != nil {
		t.Fatal(err)
	}
	s.serve(serverSide, &s.cfg.Listeners[0])
	return client
}

// readChunkResponse is expectChunkResponse for use off the test goroutine.
func readChunkResponse(c net.Conn, corr int32, gen, stride, length int64, data []byte) error {
	var size [4]byte
	if _, err := io.ReadFull(c, size[:]); err != nil {
		return err
	}
	frame := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(c, frame); err != nil {
		return err
	}
	// Heartbeat v4 is flexible: correlation id, empty tag buffer, body.
	if got := int32(binary.BigEndian.Uint32(frame)); got != corr || frame[4] != 0 {
		return fmt.Errorf("header: correlation id %d (want %d), tag byte %d", got, corr, frame[4])
	}
	want := append([]byte(fmt.Sprintf("range-%d:", gen)), data[gen*stride:gen*stride+length]...)
	want = append(want, ":end"...)
	if !bytes.Equal(frame[5:], want) {
		return fmt.Errorf("range %d: body of %d bytes differs from the %d expected", gen, len(frame)-5, len(want))
	}
	return nil
}

// TestChunkResponsesPreadFallback runs the same over net.Pipe, which has no file
// descriptor: the server must fall back to pread.
func TestChunkResponsesPreadFallback(t *testing.T) {
	const stride, length = 1000, 150_000
	f, data := chunkFile(t, stride*4+length)
	s, _ := startServer(t, chunkHandler(f, stride, length), nil)
	client, serverSide := net.Pipe()
	t.Cleanup(func() { client.Close() })
	s.serve(serverSide, &s.cfg.Listeners[0])
	if err := client.SetDeadline(time.Now().Add(testDeadline)); err != nil {
		t.Fatal(err)
	}
	go func() {
		for i := range 4 {
			// net.Pipe is synchronous; write from a goroutine while the test reads.
			client.Write(encodeRequest(&kmsg.HeartbeatRequest{Group: "g", Generation: int32(3 - i)}, 0, int32(i), ""))
		}
	}()
	for i := range 4 {
		corr, body := readFrame(t, client)
		gen := int64(3 - i)
		want := append([]byte(fmt.Sprintf("range-%d:", gen)), data[gen*stride:gen*stride+length]...)
		want = append(want, ":end"...)
		if corr != int32(i) || !bytes.Equal(body, want) { // v0: no header tag buffer
			t.Fatalf("response %d: correlation id %d, body of %d bytes differs", i, corr, len(body))
		}
	}
}

// TestChunkBeyondFileEndClosesConnection: a range past the end of the file cannot be
// sent whole, so the connection closes rather than emitting a short frame.
func TestChunkBeyondFileEndClosesConnection(t *testing.T) {
	f, _ := chunkFile(t, 1000)
	_, addr := startServer(t, chunkHandler(f, 600, 600), nil)
	c := dial(t, addr)
	send(t, c, encodeRequest(&kmsg.HeartbeatRequest{Group: "g", Generation: 1}, 4, 1, ""))
	// The header and part of the body may arrive; then the connection must close.
	if err := c.SetReadDeadline(time.Now().Add(testDeadline)); err != nil {
		t.Fatal(err)
	}
	n, err := io.Copy(io.Discard, c)
	if err != nil && !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("after %d bytes: %v", n, err)
	}
	if n >= 4+5+int64(len("range-1:"))+600+4 {
		t.Fatalf("received %d bytes: a whole frame was sent for a range beyond the file", n)
	}
}

// TestCloseStopsEverything: Close returns with connections open and requests pending.
func TestCloseStopsEverything(t *testing.T) {
	h := newHeartbeatReplyLater()
	s, addr := startServer(t, h, nil)
	c := dial(t, addr)
	send(t, c, encodeRequest(&kmsg.HeartbeatRequest{Group: "g"}, 4, 1, ""))
	waitFor(t, "request handled", func() bool { return h.handled() == 1 })
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	expectClosed(t, c)
	if _, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		t.Fatal("listener still accepting after Close")
	}
	if err := s.Start(); !errors.Is(err, ErrClosed) {
		t.Fatalf("Start after Close: %v", err)
	}
}

// TestCloseEndsWaitingRequests: Close closes the connections, then calls
// Config.Closed so that a request still waiting (a broker's wait for replicas or a
// coordinator, up to 30 s) ends instead of holding Close; its response is not
// written, the connection being closed already.
func TestCloseEndsWaitingRequests(t *testing.T) {
	release := make(chan struct{})
	handling := make(chan struct{})
	h := apiVersionsHandler(func(req *protocol.Request) <-chan protocol.Response {
		close(handling)
		<-release // as long as its wait lasts
		return protocol.Ready(protocol.Response{Body: &kmsg.HeartbeatResponse{}})
	})
	s, addr := startServer(t, h, func(cfg *Config) { cfg.Closed = func() { close(release) } })
	c := dial(t, addr)
	send(t, c, encodeRequest(&kmsg.HeartbeatRequest{Group: "g"}, 4, 1, ""))
	<-handling
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(testDeadline):
		t.Fatal("Close still waits for the request")
	}
	expectClosed(t, c) // the connection closed before the wait ended: no response
}

// TestLargeRequestFrame sends a request larger than the initial frame buffer, in
// small writes, and expects it decoded whole.
func TestLargeRequestFrame(t *testing.T) {
	const topics = 150_000 // about 3 MiB of Metadata v12
	got := make(chan int, 1)
	_, addr := startServer(t, apiVersionsHandler(func(req *protocol.Request) <-chan protocol.Response {
		got <- len(req.Body.(*kmsg.MetadataRequest).Topics)
		return protocol.Ready(protocol.Response{Body: kmsg.NewPtrMetadataResponse()})
	}), nil)
	req := kmsg.NewPtrMetadataRequest()
	for i := range topics {
		req.Topics = append(req.Topics, kmsg.MetadataRequestTopic{Topic: kmsg.StringPtr(fmt.Sprintf("topic-%06d", i))})
	}
	frame := encodeRequest(req, 12, 3, "big")
	if len(frame) <= initialFrameBuffer*2 {
		t.Fatalf("frame of %d bytes does not exercise buffer growth", len(frame))
	}
	c := dial(t, addr)
	for rest := frame; len(rest) > 0; {
		n := min(len(rest), 100_000)
		send(t, c, rest[:n])
		rest = rest[n:]
	}
	var resp kmsg.MetadataResponse
	if corr := readResponse(t, c, &resp, 12, true); corr != 3 {
		t.Fatalf("correlation id %d", corr)
	}
	if n := <-got; n != topics {
		t.Fatalf("handler saw %d topics, want %d", n, topics)
	}
}

// TestRefusedRequestAfterAnsweredOne: a refused request pipelined behind a valid one
// closes the connection only after the valid one's response is written (kafka-python
// sends ApiVersions v0 and then a Metadata version the broker may not serve).
func TestRefusedRequestAfterAnsweredOne(t *testing.T) {
	slow := make(chan struct{})
	h := apiVersionsHandler(func(req *protocol.Request) <-chan protocol.Response {
		ch := make(chan protocol.Response, 1)
		go func() {
			<-slow
			ch <- protocol.Response{Body: &kmsg.HeartbeatResponse{}}
		}()
		return ch
	})
	_, addr := startServer(t, h, nil)
	for i := 0; i < 20; i++ {
		c := dial(t, addr)
		frames := append(encodeRequest(kmsg.NewPtrApiVersionsRequest(), 0, 1, "probe"),
			encodeRequest(kmsg.NewPtrHeartbeatRequest(), 0, 2, "probe")...)
		// An unsupported version of Metadata: refused.
		frames = append(frames, encodeRequest(kmsg.NewPtrMetadataRequest(), 13, 3, "probe")...)
		send(t, c, frames)
		if corr := readResponse(t, c, kmsg.NewPtrApiVersionsResponse(), 0, false); corr != 1 {
			t.Fatalf("first response has correlation id %d", corr)
		}
		if i == 0 {
			close(slow) // the second response is delayed: the close must wait for it
		}
		if corr := readResponse(t, c, kmsg.NewPtrHeartbeatResponse(), 0, false); corr != 2 {
			t.Fatalf("second response has correlation id %d", corr)
		}
		expectClosed(t, c)
	}
}

// TestConnClosedAfterLastRequest: every request carries its connection's id, and
// Config.ConnClosed hears each id once, when that connection has closed — never while
// the handler is still being given one of its requests.
func TestConnClosedAfterLastRequest(t *testing.T) {
	var mu sync.Mutex
	seen := map[uint64]int{}   // requests by connection id
	closed := map[uint64]int{} // ConnClosed calls by connection id
	inHandle := make(chan struct{})
	unblock := make(chan struct{})
	h := apiVersionsHandler(func(req *protocol.Request) <-chan protocol.Response {
		mu.Lock()
		seen[req.ConnID]++
		mu.Unlock()
		if req.CorrelationID == 99 { // held in Handle until the test lets it go
			inHandle <- struct{}{}
			<-unblock
		}
		return protocol.Ready(protocol.Response{Body: &kmsg.HeartbeatResponse{}})
	})
	s, addr := startServer(t, h, func(c *Config) {
		c.ConnClosed = func(id uint64) {
			mu.Lock()
			closed[id]++
			mu.Unlock()
		}
	})
	calls := func(id uint64) (requests, closes int) {
		mu.Lock()
		defer mu.Unlock()
		return seen[id], closed[id]
	}
	idOf := func(c net.Conn, corr int32) uint64 {
		t.Helper()
		send(t, c, encodeRequest(&kmsg.HeartbeatRequest{Group: "g"}, 0, corr, ""))
		readResponse(t, c, kmsg.NewPtrHeartbeatResponse(), 0, false)
		mu.Lock()
		defer mu.Unlock()
		for id := range seen {
			if _, old := closed[id]; !old && id != 0 {
				closed[id] = 0 // known from now on
				return id
			}
		}
		t.Fatal("the request carried no new connection id")
		return 0
	}

	// A client closing its connection.
	c1, c2 := dial(t, addr), dial(t, addr)
	id1, id2 := idOf(c1, 1), idOf(c2, 2)
	if id1 == id2 {
		t.Fatalf("two connections with id %d", id1)
	}
	c1.Close()
	waitFor(t, "ConnClosed for the closed connection", func() bool { _, n := calls(id1); return n == 1 })
	if _, n := calls(id2); n != 0 {
		t.Fatalf("ConnClosed called %d times for an open connection", n)
	}

	// The server closing a connection whose request is still in Handle: ConnClosed
	// waits for Handle to return.
	send(t, c2, encodeRequest(&kmsg.HeartbeatRequest{Group: "g"}, 0, 99, ""))
	<-inHandle
	closing := make(chan error, 1)
	go func() { closing <- s.Close() }()
	expectClosed(t, c2)
	// Once the server forgot the connection, its close has been counted.
	waitFor(t, "the connection forgotten", func() bool { return s.Connections() == 0 })
	if _, n := calls(id2); n != 0 {
		t.Fatal("ConnClosed called while a request of the connection was in Handle")
	}
	close(unblock)
	if err := <-closing; err != nil {
		t.Fatal(err)
	}
	if requests, n := calls(id2); n != 1 || requests != 2 {
		t.Fatalf("connection 2: %d requests, ConnClosed called %d times", requests, n)
	}
	if _, n := calls(id1); n != 1 {
		t.Fatalf("ConnClosed called %d times for connection 1", n)
	}
}
