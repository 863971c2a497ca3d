package console

import (
	"testing"
	"time"
)

func TestLagHistory(t *testing.T) {
	s := newLagSampler(nil, Config{LagHistory: 3}.withDefaults())
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range 5 {
		s.mu.Lock()
		s.recordLocked(t0.Add(time.Duration(i)*time.Second), map[string]bool{"a": true, "b": true}, map[string]int64{"a": int64(i), "b": 7})
		s.mu.Unlock()
	}
	a := s.history("a")
	if len(a) != 3 || a[0].Lag != 2 || a[2].Lag != 4 {
		t.Errorf("history keeps the last 3 samples in order: %+v", a)
	}
	// b was listed but could not be read: it keeps its history; c is gone.
	s.mu.Lock()
	s.recordLocked(t0.Add(time.Minute), map[string]bool{"a": true, "b": true}, map[string]int64{"a": 9})
	s.mu.Unlock()
	if got := s.latest(); got["a"] != 9 || got["b"] != 7 {
		t.Errorf("latest: %v", got)
	}
	s.mu.Lock()
	s.recordLocked(t0.Add(2*time.Minute), map[string]bool{"a": true}, map[string]int64{"a": 1})
	s.mu.Unlock()
	if len(s.history("b")) != 0 {
		t.Error("a group no longer listed keeps its history")
	}
}
