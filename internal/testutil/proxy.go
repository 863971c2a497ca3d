package testutil

import (
	"net"
	"sync"
	"testing"
	"time"
)

// LinkMode is what a Proxy does with the traffic of its link.
type LinkMode int

const (
	// Pass forwards bytes both ways.
	Pass LinkMode = iota
	// Blackhole stops forwarding without closing anything, as a network partition
	// does to TCP: bytes already sent wait in buffers, writers eventually block, and
	// nothing is lost — when the link passes again the streams resume where they
	// stopped. New connections are accepted and stall too. Peers notice only through
	// their own timeouts.
	Blackhole
	// Cut closes every connection of the link and refuses new ones (accepted and
	// closed at once), as a peer whose process or port went away.
	Cut
)

// Proxy is a fault-injecting TCP proxy for one link: it listens on 127.0.0.1 and
// forwards each accepted connection to its target. Tests put one between two nodes
// (see Cluster) and switch its mode to cut the link. Safe for concurrent use.
type Proxy struct {
	Addr   string // where to connect to reach the target through the proxy
	target string
	ln     net.Listener

	mu    sync.Mutex
	cond  *sync.Cond // signalled when mode or delay change
	mode  LinkMode
	delay time.Duration
	conns map[net.Conn]struct{}
	done  bool
	wg    sync.WaitGroup
}

// StartProxy starts a proxy to target and closes it when the test ends.
func StartProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := freshListener()
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{Addr: ln.Addr().String(), target: target, ln: ln, conns: map[net.Conn]struct{}{}}
	p.cond = sync.NewCond(&p.mu)
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.Close)
	return p
}

// Mode returns the link's current mode.
func (p *Proxy) Mode() LinkMode {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mode
}

// Pass makes the link forward again (streams stalled by Blackhole resume).
func (p *Proxy) Pass() { p.setMode(Pass) }

// Blackhole stalls the link (see the Blackhole mode).
func (p *Proxy) Blackhole() { p.setMode(Blackhole) }

// Cut closes the link's connections and refuses new ones until Pass.
func (p *Proxy) Cut() {
	p.setMode(Cut)
	p.mu.Lock()
	conns := make([]net.Conn, 0, len(p.conns))
	for c := range p.conns {
		conns = append(conns, c)
	}
	p.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
}

// Delay adds d of latency to every chunk forwarded from now on (0 removes it).
func (p *Proxy) Delay(d time.Duration) {
	p.mu.Lock()
	p.delay = d
	p.mu.Unlock()
}

func (p *Proxy) setMode(m LinkMode) {
	p.mu.Lock()
	p.mode = m
	p.cond.Broadcast()
	p.mu.Unlock()
}

// Close stops the proxy and closes every connection.
func (p *Proxy) Close() {
	p.mu.Lock()
	if p.done {
		p.mu.Unlock()
		return
	}
	p.done = true
	p.cond.Broadcast()
	p.mu.Unlock()
	p.ln.Close()
	p.Cut()
	p.wg.Wait()
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.mode == Cut || p.done {
			p.mu.Unlock()
			c.Close()
			continue
		}
		p.mu.Unlock()
		up, err := net.DialTimeout("tcp", p.target, 2*time.Second)
		if err != nil {
			c.Close()
			continue
		}
		if !p.track(c, up) {
			c.Close()
			up.Close()
			continue
		}
		p.wg.Add(2)
		go p.pump(c, up)
		go p.pump(up, c)
	}
}

func (p *Proxy) track(conns ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done || p.mode == Cut {
		return false
	}
	for _, c := range conns {
		p.conns[c] = struct{}{}
	}
	return true
}

func (p *Proxy) untrack(conns ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range conns {
		delete(p.conns, c)
	}
}

// pump copies src to dst chunk by chunk, honouring the mode before each write.
func (p *Proxy) pump(src, dst net.Conn) {
	defer p.wg.Done()
	defer func() {
		src.Close()
		dst.Close()
		p.untrack(src, dst)
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			delay, ok := p.waitPassing()
			if !ok {
				return
			}
			if delay > 0 {
				time.Sleep(delay)
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return // EOF or a closed connection: both directions end
		}
	}
}

// waitPassing blocks while the link is blackholed; false when it is cut or closed.
func (p *Proxy) waitPassing() (time.Duration, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for p.mode == Blackhole && !p.done {
		p.cond.Wait()
	}
	return p.delay, p.mode == Pass && !p.done
}
