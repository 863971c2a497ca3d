package server

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/samsa-streaming/samsa/internal/bufpool"
)

// ErrClosed is returned by Start on a server that was closed.
var ErrClosed = errors.New("server: closed")

// Server accepts Kafka client connections on its listeners and serves them through
// the configured protocol.Handler. It is safe for concurrent use.
type Server struct {
	cfg  Config
	log  *slog.Logger
	done chan struct{} // closed by Close

	wg sync.WaitGroup // accept loops, connection goroutines and the frame trimmer

	frames bufpool.Pool // pooled request frames (frames.go)

	connIDs atomic.Uint64 // the last connection id given out

	rates  *connRates             // connection-rate quotas (connrate.go)
	limits atomic.Pointer[Limits] // the connection limits in force (SetLimits)

	mu struct {
		sync.Mutex
		started   bool
		closed    bool
		listeners []net.Listener
		conns     map[*conn]struct{}
		open      int            // connections counting towards MaxConnections
		perIP     map[string]int // open connections by remote address
		perLn     map[*Listener]int
		freed     chan struct{} // closed when a connection closes, for acceptors at a limit
	}
}

// New validates cfg, fills in defaults and returns a server that is not listening yet.
func New(cfg Config) (*Server, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, log: cfg.Logger, done: make(chan struct{}), rates: newConnRates(cfg)}
	s.limits.Store(&cfg.Limits)
	s.mu.conns = make(map[*conn]struct{})
	s.mu.perIP = make(map[string]int)
	s.mu.perLn = make(map[*Listener]int)
	return s, nil
}

// Start binds all listeners (port 0 allowed) and starts accepting connections. If any
// listener fails to bind, the ones already bound are closed and the error returned.
func (s *Server) Start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.closed {
		return ErrClosed
	}
	if s.mu.started {
		return errors.New("server: already started")
	}
	var listeners []net.Listener
	for _, l := range s.cfg.Listeners {
		ln, err := net.Listen("tcp", l.Addr)
		if err != nil {
			for _, l := range listeners {
				l.Close()
			}
			return fmt.Errorf("server: listen on %s: %w", l.Addr, err)
		}
		listeners = append(listeners, ln)
	}
	s.mu.started = true
	s.mu.listeners = listeners
	for i, ln := range listeners {
		l := &s.cfg.Listeners[i]
		s.log.Info("listening", "addr", ln.Addr().String(), "listener", l.Name, "tls", l.TLS != nil, "sasl", l.SASL != nil)
		s.wg.Add(1)
		go s.acceptLoop(ln, l)
	}
	s.wg.Add(1)
	go s.trimFrames()
	return nil
}

// FrameBytes reports the memory of pooled request frames (Config.ReusableFrames): the
// bytes of the buffers holding requests being read or handled, and of the free ones
// kept for the next requests (dropped after frameIdle).
func (s *Server) FrameBytes() (inUse, free int64) {
	return s.frames.InUse(), s.frames.Free()
}

// trimFrames drops pooled frame buffers that stayed free for frameIdle, until Close.
func (s *Server) trimFrames() {
	defer s.wg.Done()
	t := time.NewTicker(frameIdle / 2)
	defer t.Stop()
	for {
		select {
		case <-s.done:
			return
		case now := <-t.C:
			s.frames.Trim(now.Add(-frameIdle))
		}
	}
}

// Addrs returns the bound addresses, in Listeners order (nil before Start).
func (s *Server) Addrs() []net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	addrs := make([]net.Addr, 0, len(s.mu.listeners))
	for _, ln := range s.mu.listeners {
		addrs = append(addrs, ln.Addr())
	}
	return addrs
}

// Close stops accepting, closes every connection and waits for all of the server's
// goroutines to exit. Responses not yet written are dropped. Close is idempotent.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.mu.closed {
		s.mu.Unlock()
		s.wg.Wait()
		return nil
	}
	s.mu.closed = true
	close(s.done)
	var errs []error
	for _, ln := range s.mu.listeners {
		if err := ln.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
			errs = append(errs, err)
		}
	}
	conns := make([]*conn, 0, len(s.mu.conns))
	for c := range s.mu.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()

	for _, c := range conns {
		c.close()
	}
	if s.cfg.Closed != nil {
		s.cfg.Closed()
	}
	s.wg.Wait()
	return errors.Join(errs...)
}

// acceptLoop accepts connections until the listener is closed. Transient accept
// errors (such as running out of file descriptors) back off up to a second, as
// net/http does.
func (s *Server) acceptLoop(ln net.Listener, l *Listener) {
	defer s.wg.Done()
	var backoff time.Duration
	for {
		if !s.awaitSlot(l) {
			return
		}
		nc, err := ln.Accept()
		if err != nil {
			select {
			case <-s.done:
				return
			default:
			}
			if errors.Is(err, net.ErrClosed) {
				return
			}
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			s.log.Warn("accept failed", "addr", ln.Addr().String(), "err", err, "retry_in", backoff)
			t := time.NewTimer(backoff)
			select {
			case <-s.done:
				t.Stop()
				return
			case <-t.C:
			}
			continue
		}
		backoff = 0
		if d, quota := s.rates.accepted(l, s.limits.Load().MaxConnectionRate, time.Now()); d > 0 {
			s.throttled(l, quota, d)
			if !s.wait(d) {
				nc.Close()
				return
			}
		}
		s.serve(nc, l)
	}
}

// wait waits d; false if the server closed meanwhile.
func (s *Server) wait(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-s.done:
		return false
	}
}

// throttled reports a connection a connection-rate quota delayed or closed.
func (s *Server) throttled(l *Listener, quota string, d time.Duration) {
	s.log.Debug("connection rate quota reached", "listener", l.Name, "quota", quota, "delay", d)
	if s.cfg.ConnectionThrottled != nil {
		s.cfg.ConnectionThrottled(l.Name, quota, d)
	}
}

// overIPRate reports whether a new connection from nc's address is over that
// address's connection_creation_rate; if so it is closed, unread, after the
// throttle time (Kafka's delayed close of a throttled connection).
func (s *Server) overIPRate(nc net.Conn, l *Listener, remote string) bool {
	if s.cfg.IPConnectionRate == nil {
		return false
	}
	ip, err := netip.ParseAddr(remote)
	if err != nil {
		return false
	}
	ip = ip.Unmap()
	limit, ok := s.cfg.IPConnectionRate(ip)
	if !ok {
		return false
	}
	d := s.rates.fromIP(l, ip, limit, time.Now())
	if d <= 0 {
		return false
	}
	s.throttled(l, "ip", d)
	s.mu.Lock()
	if s.mu.closed {
		s.mu.Unlock()
		nc.Close()
		return true
	}
	s.wg.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.wg.Done()
		s.wait(d)
		nc.Close()
	}()
	return true
}

// SetLimits changes the broker-wide connection limits in force — max.connections,
// max.connections.per.ip with its overrides, max.connection.creation.rate — as
// Kafka applies their dynamic updates; the quota windows and the setup timeout stay
// those the server started with. A
// listener waiting at max.connections looks again at once; open connections are
// not closed.
func (s *Server) SetLimits(lim Limits) {
	s.limits.Store(&lim)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.freed != nil {
		close(s.mu.freed)
		s.mu.freed = nil
	}
}

// awaitSlot waits until listener l may accept a connection under max.connections
// (the listener's own and the broker-wide one); false when the server closes.
func (s *Server) awaitSlot(l *Listener) bool {
	logged := false
	for {
		maxConns := s.limits.Load().MaxConnections
		s.mu.Lock()
		full := l.MaxConnections > 0 && s.mu.perLn[l] >= l.MaxConnections ||
			!l.Exempt && maxConns > 0 && s.mu.open >= maxConns
		if !full {
			s.mu.Unlock()
			return true
		}
		if s.mu.freed == nil {
			s.mu.freed = make(chan struct{})
		}
		freed := s.mu.freed
		s.mu.Unlock()
		if !logged {
			s.log.Warn("connection limit reached; not accepting until a connection closes",
				"listener", l.Name, "max.connections", maxConns, "listener_max", l.MaxConnections)
			logged = true
		}
		select {
		case <-freed:
		case <-s.done:
			return false
		}
	}
}

// ipLimit is max.connections.per.ip for one address (0: none).
func (s *Server) ipLimit(ip string) int {
	lim := s.limits.Load()
	if n, ok := lim.PerIPOverrides[ip]; ok {
		return n
	}
	return lim.MaxConnectionsPerIP
}

// remoteIP is the address part of a connection's remote address.
func remoteIP(nc net.Conn) string {
	host, _, err := net.SplitHostPort(nc.RemoteAddr().String())
	if err != nil {
		return nc.RemoteAddr().String()
	}
	return host
}

// serve registers a new connection and starts its goroutines.
func (s *Server) serve(nc net.Conn, l *Listener) {
	ip := remoteIP(nc)
	if s.overIPRate(nc, l, ip) {
		return
	}
	s.mu.Lock()
	if s.mu.closed {
		s.mu.Unlock()
		nc.Close()
		return
	}
	if limit := s.ipLimit(ip); limit > 0 && s.mu.perIP[ip] >= limit {
		s.mu.Unlock()
		s.log.Info("too many connections from one address; closing the new one",
			"remote", nc.RemoteAddr().String(), "listener", l.Name, "max.connections.per.ip", limit)
		nc.Close()
		return
	}
	c := newConn(s, nc, l, ip)
	s.mu.conns[c] = struct{}{}
	s.mu.perIP[ip]++
	s.mu.perLn[l]++
	if !l.Exempt {
		s.mu.open++
	}
	s.wg.Add(2)
	s.mu.Unlock()

	s.log.Debug("connection accepted", "remote", c.remote, "local", nc.LocalAddr().String())
	go c.readLoop()
	go c.writeLoop()
}

// forget removes a closed connection from the registry.
func (s *Server) forget(c *conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.mu.conns[c]; !ok {
		return
	}
	delete(s.mu.conns, c)
	if s.mu.perIP[c.ip]--; s.mu.perIP[c.ip] <= 0 {
		delete(s.mu.perIP, c.ip)
	}
	s.mu.perLn[c.listener]--
	if !c.listener.Exempt {
		s.mu.open--
	}
	if s.mu.freed != nil {
		close(s.mu.freed)
		s.mu.freed = nil
	}
}

// Connections reports the number of open connections.
func (s *Server) Connections() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.mu.conns)
}
