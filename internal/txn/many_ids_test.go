package txn

import (
	"fmt"
	"testing"
)

// TestListDoesNotHoldTheCoordinator: ListTransactions takes the coordinator's lock
// per chunk of transactional ids, so other requests are answered while it lists
// many; it held the lock for the whole list, and every transaction's requests with
// it. The answer still has each id once, filtered as asked.
func TestListDoesNotHoldTheCoordinator(t *testing.T) {
	h := newHarness(t)
	const n = 50_000
	h.c.mu.Lock()
	part := h.c.mu.partitions[0]
	for i := range n {
		id := fmt.Sprintf("txn-%08d", i)
		md := Metadata{TransactionalID: id, ProducerID: int64(i), PrevProducerID: -1, NextProducerID: -1, LastEpoch: -1, State: StateEmpty}
		if i%2 == 1 {
			md.Epoch = -1 // not initialized: not listed
		}
		part.txns[id] = &entry{md: md}
	}
	h.c.mu.Unlock()
	var listed []Metadata
	list := func() { listed, _ = h.c.List(ListFilter{States: []State{StateEmpty}, MinDuration: -1}) }
	answered := -1
	for try := 0; try < 5 && answered < 0; try++ { // a loaded machine may not show it holding the lock
		answered = answeredWhile(h, list)
	}
	if answered < 3 {
		t.Errorf("ListTransactions of %d ids: %d other requests answered while it ran, want at least 3", n, answered)
	}
	if len(listed) != n/2 {
		t.Fatalf("ListTransactions listed %d ids, want %d", len(listed), n/2)
	}
	for i, m := range listed {
		if want := fmt.Sprintf("txn-%08d", 2*i); m.TransactionalID != want {
			t.Fatalf("id %d listed as %s, want %s", i, m.TransactionalID, want)
		}
	}
}

// answeredWhile runs a request and answers how many other requests (a
// DescribeTransactions of another id) were answered between the moment it was seen
// holding the coordinator's lock and its end (-1: it ended unseen).
func answeredWhile(h *harness, run func()) int {
	done := make(chan struct{})
	go func() {
		defer close(done)
		run()
	}()
	for h.c.mu.TryLock() {
		h.c.mu.Unlock()
		select {
		case <-done:
			return -1
		default:
		}
	}
	answered := 0
	for {
		h.c.Describe("other")
		select {
		case <-done:
			return answered
		default:
			answered++
		}
	}
}
