package broker

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/samsa-streaming/samsa/internal/protocol"
	"github.com/samsa-streaming/samsa/internal/testutil"
)

// TestAnswerLaterReusesWorkers: the functions answerLater runs one after another run
// on one worker; as many run at once as are handed over while the others are busy; a
// panic closes its request's answer and leaves the worker to run the next; and the
// workers end once the broker stops serving.
func TestAnswerLaterReusesWorkers(t *testing.T) {
	serving, stop := context.WithCancel(context.Background())
	defer stop()
	b := &Broker{logger: slog.New(slog.DiscardHandler), later: laterWorkers{work: make(chan func()), done: serving.Done()}}
	req := &protocol.Request{}
	answer := func(fn func()) chan protocol.Response {
		out := make(chan protocol.Response, 1)
		b.answerLater(req, out, func() { fn(); out <- protocol.Response{} })
		return out
	}
	// One after another: each goes to a worker idle since it answered the one before.
	// A function handed over between its worker's answer and its return to idle starts
	// a second worker, which is idle from then on: two at most.
	for range 50 {
		<-answer(func() {})
	}
	if n := b.later.started.Load(); n > 2 {
		t.Errorf("50 functions run one after another started %d workers, want 1 or 2", n)
	}

	// At once: a worker for each function still running.
	started := b.later.started.Load()
	var running sync.WaitGroup
	release := make(chan struct{})
	var outs []chan protocol.Response
	for range 5 {
		running.Add(1)
		outs = append(outs, answer(func() { running.Done(); <-release }))
	}
	running.Wait()
	if n := b.later.live.Load(); n < 5 {
		t.Errorf("%d workers for 5 functions running at once", n)
	}
	close(release)
	for _, out := range outs {
		<-out
	}
	if n := b.later.started.Load() - started; n > 5 {
		t.Errorf("5 functions at once started %d more workers, want at most 5", n)
	}

	// A panic closes the answer; the worker lives on.
	testutil.WaitFor(t, 5*time.Second, func() bool { return b.later.live.Load() >= 1 }, "an idle worker")
	out := make(chan protocol.Response, 1)
	b.answerLater(req, out, func() { panic("a bug") })
	if _, ok := <-out; ok {
		t.Fatal("a panicking function's answer was not closed")
	}
	live := b.later.live.Load()
	<-answer(func() {})
	if n := b.later.live.Load(); n != live {
		t.Errorf("%d workers after a panic, %d before", n, live)
	}

	stop()
	testutil.WaitFor(t, 5*time.Second, func() bool { return b.later.live.Load() == 0 }, "the workers ending once the broker stops serving")
}
