package cluster

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/samsa-streaming/samsa/internal/testutil"
)

var (
	faultsDuration = flag.Duration("faults.duration", 40*time.Second,
		"how long each TestRandomFaults* test injects faults (minutes for a soak)")
	faultsSeed = flag.Uint64("faults.seed", 0,
		"the seed of the TestRandomFaults* schedules (0: from the clock; each run logs its seed)")
	// Full and dead disks need a small file system of their own for each node
	// (mounting one needs root); without it the schedule leaves them out and says so.
	faultsFullDisk = flag.Bool("faults.full-disk", true,
		"let TestRandomFaults and TestRandomFaultsShareGroup fill a node's second log directory now and then")
	// On in make test's short run since 2026-12-04: it found the follower-append race
	// that replica.Partition.roleMu fixes, a flush that took a full disk offline and
	// (likely) two controller entries built from one image; 20 short runs passed
	// after those fixes.
	faultsDeadDisk = flag.Bool("faults.dead-disk", true,
		"let TestRandomFaults and TestRandomFaultsShareGroup kill a node's second log directory's disk now and then (with -faults.full-disk)")
)

// faultKind is one way a node fails in the random fault schedule (runFaults).
type faultKind int

const (
	faultKill        faultKind = iota // kill -9, started again on repair
	faultStop                         // SIGTERM (controlled shutdown), started again on repair
	faultPause                        // SIGSTOP, SIGCONT on repair
	faultReplication                  // its replication listener blackholed: followers cannot fetch from it
	faultResetLinks                   // its replication connections reset and refused
	faultQuorum                       // cut off from the metadata quorum both ways
	faultSlowLinks                    // 20–80 ms added to its replication listener's traffic and to every link to it as a controller
	faultDiskFull                     // the small disk holding some of its partitions filled (faultPlan.SmallDisks)
	faultDiskDead                     // that disk dead (EIO for everything); on repair the node is killed, the disk mounted again, the node started
	faultKinds
)

func (k faultKind) String() string {
	return [...]string{"kill -9", "SIGTERM", "SIGSTOP", "replication blackholed", "replication reset",
		"cut off from the quorum", "slow links", "disk full", "disk dead"}[k]
}

// fault is a fault in force on one node.
type fault struct {
	node    int32
	kind    faultKind
	since   time.Time
	delay   time.Duration // faultSlowLinks
	ballast string        // faultDiskFull: the file filling the disk
}

// faultPlan says what runFaults may do besides the faults every node can have.
type faultPlan struct {
	// SmallDisks are, by node, a small file system holding some of its partitions
	// (its second log directory): faultDiskFull fills it, faultDiskDead kills it.
	SmallDisks map[int32]*testutil.DyingDisk
	// Other, when set, is offered one step in six (with the schedule's random
	// source) and returns what it did, or "" to leave the step to the nodes.
	Other func(*rand.Rand) string
}

// TestRandomFaults hits a three-node cluster under an acks=all load and two consumer
// groups committing synchronously (classic and KIP-848) with a seeded random sequence
// of faults, one or two nodes at a time, for -faults.duration: kill -9, controlled
// shutdown, SIGSTOP, its followers' fetches blackholed or reset, cut off from the
// metadata quorum, slow links, the disk holding some of its partitions full or dead
// (one node's at a time: as after a power cut, a dead disk loses what was not yet
// written back, and acks=all promises a record to the ISR, not to two disks). Each
// lasts from a fraction of a second to a few seconds and can overlap another node's,
// so nodes fail while others catch up, elect, truncate (on a full disk too), roll
// segments or compact (the topic has small segments and is compacted eagerly). Then
// every fault is repaired, every replica rejoins the ISR, writes go on, and the
// history check holds (every acknowledged record present once, in order, at its
// offset), as do the metadata invariants watched throughout; each group read every
// offset, never lost an acknowledged commit, and commits the ends. The seed is
// logged; -faults.seed replays a schedule (the timing of the processes still varies).
func TestRandomFaults(t *testing.T) {
	t.Parallel()
	const topic, partitions = "battered", 6
	disks, nodeDirs, flush := smallDisks(t)
	c := testutil.StartCluster(t, testutil.ClusterOptions{ProxyControllerLinks: true, ProxyReplication: true, NodeOverrides: nodeDirs,
		Overrides: append(append([]string{"min.insync.replicas=2", "log.cleaner.backoff.ms=500"}, flush...), replicationOverrides...)})
	inv := watchInvariants(t, c)
	admin := newNodeClient(t, c.Node(1).Addr)
	createTopic(t, admin, topic, partitions, 3)
	// Small segments and eager compaction, so that faults strike nodes mid-roll and
	// mid-compaction; the load's keys are unique, so compaction keeps every record.
	// Segments roll every 5 s too: when the faults keep two nodes down for much of a
	// 40-second run, the acks=all load writes too little to fill one.
	for _, kv := range [][2]string{{"segment.bytes", "262144"}, {"segment.ms", "5000"}, {"cleanup.policy", "compact"},
		{"min.cleanable.dirty.ratio", "0.01"}} {
		alterTopicConfig(t, admin, topic, kv[0], kv[1])
	}
	l := startLoadAt(t, c, topic, 500) // the faults matter here, not the rate
	l.waitAcks(t, 1000, "acknowledged records before the first fault")
	// Two groups read it, committing synchronously: one on the classic protocol, one
	// on KIP-848's (the broker assigns).
	type reader struct {
		group    string
		consumer *groupConsumer
		watch    *committedWatch
	}
	var readers []reader
	for group, opts := range map[string][]kgo.Opt{"battered-classic": nil, "battered-kip848": {kgo.ServerSideBalancer()}} {
		readers = append(readers, reader{group, startGroupConsumer(t, c, group, topic, opts...), watchCommitted(t, c, group, topic)})
	}

	runFaults(t, c, *faultsDuration, faultPlan{SmallDisks: disks})

	cl := newNodeClient(t, c.Node(1).Addr)
	waitFullISR(t, cl, topic, partitions, 90*time.Second)
	l.waitAcks(t, 1000, "writes after every fault was repaired")
	h := l.stop(t)
	ends := h.check(t, c, topic)
	inv.check()

	// Each group read every offset of every partition at least once and committed the
	// ends; no acknowledged commit was lost on the way (committedWatch, and the
	// consumer's own check that it never went back below one).
	adm := kadm.NewClient(cl.cl)
	for _, r := range readers {
		testutil.WaitFor(t, 90*time.Second, func() bool {
			acked, _ := r.consumer.ackedCommits()
			for p, end := range ends {
				if acked[p] < end {
					return false
				}
			}
			return true
		}, r.group+" committing the end of every partition")
		problems := append(r.consumer.stop(t), r.watch.stop()...)
		read := 0
		for p, end := range ends {
			read += len(r.consumer.processed[p])
			for o := range end {
				if !r.consumer.processed[p][o] {
					problems = append(problems, fmt.Sprintf("%s never read %s-%d offset %d (end %d)", r.group, topic, p, o, end))
					break
				}
			}
		}
		resp, err := adm.FetchOffsets(ctxT(t, 10*time.Second), r.group)
		if err != nil {
			t.Fatal(err)
		}
		for p, end := range ends {
			if o, ok := resp.Lookup(topic, p); !ok || o.Err != nil || o.At != end {
				problems = append(problems, fmt.Sprintf("%s: %s-%d committed offset %+v, want the end %d", r.group, topic, p, o, end))
			}
		}
		for _, p := range problems {
			t.Error(p)
		}
		t.Logf("group %s read %d offsets, each at least once, and committed the ends %v", r.group, read, ends)
	}
	for _, n := range c.Nodes() {
		cleaned := strings.Count(n.FullLog(), `msg="cleaned log"`)
		if cleaned == 0 {
			t.Errorf("node %d never compacted a log: the faults never met a compaction", n.ID)
		}
		t.Logf("node %d compacted logs %d times", n.ID, cleaned)
	}
}

func delayNote(f fault) string {
	if f.kind != faultSlowLinks {
		return ""
	}
	return fmt.Sprintf(" (%v)", f.delay)
}

// inject puts fault f in force and returns it (with its ballast).
func inject(t *testing.T, c *testutil.Cluster, plan faultPlan, f fault) fault {
	t.Helper()
	n := c.Node(f.node)
	switch f.kind {
	case faultKill:
		n.Kill()
	case faultStop:
		if err := n.Stop(); err != nil { // with the quorum cut it may take its 15 s and be killed
			t.Logf("node %d: %v; its log ends:\n%s", f.node, err, testutil.Tail(strings.TrimSpace(n.Log()), 8))
		}
	case faultPause:
		n.Pause()
	case faultReplication:
		n.ReplicationProxy.Blackhole()
	case faultResetLinks:
		n.ReplicationProxy.Cut()
	case faultQuorum:
		c.Isolate(f.node)
	case faultSlowLinks:
		slowLinks(c, f.node, f.delay)
	case faultDiskFull:
		f.ballast = testutil.FillDisk(t, plan.SmallDisks[f.node].Dir, 0)
	case faultDiskDead:
		plan.SmallDisks[f.node].Fail(t)
	}
	return f
}

// slowLinks adds d to every chunk through node's replication listener and to every
// link to it as a controller (0 removes it).
func slowLinks(c *testutil.Cluster, node int32, d time.Duration) {
	c.Node(node).ReplicationProxy.Delay(d)
	for _, o := range c.Nodes() {
		if p := c.Link(o.ID, node); p != nil {
			p.Delay(d)
		}
	}
}

// repair ends fault f.
func repair(t *testing.T, c *testutil.Cluster, plan faultPlan, f fault) {
	t.Helper()
	n := c.Node(f.node)
	switch f.kind {
	case faultKill, faultStop:
		c.StartAgain(t, f.node)
	case faultPause:
		n.Resume()
	case faultReplication, faultResetLinks:
		n.ReplicationProxy.Pass()
	case faultQuorum:
		c.Heal(f.node)
	case faultSlowLinks:
		slowLinks(c, f.node, 0)
	case faultDiskFull:
		if err := os.Remove(f.ballast); err != nil {
			t.Fatal(err)
		}
	case faultDiskDead:
		n.Kill()
		plan.SmallDisks[f.node].Repair(t)
		c.StartAgain(t, f.node)
	}
}

// TestRandomFaultsExactlyOnce runs the consume-transform-produce pipeline of
// TestExactlyOnceAcrossFailover (three GroupTransactSession processes) through the
// random schedule of TestRandomFaults, which here also kills a worker with kill -9
// and starts it again now and then: the output read_committed holds every input
// record exactly once.
func TestRandomFaultsExactlyOnce(t *testing.T) {
	t.Parallel()
	c := testutil.StartCluster(t, testutil.ClusterOptions{ProxyControllerLinks: true, ProxyReplication: true, Overrides: txnOverrides})
	inv := watchInvariants(t, c)
	cl := newNodeClient(t, c.Node(1).Addr)
	p := testutil.NewEOSPipeline(t, c.BrokerAddrs(), "eos-random")
	createTopic(t, cl, p.In, 3, 3)
	createTopic(t, cl, p.Out, 3, 3)
	workers := []string{"a", "b", "c"}
	for _, w := range workers {
		p.Start(w)
	}
	in, err := kgo.NewClient(kgo.SeedBrokers(c.BrokerAddrs()...), kgo.RecordDeliveryTimeout(60*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	n := max(int(faultsDuration.Seconds())*500, 1000) // fed in 20 chunks over the schedule
	fed := p.Feed(in, n, *faultsDuration/20, 90*time.Second)
	runFaults(t, c, *faultsDuration, faultPlan{Other: func(rng *rand.Rand) string {
		w := workers[rng.IntN(len(workers))]
		p.Restart(w)
		return "worker " + w + ": kill -9, started again"
	}})
	waitFullISR(t, cl, p.In, 3, 90*time.Second)
	if err := <-fed; err != nil {
		p.Fatalf("producing the input: %v", err)
	}
	adm := kadm.NewClient(in)
	p.WaitCaughtUp(adm, 120*time.Second)
	p.StopAll()
	p.WaitSettled(adm, 60*time.Second)
	out := testutil.ReadAll(t, c.BrokerAddrs(), p.Out, true, 60*time.Second)
	if len(out) != n {
		logTxnState(t, adm, "eos-a", "eos-b", "eos-c")
		logShortOutput(t, adm, c.BrokerAddrs(), p.Out, out, n)
	}
	testutil.CheckExactlyOnce(t, out, n)
	t.Logf("output read_committed: each of the %d input records exactly once", n)
	inv.check()
}

// TestRandomFaultsShareGroup: three KIP-932 share consumers accept every record a
// producer writes (acks=all) while the random schedule of TestRandomFaults runs, its
// full and dead disks included (the share state's partitions, like the topic's, lie
// on either of a node's two log directories). The
// rules of TestClusterShareGroupStateFailover hold throughout (the share ledger's
// check: no record's ACCEPT confirmed twice, every acknowledged record delivered),
// every record is done in the end (each share-partition start offset at its high
// watermark), and the history check holds. The consumers also release one or two
// records of one poll in eight and renew the records of another one in eight before
// accepting them, their choices drawn from the schedule's seed: a confirmed RELEASE
// brings its record back with a higher delivery count, and before the first fault
// every acknowledgement is confirmed, and a consumer of another group accepts
// records it renewed after their first locks ended (the ledger's rules,
// shareLedger.check, and renewPastDeadline).
func TestRandomFaultsShareGroup(t *testing.T) {
	t.Parallel()
	disks, nodeDirs, flush := smallDisks(t)
	c := testutil.StartCluster(t, testutil.ClusterOptions{ProxyControllerLinks: true, ProxyReplication: true, NodeOverrides: nodeDirs,
		// renewPastDeadline's group locks records for a few seconds.
		Overrides: slices.Concat(shareOverrides, []string{"group.share.min.record.lock.duration.ms=1000"}, flush, replicationOverrides)})
	inv := watchInvariants(t, c)
	const topic, partitions, groupID = "shared-battered", 6, "battered-share"
	admin := newNodeClient(t, c.Node(1).Addr)
	createTopic(t, admin, topic, partitions, 3)
	setShareGroupConfig(t, c, admin, groupID, "share.auto.offset.reset", "earliest")
	led := newShareLedger()
	addrs := c.BrokerAddrs()
	// The gate is never armed: the consumers acknowledge as they go, now and then
	// releasing or renewing records first (shareMix, drawing from the schedule's seed).
	consumers := startShareConsumers(t, addrs, groupID, topic, led, &holdGate{}, &shareMix{seed: faultSeed(t)})
	renewed := renewPastDeadline(t, c, admin, topic)
	p := startShareProducer(t, addrs, topic, led)
	led.waitConfirmed(t, 1000, 90*time.Second, "1000 records accepted before the first fault")
	renewed()
	led.checkClean(t, "before the first fault")

	runFaults(t, c, *faultsDuration, faultPlan{SmallDisks: disks})

	waitFullISR(t, admin, topic, partitions, 90*time.Second)
	led.waitConfirmed(t, led.confirmedCount()+500, 120*time.Second, "records accepted after every fault was repaired")
	endShareTest(t, c, p, consumers, led, inv, addrs, groupID, topic, partitions)
}

// smallDisks gives each of the three nodes a small disk of its own as a second log
// directory (the metadata log stays in the first), which the fault schedule fills or
// kills now and then (faultPlan.SmallDisks), and returns the log.dirs override of each
// node and the overrides every node needs beside them.
func smallDisks(t *testing.T) (disks map[int32]*testutil.DyingDisk, nodeDirs map[int32][]string, flush []string) {
	disks, nodeDirs = map[int32]*testutil.DyingDisk{}, map[int32][]string{}
	for id := int32(1); id <= 3 && *faultsFullDisk; id++ {
		small, err := testutil.TryDyingDisk(t, 256)
		if err != nil {
			// Without loop devices a tmpfs still fills up; it cannot die.
			dir, terr := testutil.TrySmallDisk(t, "256m")
			if terr != nil {
				t.Logf("no full or dead disks in this run: mounting a small file system needs root: %v; %v", err, terr)
				break
			}
			t.Logf("node %d: no dead disks in this run (a loop-mounted ext4: %v); its small disk is a tmpfs", id, err)
			small = &testutil.DyingDisk{Dir: dir}
		}
		disks[id], nodeDirs[id] = small, []string{"log.dirs=" + t.TempDir() + "," + small.Dir}
	}
	// A dead disk loses what was not written back, as a power cut does: every append
	// is flushed, so that it loses nothing acknowledged. Otherwise a partition's last
	// in-sync replica (the others not yet caught up after a fault) could come back from
	// a dead disk without records that only it had in sync, which replication does not
	// promise to survive (docs/replication.md).
	if len(disks) > 0 && *faultsDeadDisk {
		flush = []string{"log.flush.interval.messages=1"}
	}
	return disks, nodeDirs, flush
}

// faultSeeds are the seeds of the tests running now, by test name (faultSeed).
var faultSeeds struct {
	sync.Mutex
	byTest map[string]uint64
}

// faultSeed is t's seed: -faults.seed, or one from the clock, logged the first time t
// asks. The fault schedule draws from it, and so does what else a test randomizes
// (the share consumers' acknowledgements), so that -faults.seed replays both.
func faultSeed(t *testing.T) uint64 {
	t.Helper()
	faultSeeds.Lock()
	defer faultSeeds.Unlock()
	if seed, ok := faultSeeds.byTest[t.Name()]; ok {
		return seed
	}
	seed := *faultsSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	if faultSeeds.byTest == nil {
		faultSeeds.byTest = map[string]uint64{}
	}
	faultSeeds.byTest[t.Name()] = seed
	t.Logf("fault schedule seed %d (replay: go test ./test/cluster -run '^%s$' -args -faults.seed=%d)", seed, t.Name(), seed)
	return seed
}

// runFaults injects a seeded random schedule of faults into c for d, one or two nodes
// at a time: a step injects a fault on a node that has none while fewer than two do
// (more often than it repairs), or repairs the oldest fault; steps are 0.2–3 s apart.
// plan adds faults (see faultPlan). Every fault is repaired before runFaults returns;
// the schedule is logged and kept with the test's logs.
func runFaults(t *testing.T, c *testutil.Cluster, d time.Duration, plan faultPlan) {
	t.Helper()
	seed := faultSeed(t)
	rng := rand.New(rand.NewPCG(seed, seed>>1|1))
	var active []fault
	var schedule []string
	free := func() []int32 {
		var ids []int32
		for _, n := range c.Nodes() {
			if !slices.ContainsFunc(active, func(f fault) bool { return f.node == n.ID }) {
				ids = append(ids, n.ID)
			}
		}
		return ids
	}
	start := time.Now()
	note := func(format string, args ...any) {
		line := fmt.Sprintf("%6.2fs ", time.Since(start).Seconds()) + fmt.Sprintf(format, args...)
		schedule = append(schedule, line)
		t.Log(line)
	}
	injected := map[string]int{}
	for time.Since(start) < d {
		if plan.Other != nil && rng.IntN(6) == 0 {
			if what := plan.Other(rng); what != "" {
				note("%s", what)
				injected[what]++
				time.Sleep(time.Duration(200+rng.IntN(2800)) * time.Millisecond)
				continue
			}
		}
		if len(active) < 2 && (len(active) == 0 || rng.IntN(3) > 0) {
			ids := free()
			f := fault{node: ids[rng.IntN(len(ids))], since: time.Now()}
			kinds := faultKinds
			switch disk := plan.SmallDisks[f.node]; {
			case disk == nil:
				kinds = faultDiskFull // the kinds before it
			case !*faultsDeadDisk || !disk.CanFail():
				kinds = faultDiskDead
			}
			f.kind = faultKind(rng.IntN(int(kinds)))
			if f.kind == faultDiskDead && slices.ContainsFunc(active, func(o fault) bool { return o.kind == faultDiskDead }) {
				f.kind = faultDiskFull // one dead disk at a time
			}
			if f.kind == faultSlowLinks {
				f.delay = time.Duration(20+rng.IntN(61)) * time.Millisecond
			}
			note("node %d: %v%s (faulted nodes now %d)", f.node, f.kind, delayNote(f), len(active)+1)
			f = inject(t, c, plan, f)
			injected[f.kind.String()]++
			active = append(active, f)
		} else {
			f := active[0]
			active = active[1:]
			note("node %d: repair %v after %v", f.node, f.kind, time.Since(f.since).Round(time.Millisecond))
			repair(t, c, plan, f)
		}
		time.Sleep(time.Duration(200+rng.IntN(2800)) * time.Millisecond)
	}
	for _, f := range active {
		note("node %d: repair %v after %v (end of the schedule)", f.node, f.kind, time.Since(f.since).Round(time.Millisecond))
		repair(t, c, plan, f)
	}
	t.Logf("faults injected: %v", injected)
	testutil.KeepLog(t, "fault-schedule", strings.Join(schedule, "\n"))
}
