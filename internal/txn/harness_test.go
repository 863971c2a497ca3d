package txn

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/samsa-streaming/samsa/internal/clock"
	"github.com/samsa-streaming/samsa/internal/coordkey"
)

// memLog is an in-memory __transaction_state.
type memLog struct {
	mu        sync.Mutex
	parts     map[int32][]Record
	appendErr error
}

func newMemLog() *memLog { return &memLog{parts: map[int32][]Record{}} }

func (l *memLog) Append(_ context.Context, p int32, records []Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.appendErr != nil {
		return l.appendErr
	}
	for _, r := range records {
		l.parts[p] = append(l.parts[p], Record{Key: append([]byte(nil), r.Key...), Value: append([]byte(nil), r.Value...)})
		if r.Value == nil {
			l.parts[p][len(l.parts[p])-1].Value = nil
		}
	}
	return nil
}

func (l *memLog) Load(_ context.Context, p int32, fn func(Record) error) error {
	l.mu.Lock()
	records := append([]Record(nil), l.parts[p]...)
	l.mu.Unlock()
	for _, r := range records {
		if err := fn(r); err != nil {
			return err
		}
	}
	return nil
}

func (l *memLog) setAppendErr(err error) {
	l.mu.Lock()
	l.appendErr = err
	l.mu.Unlock()
}

// states returns the states written for id, in order.
func (l *memLog) states(t *testing.T, id string) []State {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []State
	for _, rs := range l.parts {
		for _, r := range rs {
			got, m, ok, err := decodeRecord(r)
			if err != nil || !ok {
				t.Fatalf("record: %v", err)
			}
			if got != id {
				continue
			}
			if m == nil {
				out = append(out, StateDead)
			} else {
				out = append(out, m.State)
			}
		}
	}
	return out
}

// fakeMarkers records marker writes; while held, writes wait until released (or
// their context ends); err, when set, fails them.
type fakeMarkers struct {
	mu       sync.Mutex
	written  []Marker
	attempts int
	hold     chan struct{}
	err      error
	cond     *sync.Cond
}

func newFakeMarkers() *fakeMarkers {
	f := &fakeMarkers{}
	f.cond = sync.NewCond(&f.mu)
	return f
}

func (f *fakeMarkers) Write(ctx context.Context, m Marker) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	f.mu.Lock()
	hold, err := f.hold, f.err
	f.attempts++
	f.cond.Broadcast()
	f.mu.Unlock()
	if hold != nil {
		select {
		case <-hold:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if err != nil {
		return err
	}
	f.mu.Lock()
	f.written = append(f.written, m)
	f.cond.Broadcast()
	f.mu.Unlock()
	return nil
}

func (f *fakeMarkers) setHold(on bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case on && f.hold == nil:
		f.hold = make(chan struct{})
	case !on && f.hold != nil:
		close(f.hold)
		f.hold = nil
	}
}

func (f *fakeMarkers) setErr(err error) {
	f.mu.Lock()
	f.err = err
	f.mu.Unlock()
}

// waitAttempts waits until Write was called n times.
func (f *fakeMarkers) waitAttempts(n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for f.attempts < n {
		f.cond.Wait()
	}
}

func (f *fakeMarkers) all() []Marker {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Marker(nil), f.written...)
}

type harness struct {
	t       *testing.T
	clock   *clock.Fake
	log     *memLog
	markers *fakeMarkers
	cfg     Config
	c       *Coordinator
	nextPID int64
	pidMu   sync.Mutex
}

func testConfig() Config {
	cfg := DefaultConfig()
	cfg.NumPartitions = 1
	cfg.MaxTimeout = time.Hour
	cfg.AbortTimedOutInterval = time.Second
	cfg.RemoveExpiredInterval = time.Minute
	cfg.IDExpiration = time.Hour
	cfg.RetryBackoff = 10 * time.Millisecond
	return cfg
}

func newHarness(t *testing.T) *harness {
	h := &harness{t: t, clock: clock.NewFake(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)), log: newMemLog(),
		markers: newFakeMarkers(), cfg: testConfig(), nextPID: 1000}
	h.start(7)
	return h
}

// start (re)creates the coordinator on the same log and loads partition 0 at epoch.
func (h *harness) start(epoch int32) {
	h.t.Helper()
	if h.c != nil {
		h.c.Close()
	}
	h.c = New(Options{
		Log: h.log, Markers: h.markers, Clock: h.clock, Config: h.cfg,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		ProducerIDs: func(context.Context) (int64, error) {
			h.pidMu.Lock()
			defer h.pidMu.Unlock()
			h.nextPID++
			return h.nextPID, nil
		},
		OffsetsPartition: func(group string) int32 { return coordkey.Partition(group, 50) },
	})
	h.t.Cleanup(h.c.Close)
	if err := h.c.LoadPartition(context.Background(), 0, epoch); err != nil {
		h.t.Fatal(err)
	}
}

func recvT[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(5 * time.Second):
		t.Fatal("no answer within 5s")
		panic("unreachable")
	}
}

func (h *harness) init(id string, pid int64, epoch int16) ProducerResult {
	h.t.Helper()
	return recvT(h.t, h.c.InitProducerID(id, time.Minute, pid, epoch))
}

func (h *harness) mustInit(id string) ProducerResult {
	h.t.Helper()
	r := h.init(id, -1, -1)
	if r.Code != 0 {
		h.t.Fatalf("InitProducerId %s: code %d", id, r.Code)
	}
	return r
}

func (h *harness) add(id string, p ProducerResult, verify bool, parts ...TopicPartition) []int16 {
	h.t.Helper()
	return recvT(h.t, h.c.AddPartitions(id, p.ProducerID, p.Epoch, parts, verify, false))
}

// addV2 adds parts as a transactions v2 produce's add does.
func (h *harness) addV2(id string, p ProducerResult, parts ...TopicPartition) []int16 {
	h.t.Helper()
	return recvT(h.t, h.c.AddPartitions(id, p.ProducerID, p.Epoch, parts, false, true))
}

func (h *harness) end(id string, p ProducerResult, commit, v2 bool) ProducerResult {
	h.t.Helper()
	return recvT(h.t, h.c.EndTxn(id, p.ProducerID, p.Epoch, commit, v2))
}

// waitState waits until id is in state s.
func (h *harness) waitState(id string, s State) Metadata {
	h.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		m, code := h.c.Describe(id)
		if code == 0 && m.State == s {
			return m
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("%s: state %v (code %d), want %v", id, m.State, code, s)
		}
		time.Sleep(time.Millisecond)
	}
}

func tp(topic string, p int32) TopicPartition { return TopicPartition{Topic: topic, Partition: p} }

func codes(cs ...int16) []int16 { return cs }

func equalCodes(a, b []int16) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
