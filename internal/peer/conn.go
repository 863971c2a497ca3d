package peer

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"

	"github.com/samsa-streaming/samsa/internal/bufpool"
)

// Errors returned by Request, wrapped with the address.
var (
	// ErrBackingOff: the last connection attempts failed; the Conn waits before it
	// dials again.
	ErrBackingOff = errors.New("peer: backing off after failures")
	// ErrBroken: the connection broke while the request was in flight.
	ErrBroken = errors.New("peer: connection broken")
	// ErrClosed: Close was called.
	ErrClosed = errors.New("peer: closed")
	// ErrUnsupported: the peer does not serve the request's API at a version this
	// node may send (Options.Downgrade).
	ErrUnsupported = errors.New("peer: version not served")
)

// Options configure a Conn.
type Options struct {
	// ClientID is sent in every request header.
	ClientID string
	// DialTimeout bounds connecting (default 2s).
	DialTimeout time.Duration
	// BackoffMin and BackoffMax bound the wait before reconnecting after a failure
	// (defaults 50ms and 1s).
	BackoffMin, BackoffMax time.Duration
	// MaxResponseSize bounds a response frame (default 128 MiB).
	MaxResponseSize int32
	// Security secures each connection (zero: PLAINTEXT).
	Security Security
	// Downgrade maps an API key to the lowest version this node may send it at.
	// When set, each connection asks the peer its versions (ApiVersions) once it
	// is connected, and a request of one of these keys above the peer's highest
	// version is sent at that version instead — or fails (ErrUnsupported) if that is
	// below the lowest. This is what lets a node of a newer build talk to one of an
	// older build during a rolling upgrade; only list keys whose lower versions
	// carry the same meaning (fields a lower version lacks are left out).
	Downgrade map[int16]int16
}

// Security is how a connection to a node's listener is secured.
type Security struct {
	// TLS, if set, wraps each connection (ServerName defaults to the dialled host).
	TLS *tls.Config
	// SASL, if set, authenticates each connection (SaslHandshake v1 and
	// SaslAuthenticate v1) before its first request.
	SASL sasl.Mechanism
}

// Conn is a Kafka-protocol client connection to one address.
type Conn struct {
	addr string
	opts Options
	fmt  *kmsg.RequestFormatter

	mu struct {
		sync.Mutex
		link     *link
		closed   bool
		failures int
		retryAt  time.Time
	}
}

// New returns a Conn to addr (host:port); it connects on the first request.
func New(addr string, o Options) *Conn {
	if o.DialTimeout <= 0 {
		o.DialTimeout = 2 * time.Second
	}
	if o.BackoffMin <= 0 {
		o.BackoffMin = 50 * time.Millisecond
	}
	if o.BackoffMax < o.BackoffMin {
		o.BackoffMax = max(o.BackoffMin, time.Second)
	}
	if o.MaxResponseSize <= 0 {
		o.MaxResponseSize = 128 << 20
	}
	return &Conn{addr: addr, opts: o, fmt: kmsg.NewRequestFormatter(kmsg.FormatterClientID(o.ClientID))}
}

// Addr is the address the Conn dials.
func (c *Conn) Addr() string { return c.addr }

// Request sends req (its version set) and returns the response at the same
// version. If ctx ends first the connection is broken (a peer that does not answer
// in time is presumed gone) and ctx's error returned.
func (c *Conn) Request(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	resp, _, err := c.request(ctx, req, nil, nil)
	return resp, err
}

// RequestAbandoning is Request for a request whose deadline (ctx) says nothing
// about the peer's health — a client's own timeout on a request forwarded for it:
// if ctx ends first the request is abandoned (its answer, when it comes, is read
// and dropped) and the connection is kept for the other requests in flight on it,
// as Kafka's NetworkClient keeps a connection until a request outlives its
// request.timeout.ms. If gone is closed first the peer is presumed gone and the
// connection broken, as Request does when ctx ends.
func (c *Conn) RequestAbandoning(ctx context.Context, gone <-chan struct{}, req kmsg.Request) (kmsg.Response, error) {
	resp, _, err := c.request(ctx, req, nil, gone)
	return resp, err
}

// RequestPooled is Request for a response read into a buffer of pool (a follower's
// fetch: megabytes of records that the response's byte fields alias, kmsg decoding them
// without a copy). The response is valid until release is called, which gives the
// buffer back; release is nil when err is not.
func (c *Conn) RequestPooled(ctx context.Context, req kmsg.Request, pool *bufpool.Pool) (resp kmsg.Response, release func(), err error) {
	return c.request(ctx, req, pool, nil)
}

// request sends req and waits for its answer. With gone nil, ctx ending breaks the
// connection; else ctx ending abandons the request and gone closing breaks it.
func (c *Conn) request(ctx context.Context, req kmsg.Request, pool *bufpool.Pool, gone <-chan struct{}) (kmsg.Response, func(), error) {
	l, err := c.connect(ctx)
	if err != nil {
		return nil, nil, err
	}
	if err := c.negotiate(l, req); err != nil {
		return nil, nil, err
	}
	call := &pending{req: req, pool: pool, done: make(chan result, 1)}
	if err := l.send(c.fmt, call); err != nil {
		c.broke(l, err)
		return nil, nil, fmt.Errorf("%w: %s: %v", ErrBroken, c.addr, err)
	}
	select {
	case r := <-call.done:
		if r.err != nil {
			return nil, nil, r.err
		}
		c.succeeded()
		release := func() {}
		if r.buf != nil {
			release = func() { pool.Put(r.buf) }
		}
		return r.resp, release, nil
	case <-ctx.Done():
		if gone == nil {
			c.broke(l, fmt.Errorf("no response within the request's deadline: %w", ctx.Err()))
		}
		// Abandoned: the reader still takes the answer off the connection (call.done
		// has room for it). It may fill the buffer: it is not given back.
		return nil, nil, ctx.Err()
	case <-gone:
		c.broke(l, errors.New("no response before the peer was given up on"))
		return nil, nil, fmt.Errorf("%w: %s: given up on", ErrBroken, c.addr)
	}
}

// Close breaks the connection; later requests fail with ErrClosed.
func (c *Conn) Close() {
	c.mu.Lock()
	c.mu.closed = true
	l := c.mu.link
	c.mu.link = nil
	c.mu.Unlock()
	if l != nil {
		l.fail(ErrClosed)
	}
}

func (c *Conn) connect(ctx context.Context) (*link, error) {
	c.mu.Lock()
	switch {
	case c.mu.closed:
		c.mu.Unlock()
		return nil, ErrClosed
	case c.mu.link != nil:
		l := c.mu.link
		c.mu.Unlock()
		return l, nil
	}
	if wait := time.Until(c.mu.retryAt); wait > 0 {
		c.mu.Unlock()
		return nil, fmt.Errorf("%w: %s (retry in %v)", ErrBackingOff, c.addr, wait.Round(time.Millisecond))
	}
	// Dial under the lock: concurrent callers wait for this attempt rather than
	// opening connections of their own.
	defer c.mu.Unlock()
	d := net.Dialer{Timeout: c.opts.DialTimeout}
	nc, err := d.DialContext(ctx, "tcp", c.addr)
	var versions map[int16]int16
	if err == nil {
		nc, versions, err = c.handshake(ctx, nc)
	}
	if err != nil {
		c.backoffLocked()
		return nil, fmt.Errorf("%w: %s: %v", ErrBroken, c.addr, err)
	}
	l := &link{nc: nc, versions: versions, maxSize: c.opts.MaxResponseSize, inflight: make(chan *pending, 4096), dead: make(chan struct{})}
	c.mu.link = l
	go l.readLoop(func(err error) { c.broke(l, err) })
	return l, nil
}

// negotiate lowers req's version to what the peer on l serves, for the keys of
// Options.Downgrade.
func (c *Conn) negotiate(l *link, req kmsg.Request) error {
	lowest, ok := c.opts.Downgrade[req.Key()]
	if !ok {
		return nil
	}
	highest, served := l.versions[req.Key()]
	switch {
	case !served:
		return fmt.Errorf("%w: %s does not serve %s", ErrUnsupported, c.addr, kmsg.NameForKey(req.Key()))
	case highest < lowest:
		return fmt.Errorf("%w: %s serves %s up to v%d; this node sends v%d or later: upgrade that node",
			ErrUnsupported, c.addr, kmsg.NameForKey(req.Key()), highest, lowest)
	case req.GetVersion() > highest:
		req.SetVersion(highest)
	}
	return nil
}

// broke retires l after err and starts the backoff.
func (c *Conn) broke(l *link, err error) {
	l.fail(fmt.Errorf("%w: %s: %v", ErrBroken, c.addr, err))
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.link == l {
		c.mu.link = nil
		c.backoffLocked()
	}
}

func (c *Conn) backoffLocked() {
	c.mu.failures++
	wait := c.opts.BackoffMin << min(c.mu.failures-1, 16)
	c.mu.retryAt = time.Now().Add(min(wait, c.opts.BackoffMax))
}

func (c *Conn) succeeded() {
	c.mu.Lock()
	c.mu.failures = 0
	c.mu.Unlock()
}

type result struct {
	resp kmsg.Response
	buf  *[]byte // the pooled frame the response aliases, nil when not pooled
	err  error
}

type pending struct {
	req  kmsg.Request
	corr int32
	pool *bufpool.Pool // read the response into a buffer of it (RequestPooled)
	done chan result   // buffered, receives exactly one result
}

// link is one TCP connection.
type link struct {
	nc       net.Conn
	versions map[int16]int16 // the peer's highest version by API key (Options.Downgrade)
	maxSize  int32
	inflight chan *pending // in write order; the reader answers them in turn

	writeMu struct {
		sync.Mutex
		corr int32
		buf  []byte
	}
	failOnce sync.Once
	dead     chan struct{}
	err      error // set before dead is closed
}

// send writes one request and queues it for its response.
func (l *link) send(f *kmsg.RequestFormatter, p *pending) error {
	l.writeMu.Lock()
	defer l.writeMu.Unlock()
	select {
	case <-l.dead:
		return l.err
	default:
	}
	p.corr = l.writeMu.corr
	l.writeMu.corr++
	l.writeMu.buf = f.AppendRequest(l.writeMu.buf[:0], p.req, p.corr)
	select {
	case l.inflight <- p:
	case <-l.dead:
		return l.err
	}
	_, err := l.nc.Write(l.writeMu.buf)
	return err
}

// fail closes the connection and fails every request in flight.
func (l *link) fail(err error) {
	l.failOnce.Do(func() {
		l.err = err
		close(l.dead)
		l.nc.Close() // unblocks a writer stuck in Write
		// A writer that queued before dead was closed has done so by the time the
		// write lock is free; later ones see dead and give up.
		l.writeMu.Lock()
		defer l.writeMu.Unlock()
		for {
			select {
			case p := <-l.inflight:
				p.done <- result{err: err}
			default:
				return
			}
		}
	})
}

func (l *link) readLoop(onError func(error)) {
	r := bufio.NewReaderSize(l.nc, 64<<10)
	var size [4]byte
	for {
		if _, err := io.ReadFull(r, size[:]); err != nil {
			onError(err)
			return
		}
		n := int32(binary.BigEndian.Uint32(size[:]))
		if n < 4 || n > l.maxSize {
			onError(fmt.Errorf("response frame of %d bytes", n))
			return
		}
		var p *pending
		select {
		case p = <-l.inflight:
		case <-l.dead:
			return
		}
		var buf *[]byte
		var frame []byte
		if p.pool != nil && int(n) >= bufpool.MinClass {
			buf = p.pool.Get(int(n))
			frame = *buf
		} else {
			frame = make([]byte, n)
		}
		if _, err := io.ReadFull(r, frame); err != nil {
			p.done <- result{err: err}
			onError(err)
			return
		}
		resp, err := decodeResponse(p, frame)
		if err != nil {
			p.done <- result{err: err}
			onError(err)
			return
		}
		p.done <- result{resp: resp, buf: buf}
	}
}

// decodeResponse checks the correlation id, skips the header's tagged fields (for
// flexible versions other than ApiVersions, KIP-511) and decodes the body.
func decodeResponse(p *pending, frame []byte) (kmsg.Response, error) {
	corr := int32(binary.BigEndian.Uint32(frame))
	if corr != p.corr {
		return nil, fmt.Errorf("response correlation id %d, expected %d", corr, p.corr)
	}
	body := frame[4:]
	resp := p.req.ResponseKind()
	resp.SetVersion(p.req.GetVersion())
	if resp.IsFlexible() && resp.Key() != 18 {
		var err error
		if body, err = skipTags(body); err != nil {
			return nil, err
		}
	}
	if err := resp.ReadFrom(body); err != nil {
		return nil, fmt.Errorf("decode %s response: %w", kmsg.NameForKey(resp.Key()), err)
	}
	return resp, nil
}

func skipTags(b []byte) ([]byte, error) {
	count, n := binary.Uvarint(b)
	if n <= 0 {
		return nil, errors.New("bad response header tags")
	}
	b = b[n:]
	for range count {
		if _, n = binary.Uvarint(b); n <= 0 {
			return nil, errors.New("bad response header tag")
		}
		b = b[n:]
		size, n := binary.Uvarint(b)
		if n <= 0 || size > uint64(len(b)-n) {
			return nil, errors.New("bad response header tag size")
		}
		b = b[n+int(size):]
	}
	return b, nil
}
