package server

import (
	"bufio"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-streaming/samsa/internal/auth"
	"github.com/samsa-streaming/samsa/internal/protocol"
)

const (
	// writeBufferSize is the per-connection bufio.Writer size.
	writeBufferSize = 32 << 10
	// readBufferSize is the per-connection bufio.Reader size.
	readBufferSize = 16 << 10
	// maxKeptScratch bounds the encode buffer a connection keeps between responses.
	maxKeptScratch = 1 << 20
	// preadChunk is the size of pooled buffers for the non-sendfile file path.
	preadChunk = 64 << 10
	// initialFrameBuffer is the most a request frame allocates before its bytes arrive.
	initialFrameBuffer = 1 << 20
)

// Connection-level failures.
var (
	errIdle              = errors.New("connection idle")
	errSetupTimeout      = errors.New("connection not set up in time")
	errHandlerNoChannel  = errors.New("handler returned a nil channel")
	errHandlerNoResponse = errors.New("handler closed its response channel without a response")
	errBadChunk          = errors.New("invalid response chunk")
)

var preadPool = sync.Pool{New: func() any { b := make([]byte, preadChunk); return &b }}

// pending is a request whose response the writer has yet to write.
type pending struct {
	ch <-chan protocol.Response
	// now is the response when ready is set (a streamed Produce answered at once),
	// instead of ch.
	now           protocol.Response
	ready         bool
	key           int16
	version       int16 // request version, for logs and the Observer
	respVersion   int16 // version the response body is encoded at
	correlationID int32
	// flexibleHeader: the response header carries an empty tag buffer.
	flexibleHeader bool
	// raw: a SASL token after a SaslHandshake v0, written as size and bytes with
	// no response header.
	raw     bool
	start   time.Time
	bytesIn int
}

// conn is one client connection: a reader goroutine that reads and decodes requests,
// hands each to the handler and writes the response itself when it is ready at once and
// none is waiting before it; and a writer goroutine that writes the other responses, in
// request order, as they become ready.
type conn struct {
	srv      *Server
	id       uint64   // protocol.Request.ConnID
	nc       net.Conn // a *tls.Conn on a TLS listener
	remote   string
	ip       string
	listener *Listener
	log      *slog.Logger

	queue     chan pending  // reader -> writer, capacity MaxInflightPerConn
	done      chan struct{} // closed by close
	closeOnce sync.Once
	// ended counts close and the reader's exit; the second tells Config.ConnClosed.
	ended atomic.Int32

	// queued counts the responses handed to the writer and not yet written: the reader
	// writes a response itself only when it is zero, so responses keep request order.
	queued atomic.Int64

	// inflight counts requests queued or being written; lastActivity is the unix
	// nanosecond time of the last frame read or response written. Both feed the
	// idle timeout, so a connection waiting on a long delayed fetch is not idle.
	inflight     atomic.Int64
	lastActivity atomic.Int64
	// mutedUntil is the unix nanosecond time before which the reader reads no
	// request (a throttled client, Response.Throttle); 0 when not muted.
	mutedUntil atomic.Int64

	// writeMu guards the buffered writer and the encode buffer, used by the writer
	// goroutine and by the reader when it writes a ready response itself.
	writeMu sync.Mutex
	bw      *bufio.Writer
	scratch []byte
	sender  *fileSender // sendfile(2) to this connection, made at the first file range

	// Reader state, owned by the reader goroutine: the buffered reader (several small
	// requests arrive in one read; large frames are read past it, straight into their
	// buffer) and the size up to which a pooled frame is taken at once (frames.go).
	br          *bufio.Reader
	frameBudget int
	names       nameCache        // recent topic names and client ids (produce_stream.go)
	produceReq  protocol.Request // the streamed Produce request being handled
	frame       frameReader      // its reader

	// Security state, owned by the reader goroutine (security.go). ready means
	// that nothing needs checking before a request is served: the connection is
	// set up (first request read, or authenticated on a SASL listener) and its
	// session does not expire.
	ready         bool
	setupDeadline time.Time
	principal     auth.Principal
	viaToken      bool       // principal authenticated with a delegation token
	sawRequest    bool       // a request was read (the setup of a non-SASL connection)
	sasl          *saslState // nil unless the listener is SASL
}

func newConn(s *Server, nc net.Conn, l *Listener, ip string) *conn {
	if l.TLS != nil {
		nc = tls.Server(nc, l.TLS)
	}
	c := &conn{
		srv:       s,
		id:        s.connIDs.Add(1),
		nc:        nc,
		remote:    nc.RemoteAddr().String(),
		ip:        ip,
		listener:  l,
		log:       s.log,
		queue:     make(chan pending, s.cfg.MaxInflightPerConn),
		done:      make(chan struct{}),
		bw:        bufio.NewWriterSize(nc, writeBufferSize),
		br:        bufio.NewReaderSize(nc, readBufferSize),
		principal: auth.Anonymous,
	}
	c.setupDeadline = time.Now().Add(s.cfg.SetupTimeout)
	if l.SASL != nil {
		c.sasl = &saslState{cfg: l.SASL}
	}
	c.touch()
	return c
}

// close closes the socket and releases both goroutines. Safe to call many times.
func (c *conn) close() {
	c.closeOnce.Do(func() {
		close(c.done)
		c.nc.Close()
		c.end()
		c.srv.forget(c)
		c.log.Debug("connection closed", "remote", c.remote)
	})
}

// end is called once when the connection closes and once when its reader stops
// handing requests to the handler; the second call tells the handler
// (Config.ConnClosed) that the connection is gone, so that no request of it reaches
// the handler after that.
func (c *conn) end() {
	if c.ended.Add(1) == 2 && c.srv.cfg.ConnClosed != nil {
		c.srv.cfg.ConnClosed(c.id)
	}
}

// closeAfterPending queues a marker that makes the writer close the connection once
// every response queued before it has been written and flushed.
func (c *conn) closeAfterPending() {
	c.inflight.Add(1)
	c.queueResponse(pending{ch: protocol.Ready(protocol.Response{None: true, Close: true}), key: -1})
}

// queueResponse hands a pending response to the writer. It blocks while
// MaxInflightPerConn responses wait, which stops the reader: backpressure on a client
// that pipelines faster than its responses complete. It reports false once the
// connection is closed.
func (c *conn) queueResponse(p pending) bool {
	c.queued.Add(1)
	select {
	case c.queue <- p:
		return true
	case <-c.done:
		return false
	}
}

func (c *conn) touch() { c.lastActivity.Store(time.Now().UnixNano()) }

// inbound is a decoded request (or what stands in for one) for the handler.
type inbound struct {
	req      parsedRequest
	pooled   *[]byte  // the frame's buffer, to give back to the frame pool after Handle
	fallback *pending // a response the server makes itself (ApiVersions v0 fallback)
	start    time.Time
	bytesIn  int
}

// readLoop reads frames, decodes them and hands them to the handler in arrival order.
// The next frame is read once Handle has returned, as Kafka reads a connection's next
// request once the previous one is handled; the kernel keeps receiving meanwhile, and a
// response that is not ready yet (a delayed fetch, an acks=all produce) waits for the
// writer while reading goes on.
//
// A request the server refuses (bad size, unknown key, unsupported version, malformed
// body, failed dispatch) ends reading, but the connection closes only after the
// responses to the requests before it have been written: a client that pipelines a
// request we refuse behind one we answer (kafka-python probes ApiVersions v0 then
// Metadata v0) still gets the first answer, as it would from Kafka, which reads the next
// request only after answering the previous one.
func (c *conn) readLoop() {
	defer c.srv.wg.Done()
	defer c.end()
	if !c.handshake() {
		c.close()
		return
	}
	var sizeBuf [4]byte
	for {
		if until := c.mutedUntil.Load(); until != 0 && !c.waitMuted(until) {
			return
		}
		deadline := time.Now().Add(c.srv.cfg.IdleTimeout)
		if !c.ready && !c.setUp() && c.setupDeadline.Before(deadline) {
			deadline = c.setupDeadline
		}
		if err := c.nc.SetReadDeadline(deadline); err != nil {
			c.logReadError(err, false)
			c.close()
			return
		}
		if err := c.readFull(sizeBuf[:]); err != nil {
			c.logReadError(err, false)
			c.close()
			return
		}
		size := int32(binary.BigEndian.Uint32(sizeBuf[:]))
		maxSize := c.srv.cfg.MaxRequestSize
		if !c.ready && c.sasl != nil && !c.sasl.authenticated {
			maxSize = min(maxSize, c.sasl.cfg.MaxReceiveSize)
		}
		if size < 0 || size > maxSize {
			c.log.Warn("request size out of range; closing connection",
				"remote", c.remote, "size", size, "max", maxSize)
			c.closeAfterPending()
			return
		}
		if c.sasl != nil && c.sasl.raw {
			if !c.rawToken(int(size)) {
				return
			}
			continue
		}
		if c.srv.cfg.Produce != nil && size >= 4 {
			head, err := c.peek(4)
			if err != nil {
				c.logReadError(err, true)
				c.close()
				return
			}
			key, version := int16(binary.BigEndian.Uint16(head)), int16(binary.BigEndian.Uint16(head[2:]))
			if key == produceKey && c.streamable(version) {
				if !c.ready && !c.admit(key, "") {
					c.closeAfterPending()
					return
				}
				if !c.streamProduce(int(size), version) {
					return
				}
				continue
			}
		}
		frame, pooled, err := c.readRequestFrame(int(size))
		if err != nil {
			c.logReadError(err, true)
			c.close()
			return
		}
		c.touch()
		in := inbound{start: time.Now(), bytesIn: 4 + len(frame)}

		req, err := safeParseRequest(frame, c.srv.cfg.Versions, c.srv.cfg.NewRequest)
		switch {
		case err == nil && c.sasl != nil && (req.key == saslHandshakeKey || req.key == saslAuthenticateKey):
			if pooled != nil {
				c.srv.frames.Put(pooled)
			}
			if !c.saslRequest(req, in) {
				return
			}
			continue
		case err == nil && !c.ready && !c.admit(req.key, req.clientID):
			if pooled != nil {
				c.srv.frames.Put(pooled)
			}
			c.closeAfterPending()
			return
		case err == nil:
			in.req = req
			in.pooled = pooled
		case errors.Is(err, errUnsupportedVersion) && req.key == apiVersionsKey:
			// Normal when a client is newer than us: it retries lower. Not INFO.
			c.log.Debug("unsupported ApiVersions version; answering with v0",
				"remote", c.remote, "api_key", req.key, "version", req.version, "client_id", req.clientID)
			in.fallback = &pending{
				ch: protocol.Ready(protocol.Response{Body: &kmsg.ApiVersionsResponse{
					ErrorCode: errCodeUnsupportedVersion,
					ApiKeys:   c.srv.cfg.APIKeys(),
				}}),
				key:           req.key,
				version:       req.version,
				respVersion:   0,
				correlationID: req.correlationID,
			}
		default:
			c.log.Info("bad request; closing connection", "remote", c.remote,
				"api_key", req.key, "version", req.version, "client_id", req.clientID, "err", err)
			c.closeAfterPending()
			return
		}
		if !c.handle(in) {
			return
		}
	}
}

// handle calls the handler for one decoded request and passes its response on; it
// reports false when reading must stop.
func (c *conn) handle(in inbound) bool {
	var p pending
	if in.fallback != nil {
		p = *in.fallback
	} else {
		var err error
		p, err = c.dispatch(in.req, in.bytesIn)
		if in.pooled != nil {
			c.srv.frames.Put(in.pooled)
		}
		if err != nil {
			c.closeAfterPending()
			return false
		}
	}
	p.start, p.bytesIn = in.start, in.bytesIn
	return c.pass(p)
}

// pass hands a request's response on: when it is ready at once and no earlier one
// waits for the writer, the reader writes it itself — no goroutine is woken for it, and
// it leaves while the request's bytes are still in the CPU cache; otherwise the writer
// gets it. pass reports false when reading must stop.
func (c *conn) pass(p pending) bool {
	c.inflight.Add(1)
	if p.ready {
		if c.queued.Load() == 0 {
			return c.writeNow(&p, p.now)
		}
		p.ch, p.ready = protocol.Ready(p.now), false
		return c.queueResponse(p)
	}
	if c.queued.Load() == 0 {
		select {
		case resp, ok := <-p.ch:
			if !ok {
				c.logNoResponse(&p)
				c.close()
				return false
			}
			return c.writeNow(&p, resp)
		default:
		}
	}
	return c.queueResponse(p)
}

// writeNow writes and flushes a response from the reader goroutine.
func (c *conn) writeNow(p *pending, resp protocol.Response) bool {
	c.writeMu.Lock()
	n, err := c.writeResponse(p, resp)
	if err == nil {
		err = c.bw.Flush()
	}
	c.writeMu.Unlock()
	if !c.written(p, resp, n, err) {
		c.close()
		return false
	}
	return true
}

// readRequestFrame reads a frame of size bytes. The frame of an API whose handler keeps
// no reference to it once Handle has returned (Config.ReusableFrames) is read into a
// pooled buffer (see frames.go), returned as pooled for handle to give back; any other
// frame is a fresh slice. The api key is peeked from the buffered reader to choose.
func (c *conn) readRequestFrame(size int) (frame []byte, pooled *[]byte, err error) {
	if reuse := c.srv.cfg.ReusableFrames; reuse != nil && size >= 2 {
		head, err := c.peek(2)
		if err != nil {
			return nil, nil, err
		}
		if reuse(int16(binary.BigEndian.Uint16(head))) {
			pooled, err = c.readPooledFrame(size)
			if err != nil {
				return nil, nil, err
			}
			return *pooled, pooled, nil
		}
	}
	frame, err = c.readFrame(size)
	return frame, nil, err
}

// readPooledFrame reads a frame of size bytes into a pooled buffer.
func (c *conn) readPooledFrame(size int) (*[]byte, error) { return c.readPooled(nil, size) }

// readPooled reads size bytes into a pooled buffer whose first bytes are have (read
// already): at once when size is within the connection's budget (the largest frame it
// has delivered, at least frameBudget), otherwise in steps that double as the bytes
// arrive.
func (c *conn) readPooled(have []byte, size int) (*[]byte, error) {
	n := min(size, max(c.frameBudget, frameBudget, len(have)))
	p := c.srv.frames.Get(n)
	copy(*p, have)
	if err := c.readFull((*p)[len(have):]); err != nil {
		c.srv.frames.Put(p)
		return nil, err
	}
	for n < size {
		next := min(size, 2*n)
		q := c.srv.frames.Get(next)
		copy(*q, (*p)[:n])
		c.srv.frames.Drop(p)
		p = q
		if err := c.readFull((*p)[n:next]); err != nil {
			c.srv.frames.Put(p)
			return nil, err
		}
		n = next
	}
	c.frameBudget = max(c.frameBudget, size)
	return p, nil
}

// readFrame reads a frame body of size bytes into a new slice (never reused: decoded
// bodies may alias it). Large frames are read into a buffer that doubles as bytes
// arrive, so a size prefix alone cannot make the server allocate MaxRequestSize.
func (c *conn) readFrame(size int) ([]byte, error) {
	frame := make([]byte, min(size, initialFrameBuffer))
	if err := c.readFull(frame); err != nil {
		return nil, err
	}
	for len(frame) < size {
		grown := make([]byte, min(size, 2*len(frame)))
		copy(grown, frame)
		if err := c.readFull(grown[len(frame):]); err != nil {
			return nil, err
		}
		frame = grown
	}
	return frame, nil
}

// safeParseRequest is parseRequest with a recover, so that a decoder bug closes one
// connection instead of the process.
func safeParseRequest(frame []byte, versions versionsFunc, newRequest func(int16) kmsg.Request) (req parsedRequest, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: decoder panic: %v", errMalformedBody, r)
		}
	}()
	return parseRequestWith(frame, versions, newRequest)
}

// dispatch calls the handler for a decoded request. A panicking handler, or one that
// returns no channel, is logged and reported as an error (the connection closes).
func (c *conn) dispatch(parsed parsedRequest, size int) (p pending, err error) {
	req := &protocol.Request{
		Key:           parsed.key,
		Version:       parsed.version,
		CorrelationID: parsed.correlationID,
		ClientID:      parsed.clientID,
		Body:          parsed.body,
		ClientAddr:    c.remote,
		Principal:     c.principal,
		ViaToken:      c.viaToken,
		Listener:      c.listener.Name,
		Size:          size,
		ConnID:        c.id,
	}
	// A response is flexible exactly when its request is (Kafka defines one range of
	// flexible versions per API), except ApiVersions' header, which never is (KIP-511).
	flexible := parsed.key != apiVersionsKey && parsed.body.IsFlexible()
	defer func() {
		if r := recover(); r != nil {
			c.log.Error("handler panicked; closing connection",
				"remote", c.remote, "api_key", parsed.key, "version", parsed.version,
				"panic", r, "stack", string(debug.Stack()))
			err = fmt.Errorf("handler panic: %v", r)
		}
	}()
	ch := c.srv.cfg.Handler.Handle(req)
	if ch == nil {
		c.log.Error("handler returned no response channel; closing connection",
			"remote", c.remote, "api_key", parsed.key, "version", parsed.version)
		return p, errHandlerNoChannel
	}
	return pending{
		ch:             ch,
		key:            parsed.key,
		version:        parsed.version,
		respVersion:    parsed.version,
		correlationID:  parsed.correlationID,
		flexibleHeader: flexible,
	}, nil
}

// waitMuted waits until a throttled connection may be read again (until, unix
// nanoseconds); false when the connection closed meanwhile.
func (c *conn) waitMuted(until int64) bool {
	c.mutedUntil.CompareAndSwap(until, 0)
	d := time.Until(time.Unix(0, until))
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-c.done:
		return false
	}
}

// readFull fills buf from the buffered reader.
func (c *conn) readFull(buf []byte) error {
	for read := 0; read < len(buf); {
		n, err := c.br.Read(buf[read:])
		read += n
		if err == nil {
			continue
		}
		if err = c.retryableReadError(err); err != nil {
			if errors.Is(err, io.EOF) && read > 0 {
				return io.ErrUnexpectedEOF
			}
			return err
		}
	}
	return nil
}

// peek returns the next n bytes without consuming them (valid until the next read).
func (c *conn) peek(n int) ([]byte, error) {
	for {
		b, err := c.br.Peek(n)
		if err == nil {
			return b, nil
		}
		if err = c.retryableReadError(err); err != nil {
			if errors.Is(err, io.EOF) {
				return nil, io.ErrUnexpectedEOF // called inside a frame
			}
			return nil, err
		}
	}
}

// retryableReadError returns nil when reading may go on after err: a read deadline
// expiring is not an error while the connection has requests in flight or saw activity
// within the idle timeout — the deadline is pushed out and reading continues where it
// stopped. Any other error is returned (errIdle for an idle connection).
func (c *conn) retryableReadError(err error) error {
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		return err
	}
	deadline, idle := c.idleDeadline()
	if idle {
		return errIdle
	}
	if !c.ready && !c.setUp() {
		if !time.Now().Before(c.setupDeadline) {
			return errSetupTimeout
		}
		if c.setupDeadline.Before(deadline) {
			deadline = c.setupDeadline
		}
	}
	return c.nc.SetReadDeadline(deadline)
}

// idleDeadline reports whether the connection is idle and, if not, when it would be.
func (c *conn) idleDeadline() (time.Time, bool) {
	now := time.Now()
	idle := c.srv.cfg.IdleTimeout
	if c.inflight.Load() > 0 {
		return now.Add(idle), false
	}
	deadline := time.Unix(0, c.lastActivity.Load()).Add(idle)
	return deadline, !now.Before(deadline)
}

func (c *conn) logReadError(err error, midFrame bool) {
	select {
	case <-c.done: // closed by us (Close, Response.Close, writer error)
		return
	default:
	}
	switch {
	case errors.Is(err, errIdle):
		c.log.Debug("closing idle connection", "remote", c.remote, "idle_timeout", c.srv.cfg.IdleTimeout)
	case errors.Is(err, errSetupTimeout):
		c.log.Info("closing a connection that did not send its first request, or authenticate, in time",
			"remote", c.remote, "listener", c.listener.Name, "connections.max.setup.ms", c.srv.cfg.SetupTimeout.Milliseconds())
	case midFrame || errors.Is(err, io.ErrUnexpectedEOF):
		c.log.Info("truncated request frame; closing connection", "remote", c.remote, "err", err)
	default:
		c.log.Debug("connection read ended", "remote", c.remote, "err", err)
	}
}

// writeLoop writes the responses the reader queued, in request order, flushing whenever
// the next response is not ready yet.
func (c *conn) writeLoop() {
	defer c.srv.wg.Done()
	defer c.close()
	for {
		var p pending
		select {
		case p = <-c.queue:
		default:
			if !c.flush() {
				return
			}
			select {
			case p = <-c.queue:
			case <-c.done:
				return
			}
		}

		var resp protocol.Response
		var ok bool
		select {
		case resp, ok = <-p.ch:
		default:
			if !c.flush() {
				return
			}
			select {
			case resp, ok = <-p.ch:
			case <-c.done:
				return
			}
		}
		if !ok {
			c.logNoResponse(&p)
			return
		}

		c.writeMu.Lock()
		n, err := c.writeResponse(&p, resp)
		c.writeMu.Unlock()
		c.queued.Add(-1)
		if !c.written(&p, resp, n, err) {
			return
		}
	}
}

// written accounts for a response written (or failed) by the writer or the reader and
// reports whether the connection stays open.
func (c *conn) written(p *pending, resp protocol.Response, n int, err error) bool {
	c.inflight.Add(-1)
	c.touch()
	if resp.Written != nil {
		defer resp.Written()
	}
	if resp.Throttle > 0 {
		c.mutedUntil.Store(time.Now().Add(resp.Throttle).UnixNano())
	}
	if err != nil {
		c.logWriteError(p, err)
		return false
	}
	if obs := c.srv.cfg.Observer; obs != nil && p.key >= 0 {
		obs.RequestDone(p.key, p.version, time.Since(p.start), p.bytesIn, n)
	}
	if resp.Close {
		c.flush()
		c.log.Debug("closing connection after response as asked", "remote", c.remote, "api_key", p.key)
		return false
	}
	return true
}

func (c *conn) flush() bool {
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	if c.bw.Buffered() == 0 {
		return true
	}
	if err := c.bw.Flush(); err != nil {
		c.logWriteError(nil, err)
		return false
	}
	return true
}

func (c *conn) logNoResponse(p *pending) {
	c.log.Error("closing connection", "remote", c.remote, "api_key", p.key,
		"version", p.version, "err", errHandlerNoResponse)
}

func (c *conn) logWriteError(p *pending, err error) {
	select {
	case <-c.done:
		return
	default:
	}
	attrs := []any{"remote", c.remote, "err", err}
	if p != nil {
		attrs = append(attrs, "api_key", p.key, "version", p.version)
	}
	if errors.Is(err, errBadChunk) || errors.Is(err, errWritePanic) {
		c.log.Error("cannot write response; closing connection", attrs...)
		return
	}
	c.log.Debug("write failed; closing connection", attrs...)
}

var errWritePanic = errors.New("writing the response panicked")

// writeResponse writes one response (header and body) into the buffered writer, or
// straight to the socket for file chunks. It returns the bytes written.
func (c *conn) writeResponse(p *pending, resp protocol.Response) (n int, err error) {
	if resp.None {
		return 0, nil
	}
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: %v\n%s", errWritePanic, r, debug.Stack())
		}
	}()

	buf := c.scratch[:0]
	buf = append(buf, 0, 0, 0, 0) // size, set below
	if !p.raw {
		buf = binary.BigEndian.AppendUint32(buf, uint32(p.correlationID))
	}
	if p.flexibleHeader {
		buf = append(buf, 0) // empty tag buffer
	}
	headerLen := len(buf) - 4

	if resp.Body != nil {
		resp.Body.SetVersion(p.respVersion)
		buf = resp.Body.AppendTo(buf)
		binary.BigEndian.PutUint32(buf, uint32(len(buf)-4))
		_, err = c.bw.Write(buf)
		c.keepScratch(buf)
		return len(buf), err
	}

	var bodyLen int64
	for i, ch := range resp.Chunks {
		if ch.File != nil && (ch.Offset < 0 || ch.Length < 0) {
			return 0, fmt.Errorf("%w: chunk %d: offset %d length %d", errBadChunk, i, ch.Offset, ch.Length)
		}
		bodyLen += ch.Size()
	}
	total := int64(headerLen) + bodyLen
	if total > 1<<31-1 {
		return 0, fmt.Errorf("%w: response of %d bytes", errBadChunk, total)
	}
	binary.BigEndian.PutUint32(buf, uint32(total))
	if _, err := c.bw.Write(buf); err != nil {
		return 0, err
	}
	c.keepScratch(buf)
	for _, ch := range resp.Chunks {
		if ch.File == nil {
			if _, err := c.bw.Write(ch.Bytes); err != nil {
				return 0, err
			}
			continue
		}
		if err := c.writeFileRange(ch.File, ch.Offset, ch.Length); err != nil {
			return 0, err
		}
	}
	return int(4 + total), nil
}

func (c *conn) keepScratch(buf []byte) {
	if cap(buf) <= maxKeptScratch {
		c.scratch = buf[:0]
	}
}

// writeFileRange writes length bytes of f starting at offset, never touching the
// file's seek position: sendfile(2) on plain TCP, pread into a pooled buffer otherwise.
func (c *conn) writeFileRange(f *os.File, offset, length int64) error {
	if length == 0 {
		return nil
	}
	if sc, ok := c.nc.(syscall.Conn); ok && sendfileSupported {
		if _, isTCP := c.nc.(*net.TCPConn); isTCP {
			if err := c.bw.Flush(); err != nil {
				return err
			}
			if c.sender == nil {
				var err error
				if c.sender, err = newFileSender(sc); err != nil {
					return err
				}
			}
			return c.sender.sendFile(f, offset, length)
		}
	}
	return c.copyFileRange(f, offset, length)
}

// copyFileRange is the portable path: ReadAt (pread) into a pooled buffer.
func (c *conn) copyFileRange(f *os.File, offset, length int64) error {
	bp := preadPool.Get().(*[]byte)
	defer preadPool.Put(bp)
	buf := *bp
	for length > 0 {
		chunk := buf[:min(int64(len(buf)), length)]
		n, err := f.ReadAt(chunk, offset)
		if n < len(chunk) {
			if err == nil || errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return fmt.Errorf("read %s at %d: %w", f.Name(), offset, err)
		}
		if _, err := c.bw.Write(chunk); err != nil {
			return err
		}
		offset += int64(n)
		length -= int64(n)
	}
	return nil
}
