package share

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/samsa-streaming/samsa/internal/clock"
)

// memStore is a Store in memory whose writes can be made to fail.
type memStore struct {
	mu     sync.Mutex
	snaps  map[Key]Snapshot
	fail   error // returned by the next writes while set
	epochs map[Key]int32
	writes int
}

func (s *memStore) Read(_ context.Context, k Key, leaderEpoch int32) (Snapshot, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.epochs[k] = max(s.epochs[k], leaderEpoch)
	snap, ok := s.snaps[k]
	return snap, ok, nil
}

func (s *memStore) Write(_ context.Context, k Key, leaderEpoch int32, snap Snapshot) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		return s.fail
	}
	if leaderEpoch < s.epochs[k] {
		return ErrFencedLeaderEpoch
	}
	s.writes++
	s.snaps[k] = s.snaps[k].Merge(snap.Start, snap.Runs)
	return nil
}

func (s *memStore) Initialize(_ context.Context, k Key, stateEpoch int32, start int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.snaps[k] = Snapshot{StateEpoch: stateEpoch, Start: start, End: start}
	return nil
}

// TestManagerWriteFailures: an acknowledgement whose write fails is undone (its
// records stay acquired, so it can be sent again), and a fenced write drops the
// partition, which is read again from the store at its next use.
func TestManagerWriteFailures(t *testing.T) {
	store := &memStore{snaps: map[Key]Snapshot{}, epochs: map[Key]int32{}}
	clk := clock.NewFake(t0)
	leaderEpoch := int32(1)
	m := NewManager(Options{
		Store: store, Clock: clk,
		Config:        func(string) PartitionConfig { return testCfg() },
		InitialOffset: func(Key) (int64, error) { return 0, nil },
		LeaderEpoch:   func(Key) (int32, error) { return leaderEpoch, nil },
	})
	defer m.Close()
	k := Key{Group: "g", Partition: 0}
	ctx := context.Background()
	if err := m.Do(ctx, k, func(p *Partition) error {
		p.Acquire("a", [][2]int64{{0, 9}}, 10, 10, false, clk.Now())
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	ack := func(first, last int64) error {
		return m.Do(ctx, k, func(p *Partition) error {
			return p.Acknowledge("a", first, last, []int8{AckAccept}, clk.Now(), nil)
		})
	}

	unavailable := errors.New("coordinator unavailable")
	store.fail = unavailable
	if err := ack(0, 4); !errors.Is(err, unavailable) {
		t.Fatalf("acknowledging while writes fail: %v", err)
	}
	store.fail = nil
	if err := ack(0, 4); err != nil {
		t.Fatalf("the same acknowledgement again: %v", err)
	}
	if snap := store.snaps[k]; snap.Start != 5 {
		t.Fatalf("stored start %d, want 5", snap.Start)
	}

	// A newer leader read the state: this one's next write is fenced, and the
	// partition is read again from the store, where the records acquired here are
	// available, delivered once.
	store.epochs[k] = 2
	if err := ack(5, 5); !errors.Is(err, ErrFencedLeaderEpoch) {
		t.Fatalf("write of a deposed leader: %v", err)
	}
	leaderEpoch = 2
	var st uint8
	var n int16
	if err := m.Do(ctx, k, func(p *Partition) error {
		st, n = p.StateOf(5)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if st != Available || n != 1 {
		t.Fatalf("offset 5 after the reload: state %d deliveries %d, want available once delivered (as the last write stored it)", st, n)
	}

	// A reset initializes the stored state under the next state epoch.
	if err := m.Do(ctx, k, func(p *Partition) error { p.Reset(100); return nil }); err != nil {
		t.Fatal(err)
	}
	if snap := store.snaps[k]; snap.Start != 100 || snap.StateEpoch != 1 || len(snap.Runs) != 0 {
		t.Fatalf("after the reset: %+v", snap)
	}
}

// TestManagerArchiveRolledBack: records a read_committed fetch archives (an aborted
// transaction's) are archived again only once the write that stores it succeeds: a
// failed write leaves them as they were, in memory as in the store.
func TestManagerArchiveRolledBack(t *testing.T) {
	store, clk, m := newTestManager(t)
	k := Key{Group: "g", Partition: 0}
	ctx := context.Background()
	// Offsets 0-9 delivered once and released: available, inside the window.
	if err := m.Do(ctx, k, func(p *Partition) error {
		p.Acquire("a", [][2]int64{{0, 9}}, 10, 10, false, clk.Now())
		return p.Acknowledge("a", 0, 9, []int8{AckRelease}, clk.Now(), nil)
	}); err != nil {
		t.Fatal(err)
	}
	states := func() (out []uint8) {
		if err := m.Do(ctx, k, func(p *Partition) error {
			for o := range int64(10) {
				st, _ := p.StateOf(o)
				out = append(out, st)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return out
	}
	unavailable := errors.New("coordinator unavailable")
	store.fail = unavailable
	if err := m.Do(ctx, k, func(p *Partition) error {
		p.ArchiveUndelivered(3, 5, 10)
		return nil
	}); !errors.Is(err, unavailable) {
		t.Fatalf("archiving while writes fail: %v", err)
	}
	store.fail = nil
	for o, st := range states() {
		if st != Available {
			t.Fatalf("offset %d in state %d after a failed archive, want available", o, st)
		}
	}
	if snap := store.snaps[k]; snap.Start != 0 || len(snap.Runs) != 1 || snap.Runs[0].State != Available {
		t.Fatalf("stored %+v, want offsets 0-9 available", snap)
	}
}

// stuckStore is a store whose writes, once stuck is set, wait until their context
// ends (a coordinator that cannot be reached), after signalling that one started.
type stuckStore struct {
	memStore
	stuck   atomic.Bool
	writing chan struct{}
}

func (s *stuckStore) Write(ctx context.Context, k Key, leaderEpoch int32, snap Snapshot) error {
	if !s.stuck.Load() {
		return s.memStore.Write(ctx, k, leaderEpoch, snap)
	}
	select {
	case s.writing <- struct{}{}:
	default:
	}
	<-ctx.Done()
	return ctx.Err()
}

// TestManagerContextEndsLockExpiry: a lock expiry's write, which the manager starts
// itself, ends when Options.Context ends instead of waiting out WriteTimeout, so
// that Close, which waits for the partition, returns (a broker shutting down); it is
// not tried again.
func TestManagerContextEndsLockExpiry(t *testing.T) {
	store := &stuckStore{memStore: memStore{snaps: map[Key]Snapshot{}, epochs: map[Key]int32{}}, writing: make(chan struct{}, 1)}
	clk := clock.NewFake(t0)
	ctx, cancel := context.WithCancel(context.Background())
	m := NewManager(Options{
		Store: store, Clock: clk, Context: ctx, WriteTimeout: time.Hour,
		Config:        func(string) PartitionConfig { return testCfg() },
		InitialOffset: func(Key) (int64, error) { return 0, nil },
		LeaderEpoch:   func(Key) (int32, error) { return 1, nil },
	})
	k := Key{Group: "g", Partition: 0}
	if err := m.Do(context.Background(), k, func(p *Partition) error {
		p.Acquire("a", [][2]int64{{0, 9}}, 10, 10, false, clk.Now())
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	store.stuck.Store(true)
	expired := make(chan struct{})
	go func() {
		defer close(expired)
		clk.Advance(testCfg().LockDuration + time.Second) // runs the expiry, whose write waits
	}()
	<-store.writing
	cancel()
	closed := make(chan struct{})
	go func() {
		<-expired
		clk.Advance(time.Second) // past RetryBackoff: a retry armed after the failure would run now
		m.Close()
		close(closed)
	}()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("the lock expiry's write still waits 10 s after the manager's context ended")
	}
	select {
	case <-store.writing:
		t.Fatal("the lock expiry was written again after the manager's context ended")
	default:
	}
}

// TestManagerPanicUndone: a change that panics half-way is undone before the panic
// goes on, so the partition in memory stays as stored and the next change works.
func TestManagerPanicUndone(t *testing.T) {
	_, clk, m := newTestManager(t)
	k := Key{Group: "g", Partition: 0}
	ctx := context.Background()
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("the panic did not reach the caller")
			}
		}()
		_ = m.Do(ctx, k, func(p *Partition) error {
			p.Acquire("a", [][2]int64{{0, 9}}, 10, 10, false, clk.Now())
			panic("half-way")
		})
	}()
	if err := m.Do(ctx, k, func(p *Partition) error {
		if p.End() != 0 {
			t.Errorf("window end %d after the panicking change, want 0 (undone)", p.End())
		}
		if a := p.Acquire("b", [][2]int64{{0, 9}}, 10, 10, false, clk.Now()); len(a) != 1 || a[0] != (AcquiredRun{0, 9, 1}) {
			t.Errorf("acquired %v after the panic, want [0, 9] delivered once", a)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// newTestManager is a Manager on a memStore and a fake clock, leader epoch 1, closed
// when the test ends.
func newTestManager(t *testing.T) (*memStore, *clock.Fake, *Manager) {
	store := &memStore{snaps: map[Key]Snapshot{}, epochs: map[Key]int32{}}
	clk := clock.NewFake(t0)
	m := NewManager(Options{
		Store: store, Clock: clk,
		Config:        func(string) PartitionConfig { return testCfg() },
		InitialOffset: func(Key) (int64, error) { return 0, nil },
		LeaderEpoch:   func(Key) (int32, error) { return 1, nil },
	})
	t.Cleanup(m.Close)
	return store, clk, m
}

// TestManagerDropGroup: DropGroup takes a group's partitions out of memory, none of
// another group's, unless idle says a session opened again; the next use reads the
// stored state: accepted records stay done, acquired ones that were not acknowledged
// are available again, their delivery as of their acquisition. A partition whose
// lock expiry was due when it left memory is not loaded again by its timer.
func TestManagerDropGroup(t *testing.T) {
	_, clk, m := newTestManager(t)
	ctx := context.Background()
	k, other := Key{Group: "g", Partition: 0}, Key{Group: "h", Partition: 0}
	for _, key := range []Key{k, other} {
		if err := m.Do(ctx, key, func(p *Partition) error {
			p.Acquire("a", [][2]int64{{0, 9}}, 10, 10, false, clk.Now())
			return p.Acknowledge("a", 0, 4, []int8{AckAccept}, clk.Now(), nil)
		}); err != nil {
			t.Fatal(err)
		}
	}
	if n := m.DropGroup("g", func() bool { return false }); n != 0 || len(m.Loaded("g")) != 1 {
		t.Fatalf("a drop vetoed by idle dropped %d partitions, %v loaded", n, m.Loaded("g"))
	}
	if n := m.DropGroup("g", func() bool { return true }); n != 1 {
		t.Fatalf("dropped %d partitions of g, want 1", n)
	}
	if got := m.Loaded("g"); len(got) != 0 {
		t.Fatalf("g's partitions in memory after the drop: %v", got)
	}
	if got := m.Loaded("h"); len(got) != 1 {
		t.Fatalf("h's partitions in memory after g's drop: %v, want [%v]", got, other)
	}
	clk.Advance(testCfg().LockDuration + time.Second) // a's locks would expire now
	if got := m.Loaded("g"); len(got) != 0 {
		t.Fatalf("g's partition loaded again by its lock expiry: %v", got)
	}

	if err := m.Do(ctx, k, func(p *Partition) error {
		if p.Start() != 5 {
			t.Errorf("start %d after reading the state again, want 5", p.Start())
		}
		for o := int64(5); o < 10; o++ {
			if state, deliveries := p.StateOf(o); state != Available || deliveries != 1 {
				t.Errorf("offset %d: state %d, %d deliveries; want available, 1", o, state, deliveries)
			}
		}
		if a := p.Acquire("b", [][2]int64{{0, 9}}, 10, 10, false, clk.Now()); len(a) != 1 || a[0] != (AcquiredRun{5, 9, 2}) {
			t.Errorf("b acquired %v, want [5, 9] delivered a second time", a)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// TestManagerDropGroupWhileInUse: partitions dropped while changes run on them leave
// memory between changes, never during one: no acknowledgement is lost (each is in
// the store once answered), and the manager keeps one entry per key.
func TestManagerDropGroupWhileInUse(t *testing.T) {
	store, clk, m := newTestManager(t)
	ctx := context.Background()
	k := Key{Group: "g", Partition: 0}
	const n = 200
	if err := m.Do(ctx, k, func(p *Partition) error {
		p.Acquire("a", [][2]int64{{0, n - 1}}, n, n, false, clk.Now())
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	dropped := make(chan int)
	go func() {
		total := 0
		for {
			select {
			case <-stop:
				dropped <- total
				return
			default:
				total += m.DropGroup("g", func() bool { return true })
			}
		}
	}()
	for o := int64(0); o < n; o++ {
		// Accepting a record the member holds; after a drop it is available again
		// (its acquisition was not kept), so acquire it first when needed.
		if err := m.Do(ctx, k, func(p *Partition) error {
			if state, _ := p.StateOf(o); state == Available {
				p.Acquire("a", [][2]int64{{o, o}}, n, 1, true, clk.Now())
			}
			return p.Acknowledge("a", o, o, []int8{AckAccept}, clk.Now(), nil)
		}); err != nil {
			t.Fatalf("accepting %d: %v", o, err)
		}
	}
	close(stop)
	t.Logf("partitions dropped while in use: %d", <-dropped)
	store.mu.Lock()
	start := store.snaps[k].Start
	store.mu.Unlock()
	if start != n {
		t.Fatalf("stored start %d after accepting every record, want %d", start, n)
	}
	m.mu.Lock()
	entries := len(m.mu.parts)
	m.mu.Unlock()
	if entries > 1 {
		t.Fatalf("%d entries for one key", entries)
	}
}

// TestManagerWaitLeavesNoEntry: a fetch that waits on a partition that is not loaded
// and stops waiting leaves nothing in the manager.
func TestManagerWaitLeavesNoEntry(t *testing.T) {
	_, _, m := newTestManager(t)
	k := Key{Group: "g", Partition: 3}
	ch := make(chan struct{}, 1)
	m.Wait(k, ch)
	m.StopWaiting(k, ch)
	m.mu.Lock()
	entries := len(m.mu.parts)
	m.mu.Unlock()
	if entries != 0 {
		t.Fatalf("%d entries after a wait on a partition never loaded ended, want 0", entries)
	}
}

// TestManagerReleaseLoweredIsStored: records a member held when it left go back with
// their delivery count lowered (ReleaseMember), and the store holds the lowered count:
// read again, they are delivered as if for the first time. (A snapshot used to leave
// out records available with no delivery, and the write laid over the stored state
// kept the count of their acquisition.)
func TestManagerReleaseLoweredIsStored(t *testing.T) {
	_, clk, m := newTestManager(t)
	ctx := context.Background()
	k := Key{Group: "g", Partition: 0}
	if err := m.Do(ctx, k, func(p *Partition) error {
		p.Acquire("a", [][2]int64{{0, 4}}, 5, 5, false, clk.Now())
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := m.Do(ctx, k, func(p *Partition) error { p.ReleaseMember("a"); return nil }); err != nil {
		t.Fatal(err)
	}
	m.Forget(k)
	if err := m.Do(ctx, k, func(p *Partition) error {
		if a := p.Acquire("b", [][2]int64{{0, 4}}, 5, 5, false, clk.Now()); len(a) != 1 || a[0] != (AcquiredRun{0, 4, 1}) {
			t.Errorf("b acquired %v after the state was read again, want [0, 4] delivered once", a)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// TestManagerLocksExpiredAndInFlight: LocksExpired is told how many records' locks
// expired once the expiry is written — not when its write fails, once when the retry
// is written — and InFlight reports each loaded partition's window width as of its
// last change, none once it leaves memory.
func TestManagerLocksExpiredAndInFlight(t *testing.T) {
	store := &memStore{snaps: map[Key]Snapshot{}, epochs: map[Key]int32{}}
	clk := clock.NewFake(t0)
	var expired []int
	m := NewManager(Options{
		Store: store, Clock: clk,
		Config:        func(string) PartitionConfig { return testCfg() },
		InitialOffset: func(Key) (int64, error) { return 0, nil },
		LeaderEpoch:   func(Key) (int32, error) { return 1, nil },
		LocksExpired:  func(_ Key, n int) { expired = append(expired, n) }, // on this goroutine: the fake clock runs timers in Advance
	})
	defer m.Close()
	inFlight := func() map[Key]int64 {
		out := map[Key]int64{}
		m.InFlight(func(k Key, n int64) { out[k] = n })
		return out
	}
	ctx := context.Background()
	k := Key{Group: "g", Partition: 0}
	if got := inFlight(); len(got) != 0 {
		t.Fatalf("in flight before any use: %v", got)
	}
	if err := m.Do(ctx, k, func(p *Partition) error {
		p.Acquire("a", [][2]int64{{0, 9}}, 10, 10, false, clk.Now())
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if got := inFlight(); got[k] != 10 || len(got) != 1 {
		t.Fatalf("in flight after acquiring 0-9: %v, want %v: 10", got, k)
	}
	if err := m.Do(ctx, k, func(p *Partition) error {
		return p.Acknowledge("a", 0, 2, []int8{AckAccept}, clk.Now(), nil)
	}); err != nil {
		t.Fatal(err)
	}
	// A failed write leaves the width as it was stored.
	store.fail = errors.New("coordinator unavailable")
	if err := m.Do(ctx, k, func(p *Partition) error {
		return p.Acknowledge("a", 3, 9, []int8{AckAccept}, clk.Now(), nil)
	}); err == nil {
		t.Fatal("an acknowledgement whose write failed succeeded")
	}
	if got := inFlight(); got[k] != 7 {
		t.Fatalf("in flight after accepting 0-2 (and failing to accept 3-9): %v, want 7", got)
	}

	clk.Advance(testCfg().LockDuration + time.Second) // the expiry's write fails
	if len(expired) != 0 {
		t.Fatalf("lock expiries counted %v while their write failed", expired)
	}
	store.fail = nil
	clk.Advance(time.Second) // past RetryBackoff: written now
	clk.Advance(testCfg().LockDuration + time.Second)
	if len(expired) != 1 || expired[0] != 7 {
		t.Fatalf("lock expiries counted %v, want [7] (3-9, once)", expired)
	}
	if got := inFlight(); got[k] != 7 {
		t.Fatalf("in flight after the expiry: %v, want 7 (3-9 available, still in the window)", got)
	}
	m.Forget(k)
	if got := inFlight(); len(got) != 0 {
		t.Fatalf("in flight after the partition left memory: %v", got)
	}
}
