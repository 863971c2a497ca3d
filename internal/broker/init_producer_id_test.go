package broker

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestInitProducerIDHalfGiven: a producer id without an epoch, or an epoch without an
// id, is INVALID_REQUEST, with or without a transactional id, as Kafka answers.
func TestInitProducerIDHalfGiven(t *testing.T) {
	b := startTestBroker(t)
	for _, txnID := range []*string{nil, kmsg.StringPtr("half")} {
		for _, pe := range [][2]int64{{-1, 3}, {12345, -1}} {
			req := kmsg.NewPtrInitProducerIDRequest()
			req.TransactionalID, req.TransactionTimeoutMillis = txnID, 60_000
			req.ProducerID, req.ProducerEpoch = pe[0], int16(pe[1])
			if r := call[*kmsg.InitProducerIDResponse](t, b, req); r.ErrorCode != kerr.InvalidRequest.Code || r.ProducerID != -1 {
				t.Errorf("transactional id %v, producer id %d, epoch %d: %v, producer id %d; want INVALID_REQUEST",
					txnID != nil, pe[0], pe[1], kerr.ErrorForCode(r.ErrorCode), r.ProducerID)
			}
		}
	}
}

// TestInitProducerIDIdempotentIgnoresGivenID: without a transactional id the answer
// is a fresh producer id at epoch 0 whatever id and epoch the request names, as
// Kafka's TransactionCoordinator answers; the named id came back with its epoch
// bumped, so any client could take another producer's id and fence it.
func TestInitProducerIDIdempotentIgnoresGivenID(t *testing.T) {
	b := startTestBroker(t)
	first := call[*kmsg.InitProducerIDResponse](t, b, kmsg.NewPtrInitProducerIDRequest())
	if first.ErrorCode != 0 {
		t.Fatal(kerr.ErrorForCode(first.ErrorCode))
	}
	for _, id := range []int64{first.ProducerID, 12345} {
		req := kmsg.NewPtrInitProducerIDRequest()
		req.ProducerID, req.ProducerEpoch = id, 3
		r := call[*kmsg.InitProducerIDResponse](t, b, req)
		if r.ErrorCode != 0 || r.ProducerID == id || r.ProducerEpoch != 0 {
			t.Errorf("naming producer id %d epoch 3: %v, producer id %d epoch %d; want a fresh id at epoch 0",
				id, kerr.ErrorForCode(r.ErrorCode), r.ProducerID, r.ProducerEpoch)
		}
	}
}

// TestProducerIDsFetchAhead: the next block of producer ids is asked for once nine
// tenths of the current one are handed out, while ids go on being handed out; an
// allocation that finds every id used waits for the block only as long as its context
// allows; a failed fetch is reported; no id is handed out twice.
func TestProducerIDsFetchAhead(t *testing.T) {
	type answer struct {
		start, end int64
		err        error
	}
	asked, answers := make(chan struct{}, 10), make(chan answer)
	p := &producerIDs{logger: slog.New(slog.DiscardHandler), fetchBlock: func() (int64, int64, error) {
		asked <- struct{}{}
		a := <-answers
		return a.start, a.end, a.err
	}}
	// answerAsked waits for a fetch to ask, answers it, and returns once the fetch
	// has ended (its outcome recorded).
	answerAsked := func(a answer) {
		<-asked
		p.mu.Lock()
		done := p.fetching
		p.mu.Unlock()
		answers <- a
		<-done
	}
	wasAsked := func() bool {
		select {
		case <-asked:
			return true
		default:
			return false
		}
	}
	type result struct {
		id  int64
		err error
	}
	allocate := func(timeout time.Duration) <-chan result {
		ch := make(chan result, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			defer cancel()
			id, err := p.allocate(ctx)
			ch <- result{id, err}
		}()
		return ch
	}
	want := func(r result, id int64) {
		t.Helper()
		if r.err != nil || r.id != id {
			t.Fatalf("allocate: id %d, %v; want id %d", r.id, r.err, id)
		}
	}

	first := allocate(time.Minute)
	answerAsked(answer{start: 0, end: 10})
	want(<-first, 0)
	for id := int64(1); id <= 8; id++ {
		if wasAsked() {
			t.Fatalf("the next block was asked for before id %d, with %d of 10 ids left", id, 10-id)
		}
		want(<-allocate(time.Minute), id)
	}
	<-asked // one id left: the next block is on its way
	want(<-allocate(time.Minute), 9)
	if r := <-allocate(20 * time.Millisecond); r.err == nil {
		t.Fatalf("allocate with every id used and the next block not there: id %d, want an error", r.id)
	}
	answers <- answer{start: 100, end: 110}
	want(<-allocate(time.Minute), 100)

	for id := int64(101); id <= 109; id++ {
		want(<-allocate(time.Minute), id)
	}
	answerAsked(answer{err: errors.New("controller says no")})
	failed := allocate(time.Minute) // asks again, as the fetch ahead failed
	answerAsked(answer{err: errors.New("controller says no")})
	if r := <-failed; r.err == nil || !strings.Contains(r.err.Error(), "controller says no") {
		t.Fatalf("allocate when the fetch failed: id %d, %v; want the fetch's error", r.id, r.err)
	}
	got := allocate(time.Minute)
	answerAsked(answer{start: 200, end: 210})
	want(<-got, 200)

	p.close()
	for id := int64(201); id <= 209; id++ { // the block in use is still handed out
		want(<-allocate(time.Minute), id)
	}
	if r := <-allocate(time.Minute); r.err == nil {
		t.Fatalf("allocate after close with every id used: id %d, want an error", r.id)
	}
	if wasAsked() {
		t.Fatal("a block was asked for after close")
	}
}
