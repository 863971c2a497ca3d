package testutil

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// ClusterOptions describe a cluster of real `samsa serve` processes.
type ClusterOptions struct {
	// Nodes is the number of nodes, with ids 1…Nodes (default 3).
	Nodes int
	// Roles gives process.roles by node id; a node not listed is
	// "broker,controller". The controllers are the voters.
	Roles map[int32]string
	// Overrides are extra properties for every node, after the cluster's own (so
	// they win). The cluster sets broker.session.timeout.ms=4000 and
	// broker.heartbeat.interval.ms=500 so that fencing tests run in seconds.
	Overrides []string
	// NodeOverrides are extra properties for one node (by id), after Overrides:
	// broker.rack, for example.
	NodeOverrides map[int32][]string
	// Metrics gives every node a metrics.listener on a fixed free port
	// (Node.MetricsAddr).
	Metrics bool
	// ProxyReplication gives every broker a REPLICATION listener, the one followers
	// fetch from (inter.broker.listener.name), advertised through a Proxy in front
	// of it (Node.ReplicationProxy): cutting it stops every follower fetching from
	// that broker while the broker stays in the quorum and in the clients' reach.
	ProxyReplication bool
	// ProxyControllerLinks puts a Proxy on every directed link between a node and a
	// controller: node i reaches controller j at Link(i, j).Addr (its
	// controller.quorum.voters says so), so a test can cut any link of the
	// metadata quorum, and the brokers' heartbeats and forwarded requests with it.
	ProxyControllerLinks bool
	// Binary is the samsa binary the nodes run (default SamsaBinary: this tree's);
	// BuildSamsaAt builds an older one, and UseBinary changes a node's before it
	// starts again (a rolling upgrade).
	Binary string
}

// Cluster is a set of running `samsa serve` processes forming one cluster: each
// has its own data directory, a PLAINTEXT listener (brokers) and a CONTROLLER
// listener (controllers) on free ports. Nodes can be killed (kill -9), paused
// (SIGSTOP/SIGCONT), stopped cleanly (SIGTERM: controlled shutdown) and started
// again on the same ports and data. When the test ends every node is killed and
// its log checked for data races.
type Cluster struct {
	t     testing.TB
	nodes map[int32]*Node
	links map[[2]int32]*Proxy
}

// Node is one process of a Cluster. Broker.Addr is its PLAINTEXT listener ("" for
// a controller-only node).
type Node struct {
	*Broker
	ID    int32
	Roles string
	// ControllerAddr is its controller listener ("" unless it is a controller).
	ControllerAddr string
	// MetricsAddr is its metrics.listener ("" unless ClusterOptions.Metrics).
	MetricsAddr string
	// ReplicationProxy is the proxy in front of its REPLICATION listener (nil unless
	// ClusterOptions.ProxyReplication and the node is a broker).
	ReplicationProxy *Proxy
}

// IsController reports whether the node votes in the metadata quorum.
func (n *Node) IsController() bool { return strings.Contains(n.Roles, "controller") }

// IsBroker reports whether the node serves clients.
func (n *Node) IsBroker() bool { return strings.Contains(n.Roles, "broker") }

// StartCluster starts the nodes concurrently (they wait for one another to form
// the quorum) and returns once every one logged that it is ready.
func StartCluster(t testing.TB, o ClusterOptions) *Cluster {
	t.Helper()
	if o.Nodes == 0 {
		o.Nodes = 3
	}
	c := &Cluster{t: t, nodes: map[int32]*Node{}, links: map[[2]int32]*Proxy{}}
	bin := o.Binary
	if bin == "" {
		bin = SamsaBinary(t)
	}
	for id := int32(1); id <= int32(o.Nodes); id++ {
		n := &Node{ID: id, Roles: "broker,controller", Broker: &Broker{Dir: t.TempDir(), t: t, bin: bin}}
		if r, ok := o.Roles[id]; ok {
			n.Roles = r
		}
		if n.IsBroker() {
			n.Addr = fmt.Sprintf("127.0.0.1:%d", clusterPort(t))
		}
		if n.IsController() {
			n.ControllerAddr = fmt.Sprintf("127.0.0.1:%d", clusterPort(t))
		}
		if o.Metrics {
			n.MetricsAddr = fmt.Sprintf("127.0.0.1:%d", clusterPort(t))
		}
		c.nodes[id] = n
	}
	for _, n := range c.sortedNodes() {
		if o.ProxyControllerLinks {
			for _, ctrl := range c.sortedNodes() {
				if ctrl.IsController() && ctrl.ID != n.ID {
					c.links[[2]int32{n.ID, ctrl.ID}] = StartProxy(t, ctrl.ControllerAddr)
				}
			}
		}
		var voters, listeners []string
		for _, ctrl := range c.sortedNodes() {
			if !ctrl.IsController() {
				continue
			}
			addr := ctrl.ControllerAddr
			if p := c.links[[2]int32{n.ID, ctrl.ID}]; p != nil {
				addr = p.Addr
			}
			voters = append(voters, fmt.Sprintf("%d@%s", ctrl.ID, addr))
		}
		var replication []string
		if n.IsBroker() {
			listeners = append(listeners, "PLAINTEXT://"+n.Addr)
			if o.ProxyReplication {
				addr := fmt.Sprintf("127.0.0.1:%d", clusterPort(t))
				n.ReplicationProxy = StartProxy(t, addr)
				listeners = append(listeners, "REPLICATION://"+addr)
				replication = []string{
					"advertised.listeners=PLAINTEXT://" + n.Addr + ",REPLICATION://" + n.ReplicationProxy.Addr,
					"inter.broker.listener.name=REPLICATION",
					"listener.security.protocol.map=PLAINTEXT:PLAINTEXT,REPLICATION:PLAINTEXT,CONTROLLER:PLAINTEXT",
				}
			}
		}
		if n.IsController() {
			listeners = append(listeners, "CONTROLLER://"+n.ControllerAddr)
		}
		n.Overrides = append([]string{
			"node.id=" + strconv.Itoa(int(n.ID)),
			"process.roles=" + n.Roles,
			"controller.quorum.voters=" + strings.Join(voters, ","),
			"listeners=" + strings.Join(listeners, ","),
			"controller.listener.names=CONTROLLER",
			"broker.session.timeout.ms=4000",
			"broker.heartbeat.interval.ms=500",
		}, replication...)
		n.Overrides = append(n.Overrides, o.Overrides...)
		if n.MetricsAddr != "" {
			n.Overrides = append(n.Overrides, "metrics.listener="+n.MetricsAddr)
		}
		n.Overrides = append(n.Overrides, o.NodeOverrides[n.ID]...)
	}
	t.Cleanup(c.cleanup)
	if err := c.startAll(c.sortedNodes()); err != nil {
		t.Fatal(err)
	}
	return c
}

// clusterPort picks a free port below the kernel's ephemeral range, so that no
// outgoing connection of another process takes it between this check and the node
// binding it (a cluster's ports are fixed: the voters name them), and one no test of
// this process was given before (see freshListener).
func clusterPort(t testing.TB) int {
	t.Helper()
	low := 32768
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if n, err := strconv.Atoi(f[0]); err == nil && n > 11000 {
				low = n
			}
		}
	}
	handedOut.Lock()
	defer handedOut.Unlock()
	for range 1000 {
		port := 10000 + rand.IntN(low-10000)
		if handedOut.ports[port] {
			continue
		}
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			continue
		}
		l.Close()
		handedOut.ports[port] = true
		return port
	}
	t.Fatal("no free port")
	return 0
}

func (c *Cluster) sortedNodes() []*Node {
	out := make([]*Node, 0, len(c.nodes))
	for _, n := range c.nodes {
		out = append(out, n)
	}
	slices.SortFunc(out, func(a, b *Node) int { return int(a.ID - b.ID) })
	return out
}

// Nodes returns every node, by id.
func (c *Cluster) Nodes() []*Node { return c.sortedNodes() }

// Node returns node id.
func (c *Cluster) Node(id int32) *Node { return c.nodes[id] }

// BrokerAddrs returns the PLAINTEXT addresses of the broker nodes, for clients.
func (c *Cluster) BrokerAddrs() []string {
	var out []string
	for _, n := range c.sortedNodes() {
		if n.IsBroker() {
			out = append(out, n.Addr)
		}
	}
	return out
}

// Link returns the proxy on the link from node from to controller to (nil unless
// ProxyControllerLinks).
func (c *Cluster) Link(from, to int32) *Proxy { return c.links[[2]int32{from, to}] }

// Isolate blackholes every proxied link from and to node id: it can reach no
// controller and no controller can reach it. Heal undoes it.
func (c *Cluster) Isolate(id int32) { c.setLinks(id, (*Proxy).Blackhole) }

// Heal lets every link of node id pass again.
func (c *Cluster) Heal(id int32) { c.setLinks(id, (*Proxy).Pass) }

func (c *Cluster) setLinks(id int32, set func(*Proxy)) {
	for k, p := range c.links {
		if k[0] == id || k[1] == id {
			set(p)
		}
	}
}

// UseBinary has node id run bin from its next start on.
func (c *Cluster) UseBinary(id int32, bin string) { c.nodes[id].bin = bin }

// StartAgain starts node id (stopped or killed) on its ports and data, and waits
// until it is ready.
func (c *Cluster) StartAgain(t testing.TB, id int32) {
	t.Helper()
	if err := c.startAll([]*Node{c.nodes[id]}); err != nil {
		t.Fatal(err)
	}
}

// TryStartAgain starts node id again and returns why it did not become ready: the
// process exited first (the error holds its log) or took longer than 30 s (it is
// killed). Nil once it is ready.
func (c *Cluster) TryStartAgain(id int32) error { return c.nodes[id].tryStart() }

// StopAll stops every node concurrently with SIGTERM and returns their exit
// errors joined.
func (c *Cluster) StopAll() error {
	var mu sync.Mutex
	var errs []error
	var wg sync.WaitGroup
	for _, n := range c.sortedNodes() {
		wg.Go(func() {
			if err := n.Stop(); err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("node %d: %w", n.ID, err))
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// RestartAll stops every node, then starts them all again.
func (c *Cluster) RestartAll(t testing.TB) {
	t.Helper()
	if err := c.StopAll(); err != nil {
		t.Fatal(err)
	}
	if err := c.startAll(c.sortedNodes()); err != nil {
		t.Fatal(err)
	}
}

// startAll starts nodes concurrently and waits until each is ready.
func (c *Cluster) startAll(nodes []*Node) error {
	errs := make([]error, len(nodes))
	var wg sync.WaitGroup
	for i, n := range nodes {
		wg.Go(func() {
			if err := n.tryStart(); err != nil {
				errs[i] = fmt.Errorf("node %d: %w", n.ID, err)
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// MetaClusterID returns the cluster.id stored in node id's meta.properties.
func (c *Cluster) MetaClusterID(id int32) (string, error) {
	b, err := os.ReadFile(filepath.Join(c.nodes[id].Dir, "meta.properties"))
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "cluster.id="); ok {
			return v, nil
		}
	}
	return "", fmt.Errorf("no cluster.id in %s/meta.properties", c.nodes[id].Dir)
}

func (c *Cluster) cleanup() {
	var wg sync.WaitGroup
	for _, n := range c.sortedNodes() {
		wg.Go(func() {
			n.Resume() // a paused process cannot die
			n.Kill()
		})
	}
	wg.Wait()
	for _, n := range c.sortedNodes() {
		full := n.FullLog() // a node started again has had several processes
		if strings.Contains(full, "WARNING: DATA RACE") {
			c.t.Errorf("node %d reported a data race:\n%s", n.ID, full)
		}
		if c.t.Failed() || KeepAlways {
			if path := KeepLog(c.t, fmt.Sprintf("node%d.log", n.ID), full); path != "" && c.t.Failed() {
				c.t.Logf("log of node %d kept in %s", n.ID, path)
			}
		}
		if c.t.Failed() {
			c.t.Logf("log of node %d (tail):\n%s", n.ID, Tail(n.Log(), 60))
		}
	}
}

// LogDir, when set (SAMSA_TEST_LOG_DIR), is where a failed test keeps whole logs:
// its nodes' (a cluster keeps only their tails in the test output) and whatever
// else it writes with KeepLog. With SAMSA_TEST_LOG_ALWAYS set too, a cluster keeps
// its nodes' logs when the test passes as well (a slow pass can tell as much as a
// failure); tests that keep logs of their own should follow it (KeepAlways).
var LogDir = os.Getenv("SAMSA_TEST_LOG_DIR")

// KeepAlways reports whether logs are kept when a test passes too
// (SAMSA_TEST_LOG_ALWAYS, with LogDir).
var KeepAlways = LogDir != "" && os.Getenv("SAMSA_TEST_LOG_ALWAYS") != ""

// KeepLog writes content to LogDir/<test name>/name and returns the file's path, or
// "" when LogDir is not set or the file cannot be written.
func KeepLog(t testing.TB, name, content string) string {
	if LogDir == "" {
		return ""
	}
	dir := filepath.Join(LogDir, strings.ReplaceAll(t.Name(), "/", "_"))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return ""
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		return ""
	}
	return path
}

// Tail returns the last lines of s.
func Tail(s string, lines int) string {
	all := strings.Split(s, "\n")
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return strings.Join(all, "\n")
}
