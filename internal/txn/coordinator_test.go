package txn

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

var (
	errFence   = kerr.ProducerFenced.Code
	errMapping = kerr.InvalidProducerIDMapping.Code
	errState   = kerr.InvalidTxnState.Code
	errConc    = kerr.ConcurrentTransactions.Code
)

// TestInitFencesThePreviousProducer: InitProducerId gives a new id at epoch 0, then
// bumps the epoch, and the older epoch is fenced.
func TestInitFencesThePreviousProducer(t *testing.T) {
	h := newHarness(t)
	first := h.mustInit("app")
	if first.ProducerID != 1001 || first.Epoch != 0 {
		t.Fatalf("first init: %+v", first)
	}
	second := h.mustInit("app")
	if second.ProducerID != first.ProducerID || second.Epoch != 1 {
		t.Fatalf("second init: %+v", second)
	}
	if got := h.add("app", first, false, tp("t", 0)); !equalCodes(got, codes(errFence)) {
		t.Fatalf("add with the fenced epoch: %v", got)
	}
	if got := h.add("app", ProducerResult{ProducerID: 9, Epoch: 1}, false, tp("t", 0)); !equalCodes(got, codes(errMapping)) {
		t.Fatalf("add with another producer id: %v", got)
	}
	if got := h.add("other", second, false, tp("t", 0)); !equalCodes(got, codes(errMapping)) {
		t.Fatalf("add to an unknown transactional id: %v", got)
	}
	if r := recvT(t, h.c.InitProducerID("app", 2*time.Hour, -1, -1)); r.Code != kerr.InvalidTransactionTimeout.Code {
		t.Fatalf("timeout above transaction.max.timeout.ms: %+v", r)
	}
}

// TestCommitWritesMarkersAndCompletes: the life of a committed transaction, its
// verification, a retried EndTxn and the wrong result.
func TestCommitWritesMarkersAndCompletes(t *testing.T) {
	h := newHarness(t)
	p := h.mustInit("app")
	if got := h.add("app", p, false, tp("t", 1), tp("t", 0)); !equalCodes(got, codes(0, 0)) {
		t.Fatalf("add: %v", got)
	}
	if got := h.add("app", p, true, tp("t", 0), tp("t", 2)); !equalCodes(got, codes(0, errState)) {
		t.Fatalf("verify: %v", got)
	}
	if got := h.add("app", p, false, tp("t", 0)); !equalCodes(got, codes(0)) {
		t.Fatalf("adding a partition already in: %v", got)
	}
	m, _ := h.c.Describe("app")
	if m.State != StateOngoing || len(m.Partitions) != 2 || m.Started.IsZero() {
		t.Fatalf("ongoing: %+v", m)
	}
	h.markers.setHold(true)
	if r := h.end("app", p, true, false); r.Code != 0 || r.Epoch != p.Epoch {
		t.Fatalf("EndTxn: %+v", r)
	}
	h.waitState("app", StatePrepareCommit)
	if got := h.add("app", p, false, tp("t", 3)); !equalCodes(got, codes(errConc)) {
		t.Fatalf("add while the markers are written: %v", got)
	}
	if r := h.end("app", p, true, false); r.Code != errConc {
		t.Fatalf("EndTxn retried while preparing: %+v", r)
	}
	h.markers.setHold(false)
	h.waitState("app", StateCompleteCommit)
	ms := h.markers.all()
	if len(ms) != 1 || !ms[0].Commit || ms[0].CoordinatorEpoch != 7 || ms[0].ProducerID != p.ProducerID || len(ms[0].Partitions) != 2 ||
		ms[0].TransactionVersion != 0 {
		t.Fatalf("markers: %+v", ms)
	}
	if r := h.end("app", p, true, false); r.Code != 0 {
		t.Fatalf("EndTxn retried after completion: %+v", r)
	}
	if r := h.end("app", p, false, false); r.Code != errState {
		t.Fatalf("abort after the commit: %+v", r)
	}
	want := []State{StateEmpty, StateOngoing, StatePrepareCommit, StateCompleteCommit}
	if got := h.log.states(t, "app"); len(got) != len(want) {
		t.Fatalf("records %v, want %v", got, want)
	}
}

// TestTransactionsV2BumpTheEpoch: EndTxn v5 bumps the epoch on every end, answers a
// lost answer's retry as it was, and aborts an empty transaction.
func TestTransactionsV2BumpTheEpoch(t *testing.T) {
	h := newHarness(t)
	p := h.mustInit("app")
	h.add("app", p, false, tp("t", 0))
	r := h.end("app", p, true, true)
	if r.Code != 0 || r.ProducerID != p.ProducerID || r.Epoch != p.Epoch+1 {
		t.Fatalf("EndTxn v5: %+v", r)
	}
	m := h.waitState("app", StateCompleteCommit)
	if m.ClientVersion != 2 {
		t.Fatalf("client transaction version %d", m.ClientVersion)
	}
	if ms := h.markers.all(); len(ms) != 1 || ms[0].ProducerEpoch != p.Epoch+1 || ms[0].TransactionVersion != 2 {
		t.Fatalf("markers carry the bumped epoch and transaction version 2: %+v", ms)
	}
	if again := h.end("app", p, true, true); again != r {
		t.Fatalf("retry with the epoch before the bump: %+v, want %+v", again, r)
	}
	if got := h.add("app", p, false, tp("t", 0)); !equalCodes(got, codes(errFence)) {
		t.Fatalf("the old epoch is fenced: %v", got)
	}
	next := h.end("app", r, false, true)
	if next.Code != 0 || next.Epoch != r.Epoch+1 {
		t.Fatalf("abort of an empty transaction: %+v", next)
	}
	h.waitState("app", StateCompleteAbort)
	if ms := h.markers.all(); len(ms) != 1 {
		t.Fatalf("an empty transaction writes no marker: %+v", ms)
	}
	if r := h.end("app", next, true, true); r.Code != errState {
		t.Fatalf("commit of an empty transaction: %+v", r)
	}
}

// TestMarkerVersionFollowsTheEnd: a transaction whose partitions were added by a
// transactions v2 producer but which an EndTxn below v5 ends keeps its epoch, so its
// markers are of version 0 (a version 2 marker at the records' epoch would be refused
// by the partitions); a timeout fences it with the epoch bumped, as a v2 end would.
func TestMarkerVersionFollowsTheEnd(t *testing.T) {
	h := newHarness(t)
	p := h.mustInit("app")
	h.addV2("app", p, tp("t", 0))
	if r := h.end("app", p, true, false); r.Code != 0 || r.Epoch != p.Epoch {
		t.Fatalf("EndTxn v4: %+v", r)
	}
	if m := h.waitState("app", StateCompleteCommit); m.ClientVersion != 0 {
		t.Fatalf("client transaction version after EndTxn v4: %d", m.ClientVersion)
	}
	h.addV2("app", p, tp("t", 0))
	h.clock.Advance(61 * time.Second) // timeout is 1 min
	h.waitState("app", StateCompleteAbort)
	ms := h.markers.all()
	if len(ms) != 2 || ms[0].ProducerEpoch != p.Epoch || ms[0].TransactionVersion != 0 ||
		ms[1].ProducerEpoch != p.Epoch+1 || ms[1].TransactionVersion != 2 {
		t.Fatalf("markers: %+v", ms)
	}
}

// TestTransactionsV2EndWhileMarkersAreWritten: with transactions v2 the producer
// gets its next epoch as soon as the commit is prepared; ending the next transaction
// (an abort of an empty one, as franz-go sends when none of its produces succeeded)
// before the markers are written is CONCURRENT_TRANSACTIONS, which the client
// retries, and the same request succeeds once the commit completed.
func TestTransactionsV2EndWhileMarkersAreWritten(t *testing.T) {
	h := newHarness(t)
	p := h.mustInit("app")
	h.add("app", p, false, tp("t", 0))
	h.markers.setHold(true)
	r := h.end("app", p, true, true)
	if r.Code != 0 || r.Epoch != p.Epoch+1 {
		t.Fatalf("EndTxn v5: %+v", r)
	}
	h.waitState("app", StatePrepareCommit)
	for _, commit := range []bool{false, true} {
		if got := h.end("app", r, commit, true); got.Code != errConc {
			t.Fatalf("ending the next transaction (commit %v) while the markers are written: %+v", commit, got)
		}
	}
	if got := h.end("app", p, false, true); got.Code != errConc {
		t.Fatalf("a retry of the commit as an abort while the markers are written: %+v", got)
	}
	h.markers.setHold(false)
	h.waitState("app", StateCompleteCommit)
	next := h.end("app", r, false, true)
	if next.Code != 0 || next.Epoch != r.Epoch+1 {
		t.Fatalf("the abort once the commit completed: %+v", next)
	}
	h.waitState("app", StateCompleteAbort)
}

// initAtLastEpoch initializes id and moves it to the last epoch a producer may have.
func (h *harness) initAtLastEpoch(id string) ProducerResult {
	h.t.Helper()
	p := h.mustInit(id)
	h.c.mu.Lock()
	h.c.mu.partitions[0].txns[id].md.Epoch = math.MaxInt16 - 1
	h.c.mu.Unlock()
	p.Epoch = math.MaxInt16 - 1
	return p
}

// TestTransactionsV2RotateAnExhaustedEpoch: an end at the last epoch moves the
// transactional id to a new producer id.
func TestTransactionsV2RotateAnExhaustedEpoch(t *testing.T) {
	h := newHarness(t)
	p := h.initAtLastEpoch("app")
	h.add("app", p, false, tp("t", 0))
	r := h.end("app", p, true, true)
	if r.Code != 0 || r.ProducerID == p.ProducerID || r.Epoch != 0 {
		t.Fatalf("end at the last epoch: %+v", r)
	}
	m := h.waitState("app", StateCompleteCommit)
	if m.ProducerID != r.ProducerID || m.PrevProducerID != p.ProducerID || m.Epoch != 0 {
		t.Fatalf("after the rotation: %+v", m)
	}
	if ms := h.markers.all(); len(ms) != 1 || ms[0].ProducerID != p.ProducerID || ms[0].ProducerEpoch != math.MaxInt16 {
		t.Fatalf("markers of the old id at the fencing epoch: %+v", ms)
	}
	if again := h.end("app", p, true, true); again != r {
		t.Fatalf("retry after the rotation: %+v, want %+v", again, r)
	}
}

// TestInitAfterTransactionsV2End: KIP-360 after a transactions v2 end, as Kafka
// answers it: the epoch before the end's bump is the last epoch, so an InitProducerId
// naming it is taken for a retry and answered with the producer id and epoch the end
// gave, without a bump; after an end that moved the id to a new producer id, the old
// id at the last epoch it had (32766) is that retry too. Any older epoch is fenced.
func TestInitAfterTransactionsV2End(t *testing.T) {
	h := newHarness(t)
	h.mustInit("app")
	p := h.mustInit("app") // at epoch 1, so that an older one can be named
	h.add("app", p, false, tp("t", 0))
	r := h.end("app", p, true, true)
	h.waitState("app", StateCompleteCommit)
	if got := h.init("app", p.ProducerID, p.Epoch); got.Code != 0 || got.ProducerID != r.ProducerID || got.Epoch != r.Epoch {
		t.Fatalf("InitProducerId at the epoch before the commit's bump: %+v, want %d/%d", got, r.ProducerID, r.Epoch)
	}
	if got := h.init("app", p.ProducerID, p.Epoch-1); got.Code != errFence {
		t.Fatalf("InitProducerId at an older epoch: %+v", got)
	}

	old := h.initAtLastEpoch("rotated")
	h.add("rotated", old, false, tp("t", 0))
	r = h.end("rotated", old, true, true)
	h.waitState("rotated", StateCompleteCommit)
	if got := h.init("rotated", old.ProducerID, old.Epoch); got.Code != 0 || got.ProducerID != r.ProducerID || got.Epoch != r.Epoch {
		t.Fatalf("InitProducerId of the old id at its last epoch after the rotation: %+v, want %d/%d", got, r.ProducerID, r.Epoch)
	}
	if got := h.init("rotated", old.ProducerID, old.Epoch-1); got.Code != errFence {
		t.Fatalf("InitProducerId of the old id at an older epoch: %+v", got)
	}
}

// TestTransactionsV2NewIDWhileMarkersAreWritten: after an end at the last epoch
// answered a new producer id, the new id's first add (its produce's implicit add, an
// AddOffsetsToTxn) before the old id's markers are written is CONCURRENT_TRANSACTIONS,
// which clients retry, not INVALID_PRODUCER_ID_MAPPING; it succeeds once the end
// completed.
func TestTransactionsV2NewIDWhileMarkersAreWritten(t *testing.T) {
	h := newHarness(t)
	p := h.initAtLastEpoch("app")
	h.add("app", p, false, tp("t", 0))
	h.markers.setHold(true)
	r := h.end("app", p, true, true)
	if r.Code != 0 || r.ProducerID == p.ProducerID || r.Epoch != 0 {
		t.Fatalf("end at the last epoch: %+v", r)
	}
	h.waitState("app", StatePrepareCommit)
	for _, verify := range []bool{false, true} {
		if got := h.add("app", r, verify, tp("t", 1)); !equalCodes(got, codes(errConc)) {
			t.Fatalf("the new id's add (verify %v) while the markers are written: %v", verify, got)
		}
	}
	if got := h.add("app", p, false, tp("t", 1)); !equalCodes(got, codes(errFence)) {
		t.Fatalf("the old id's add at its old epoch while the markers are written: %v", got)
	}
	h.markers.setHold(false)
	h.waitState("app", StateCompleteCommit)
	if got := h.add("app", r, false, tp("t", 1)); !equalCodes(got, codes(0)) {
		t.Fatalf("the new id's add once the end completed: %v", got)
	}
	if got := h.add("app", p, false, tp("t", 1)); !equalCodes(got, codes(errMapping)) {
		t.Fatalf("the old id's add once the end completed: %v", got)
	}
}

// TestNoProducerAtTheFencingEpoch: MaxInt16 is kept for fencing. A transaction timed
// out at the last epoch is fenced at MaxInt16; a producer naming MaxInt16 may neither
// add nor end (had it been let in, the next fence would have wrapped the epoch to
// -32768, and markers below the producer's epoch leave the partition's transaction
// open); a fence at MaxInt16 stays at MaxInt16; the next InitProducerId moves to a new
// producer id.
func TestNoProducerAtTheFencingEpoch(t *testing.T) {
	h := newHarness(t)
	p := h.initAtLastEpoch("app")
	h.add("app", p, false, tp("t", 0))
	h.clock.Advance(61 * time.Second) // timeout is 1 min
	if m := h.waitState("app", StateCompleteAbort); m.Epoch != math.MaxInt16 {
		t.Fatalf("fenced at %d, want %d", m.Epoch, math.MaxInt16)
	}
	atMax := ProducerResult{ProducerID: p.ProducerID, Epoch: math.MaxInt16}
	if got := h.add("app", atMax, false, tp("t", 0)); !equalCodes(got, codes(errFence)) {
		t.Fatalf("an add at MaxInt16: %v", got)
	}
	for _, v2 := range []bool{false, true} {
		if got := h.end("app", atMax, false, v2); got.Code != errFence {
			t.Fatalf("an end at MaxInt16 (v2 %v): %+v", v2, got)
		}
	}
	if next := (Metadata{Epoch: math.MaxInt16}).prepareEnd(false, false, true, -1, h.clock.Now()); next.Epoch != math.MaxInt16 {
		t.Fatalf("a fence at MaxInt16 moved the epoch to %d", next.Epoch)
	}
	if r := h.mustInit("app"); r.ProducerID == p.ProducerID || r.Epoch != 0 {
		t.Fatalf("InitProducerId after the fence at MaxInt16: %+v", r)
	}
}

// TestInitAbortsTheOngoingTransaction: a new producer's InitProducerId aborts the
// transaction in progress with the old epoch fenced, answers CONCURRENT_TRANSACTIONS,
// and the retry gets the next epoch.
func TestInitAbortsTheOngoingTransaction(t *testing.T) {
	h := newHarness(t)
	old := h.mustInit("app")
	h.add("app", old, false, tp("t", 0))
	if r := h.init("app", -1, -1); r.Code != errConc {
		t.Fatalf("init during a transaction: %+v", r)
	}
	h.waitState("app", StateCompleteAbort)
	ms := h.markers.all()
	if len(ms) != 1 || ms[0].Commit || ms[0].ProducerEpoch != old.Epoch+1 {
		t.Fatalf("abort marker at the fencing epoch: %+v", ms)
	}
	r := h.mustInit("app")
	if r.Epoch != old.Epoch+2 {
		t.Fatalf("retried init: %+v", r)
	}
	if e := h.end("app", old, true, false); e.Code != errFence {
		t.Fatalf("the old producer's commit: %+v", e)
	}
}

// TestInitWithProducerID: KIP-360 re-initialization bumps the current epoch, repeats
// the answer for a retry, and fences a stale epoch.
func TestInitWithProducerID(t *testing.T) {
	h := newHarness(t)
	p := h.mustInit("app")
	bumped := h.init("app", p.ProducerID, p.Epoch)
	if bumped.Code != 0 || bumped.Epoch != p.Epoch+1 {
		t.Fatalf("re-init: %+v", bumped)
	}
	if again := h.init("app", p.ProducerID, p.Epoch); again != bumped {
		t.Fatalf("retried re-init: %+v, want %+v", again, bumped)
	}
	if stale := h.init("app", p.ProducerID, p.Epoch+5); stale.Code != errFence {
		t.Fatalf("re-init with an epoch never given: %+v", stale)
	}
	if other := h.init("app", 4242, 0); other.Code != errFence {
		t.Fatalf("re-init with another producer id: %+v", other)
	}
}

// TestTimedOutTransactionIsAborted: past its timeout a transaction is fenced and
// aborted by the coordinator's timer.
func TestTimedOutTransactionIsAborted(t *testing.T) {
	h := newHarness(t)
	p := h.mustInit("app")
	h.add("app", p, false, tp("t", 0), tp("u", 3))
	h.clock.Advance(30 * time.Second) // timeout is 1 min
	if m, _ := h.c.Describe("app"); m.State != StateOngoing {
		t.Fatalf("aborted before its timeout: %v", m.State)
	}
	h.clock.Advance(31 * time.Second)
	m := h.waitState("app", StateCompleteAbort)
	if m.Epoch != p.Epoch+1 {
		t.Fatalf("epoch after the timeout: %+v", m)
	}
	if ms := h.markers.all(); len(ms) != 1 || ms[0].Commit || len(ms[0].Partitions) != 2 {
		t.Fatalf("markers: %+v", ms)
	}
	if r := h.end("app", p, true, false); r.Code != errFence {
		t.Fatalf("the timed-out producer's commit: %+v", r)
	}
	if got := h.add("app", p, false, tp("t", 0)); !equalCodes(got, codes(errFence)) {
		t.Fatalf("the timed-out producer's add: %v", got)
	}
}

// TestTimedOutTransactionsV2LateEnd: with transactions v2 the timed-out producer's
// epoch is the one before the abort's bump, which an end takes for a retry of its
// own, as in Kafka: its commit is PRODUCER_FENCED (KAFKA-20785; CONCURRENT_TRANSACTIONS
// first while the abort's markers are written), its abort answered as the abort was.
func TestTimedOutTransactionsV2LateEnd(t *testing.T) {
	h := newHarness(t)
	p := h.mustInit("app")
	h.add("app", p, false, tp("t", 0))
	h.markers.setHold(true)
	h.clock.Advance(61 * time.Second) // timeout is 1 min
	h.waitState("app", StatePrepareAbort)
	for _, commit := range []bool{true, false} {
		if r := h.end("app", p, commit, true); r.Code != errConc {
			t.Fatalf("late end (commit %v) while the abort's markers are written: %+v", commit, r)
		}
	}
	h.markers.setHold(false)
	m := h.waitState("app", StateCompleteAbort)
	if r := h.end("app", p, true, true); r.Code != errFence {
		t.Fatalf("late commit of the timed-out transaction: %+v", r)
	}
	if r := h.end("app", p, false, true); r.Code != 0 || r.ProducerID != m.ProducerID || r.Epoch != m.Epoch {
		t.Fatalf("late abort of the timed-out transaction: %+v, want the abort's producer %d epoch %d", r, m.ProducerID, m.Epoch)
	}
}

// TestFailoverCompletesPreparedTransactions: a coordinator that prepared a commit and
// failed before its markers were written leaves it to the next one, which writes them
// with its own coordinator epoch and completes it.
func TestFailoverCompletesPreparedTransactions(t *testing.T) {
	h := newHarness(t)
	p := h.mustInit("app")
	h.add("app", p, false, tp("t", 0))
	h.markers.setErr(errors.New("partition leader unreachable"))
	if r := h.end("app", p, true, false); r.Code != 0 {
		t.Fatalf("EndTxn: %+v", r)
	}
	h.waitState("app", StatePrepareCommit)
	h.markers.waitAttempts(1)
	h.c.UnloadPartition(0)
	if r := h.end("app", p, true, false); r.Code != kerr.NotCoordinator.Code {
		t.Fatalf("EndTxn after the unload: %+v", r)
	}
	h.markers.setErr(nil)
	h.start(8)
	h.waitState("app", StateCompleteCommit)
	ms := h.markers.all()
	if len(ms) != 1 || ms[0].CoordinatorEpoch != 8 || !ms[0].Commit {
		t.Fatalf("markers after the failover: %+v", ms)
	}
	if r := h.end("app", p, true, false); r.Code != 0 {
		t.Fatalf("the producer's retried EndTxn: %+v", r)
	}
}

// TestTransactionsV2EndRetriedAfterFailover: the answer of a transactions v2 EndTxn is
// lost and the coordinator moves (its last epoch is not stored): the producer's retry
// at the epoch before the bump — or, for the end that rotated the producer id, the old
// id at the last epoch — is CONCURRENT_TRANSACTIONS until the markers are written and
// then answered as the end was, not PRODUCER_FENCED.
func TestTransactionsV2EndRetriedAfterFailover(t *testing.T) {
	for _, rotate := range []bool{false, true} {
		t.Run(fmt.Sprintf("rotate %v", rotate), func(t *testing.T) {
			h := newHarness(t)
			p := h.mustInit("app")
			if rotate {
				p = h.initAtLastEpoch("app")
			}
			h.add("app", p, false, tp("t", 0))
			h.markers.setErr(errors.New("partition leader unreachable"))
			r := h.end("app", p, true, true)
			if r.Code != 0 {
				t.Fatalf("EndTxn v5: %+v", r)
			}
			h.waitState("app", StatePrepareCommit)
			h.markers.waitAttempts(1)
			h.start(8)
			if got := h.end("app", p, true, true); got.Code != errConc {
				t.Fatalf("the retry while the markers are written: %+v", got)
			}
			h.markers.setErr(nil)
			for deadline := time.Now().Add(5 * time.Second); ; { // the markers' next attempt
				if m, _ := h.c.Describe("app"); m.State == StateCompleteCommit || time.Now().After(deadline) {
					break
				}
				h.clock.Advance(h.cfg.RetryBackoff)
				time.Sleep(time.Millisecond)
			}
			h.waitState("app", StateCompleteCommit)
			if got := h.end("app", p, true, true); got != r {
				t.Fatalf("the retry once the end completed: %+v, want %+v", got, r)
			}
			h.start(9)
			if got := h.end("app", p, true, true); got != r {
				t.Fatalf("the retry after another move: %+v, want %+v", got, r)
			}
			if got := h.end("app", p, false, true); got.Code != errState {
				t.Fatalf("the retry as an abort: %+v", got)
			}
		})
	}
}

// TestFencedCoordinatorStops: markers refused because a newer coordinator wrote some
// end this coordinator's attempt; a failed completion write is retried.
func TestFencedCoordinatorStops(t *testing.T) {
	h := newHarness(t)
	p := h.mustInit("app")
	h.add("app", p, false, tp("t", 0))
	h.markers.setErr(ErrFenced)
	h.end("app", p, false, false)
	h.waitState("app", StatePrepareAbort)
	h.clock.Advance(time.Second)
	if m, _ := h.c.Describe("app"); m.State != StatePrepareAbort {
		t.Fatalf("a fenced coordinator completed the transaction: %v", m.State)
	}
}

// TestAppendFailureChangesNothing: a failed write of __transaction_state answers
// COORDINATOR_NOT_AVAILABLE and leaves the state as it was.
func TestAppendFailureChangesNothing(t *testing.T) {
	h := newHarness(t)
	h.log.setAppendErr(errors.New("disk full"))
	if r := h.init("app", -1, -1); r.Code != kerr.CoordinatorNotAvailable.Code {
		t.Fatalf("init with a failing log: %+v", r)
	}
	if _, code := h.c.Describe("app"); code != kerr.TransactionalIDNotFound.Code {
		t.Fatalf("a transactional id never written: %d", code)
	}
	h.log.setAppendErr(nil)
	p := h.mustInit("app")
	h.log.setAppendErr(errors.New("not enough replicas"))
	if got := h.add("app", p, false, tp("t", 0)); !equalCodes(got, codes(kerr.CoordinatorNotAvailable.Code)) {
		t.Fatalf("add with a failing log: %v", got)
	}
	if m, _ := h.c.Describe("app"); m.State != StateEmpty {
		t.Fatalf("state after a failed add: %v", m.State)
	}
}

// TestExpiredTransactionalIDs: an id unused for transactional.id.expiration.ms is
// forgotten (a tombstone); one with a transaction in progress is not.
func TestExpiredTransactionalIDs(t *testing.T) {
	h := newHarness(t)
	h.mustInit("idle")
	busy := h.mustInit("busy")
	h.add("busy", busy, false, tp("t", 0))
	h.cfg.MaxTimeout = 2 * time.Hour
	h.clock.Advance(61 * time.Minute) // also aborts busy's transaction (1 min timeout)
	h.waitState("busy", StateCompleteAbort)
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, code := h.c.Describe("idle"); code == kerr.TransactionalIDNotFound.Code {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("idle transactional id not expired")
		}
		time.Sleep(time.Millisecond)
	}
	if got := h.log.states(t, "idle"); got[len(got)-1] != StateDead {
		t.Fatalf("records of the expired id: %v", got)
	}
	if _, code := h.c.Describe("busy"); code != 0 {
		t.Fatalf("busy was used an hour ago (its abort): %d", code)
	}
	h.start(8)
	if _, code := h.c.Describe("idle"); code != kerr.TransactionalIDNotFound.Code {
		t.Fatalf("expired id back after a reload: %d", code)
	}
}

// TestListAndDescribe: filters of ListTransactions.
func TestListAndDescribe(t *testing.T) {
	h := newHarness(t)
	a := h.mustInit("alpha")
	h.mustInit("beta")
	h.add("alpha", a, false, tp("t", 0))
	h.clock.Advance(500 * time.Millisecond)
	all, code := h.c.List(ListFilter{MinDuration: -1})
	if code != 0 || len(all) != 2 || all[0].TransactionalID != "alpha" {
		t.Fatalf("list: %+v %d", all, code)
	}
	for _, tc := range []struct {
		f    ListFilter
		want int
	}{
		{ListFilter{States: []State{StateOngoing}, MinDuration: -1}, 1},
		{ListFilter{ProducerIDs: []int64{a.ProducerID}, MinDuration: -1}, 1},
		{ListFilter{MinDuration: time.Second}, 0},
		{ListFilter{MinDuration: 100 * time.Millisecond}, 1},
		{ListFilter{Pattern: regexp.MustCompile("^b"), MinDuration: -1}, 1},
	} {
		if got, _ := h.c.List(tc.f); len(got) != tc.want {
			t.Errorf("filter %+v: %d, want %d", tc.f, len(got), tc.want)
		}
	}
	if s := h.c.Stats(); s.Ongoing != 1 || s.OldestOngoing != 500*time.Millisecond {
		t.Fatalf("stats %+v", s)
	}
}

// TestListDurationFilterIsStrict: ListTransactions' duration filter (KIP-994) keeps
// the transactions running longer than it, not those running exactly that long
// (Kafka's TransactionStateManager.listTransactionStates drops now - start <= filter).
func TestListDurationFilterIsStrict(t *testing.T) {
	h := newHarness(t)
	a := h.mustInit("alpha")
	h.add("alpha", a, false, tp("t", 0))
	h.clock.Advance(500 * time.Millisecond)
	if got, _ := h.c.List(ListFilter{MinDuration: 500 * time.Millisecond}); len(got) != 0 {
		t.Fatalf("a transaction open for exactly the filter's 500ms is listed: %+v", got)
	}
	h.clock.Advance(time.Millisecond)
	if got, _ := h.c.List(ListFilter{MinDuration: 500 * time.Millisecond}); len(got) != 1 {
		t.Fatalf("a transaction open for 501ms is not listed: %+v", got)
	}
}

// TestConcurrentAdds: adds to one transaction may follow one another while the first
// is being written.
func TestConcurrentAdds(t *testing.T) {
	h := newHarness(t)
	p := h.mustInit("app")
	var chans []<-chan []int16
	for i := range int32(8) {
		chans = append(chans, h.c.AddPartitions("app", p.ProducerID, p.Epoch, []TopicPartition{tp("t", i)}, false, false))
	}
	for _, ch := range chans {
		if got := recvT(t, ch); !equalCodes(got, codes(0)) {
			t.Fatalf("concurrent add: %v", got)
		}
	}
	if m, _ := h.c.Describe("app"); len(m.Partitions) != 8 {
		t.Fatalf("partitions %+v", m.Partitions)
	}
}

// TestRecordsRoundTrip: __transaction_state records decode to what was encoded.
func TestRecordsRoundTrip(t *testing.T) {
	now := time.UnixMilli(1_700_000_000_123)
	m := Metadata{TransactionalID: "x", ProducerID: 5, PrevProducerID: 4, NextProducerID: -1, Epoch: 9, LastEpoch: -1,
		Timeout: 3 * time.Second, State: StatePrepareCommit, Partitions: []TopicPartition{tp("a", 0), tp("a", 2), tp("b", 1)},
		Started: now, Updated: now.Add(time.Second), ClientVersion: 2}
	id, got, ok, err := decodeRecord(encodeRecord(&m))
	if err != nil || !ok || id != "x" {
		t.Fatalf("decode: %q %v %v", id, ok, err)
	}
	if got.ProducerID != 5 || got.PrevProducerID != 4 || got.Epoch != 9 || got.State != StatePrepareCommit || got.Timeout != m.Timeout ||
		!got.Started.Equal(now) || len(got.Partitions) != 3 || got.Partitions[2] != tp("b", 1) || got.ClientVersion != 2 {
		t.Fatalf("decoded %+v", got)
	}
	dead := m
	dead.State = StateDead
	if _, got, ok, err := decodeRecord(encodeRecord(&dead)); err != nil || !ok || got != nil {
		t.Fatalf("tombstone: %+v %v %v", got, ok, err)
	}
	if _, _, _, err := decodeRecord(Record{Key: []byte{0}}); err == nil {
		t.Fatal("short key accepted")
	}
}

// TestTransactionsV2TimeoutAtTheLastEpochRotates: a transactions v2 transaction
// timed out at the last epoch (32766) is aborted with the next producer id chosen in
// PrepareAbort, as Kafka does since KAFKA-20090: the markers go out under the old id
// at MaxInt16 and the transactional id moves to the new id at epoch 0. The producer's
// late abort is a retry answered with the new id, its late commit is fenced, and its
// InitProducerId naming the old id at 32766 is a retry answered with the new id too;
// before, the abort completed at MaxInt16 and the late abort was answered MaxInt16,
// an epoch no producer may use.
func TestTransactionsV2TimeoutAtTheLastEpochRotates(t *testing.T) {
	h := newHarness(t)
	p := h.initAtLastEpoch("app")
	h.addV2("app", p, tp("t", 0))
	h.markers.setHold(true)
	h.clock.Advance(61 * time.Second) // timeout is 1 min
	prep := h.waitState("app", StatePrepareAbort)
	if prep.ProducerID != p.ProducerID || prep.Epoch != math.MaxInt16 || prep.NextProducerID < 0 || prep.NextProducerID == p.ProducerID {
		t.Fatalf("PrepareAbort of the timed out transaction: %+v", prep)
	}
	if got := h.end("app", p, false, true); got.Code != errConc {
		t.Fatalf("the late abort while the markers are written: %+v", got)
	}
	h.markers.setHold(false)
	m := h.waitState("app", StateCompleteAbort)
	if m.ProducerID != prep.NextProducerID || m.PrevProducerID != p.ProducerID || m.Epoch != 0 {
		t.Fatalf("after the abort: %+v", m)
	}
	if ms := h.markers.all(); len(ms) != 1 || ms[0].ProducerID != p.ProducerID || ms[0].ProducerEpoch != math.MaxInt16 {
		t.Fatalf("markers of the old id at the fencing epoch: %+v", ms)
	}
	newID := ProducerResult{ProducerID: m.ProducerID, Epoch: 0}
	if got := h.end("app", p, false, true); got != newID {
		t.Fatalf("the late abort: %+v, want %+v", got, newID)
	}
	if got := h.end("app", p, true, true); got.Code != errFence {
		t.Fatalf("the late commit: %+v", got)
	}
	if got := h.init("app", p.ProducerID, p.Epoch); got != newID {
		t.Fatalf("InitProducerId of the old id at its last epoch: %+v, want %+v", got, newID)
	}
	if got := h.mustInit("app"); got.ProducerID != m.ProducerID || got.Epoch != 1 {
		t.Fatalf("InitProducerId of a new producer: %+v", got)
	}
}

// TestTransactionsV2InitFencesAtTheLastEpoch: a new producer's InitProducerId fencing
// a transactions v2 transaction at the last epoch aborts it with the next producer id
// chosen in PrepareAbort (KAFKA-20090); the retry bumps the new id's epoch.
func TestTransactionsV2InitFencesAtTheLastEpoch(t *testing.T) {
	h := newHarness(t)
	p := h.initAtLastEpoch("app")
	h.addV2("app", p, tp("t", 0))
	if r := h.init("app", -1, -1); r.Code != errConc {
		t.Fatalf("init during the transaction: %+v", r)
	}
	m := h.waitState("app", StateCompleteAbort)
	if m.ProducerID == p.ProducerID || m.PrevProducerID != p.ProducerID || m.Epoch != 0 {
		t.Fatalf("after the fence: %+v", m)
	}
	if ms := h.markers.all(); len(ms) != 1 || ms[0].ProducerID != p.ProducerID || ms[0].ProducerEpoch != math.MaxInt16 {
		t.Fatalf("markers of the old id at the fencing epoch: %+v", ms)
	}
	if got := h.mustInit("app"); got.ProducerID != m.ProducerID || got.Epoch != 1 {
		t.Fatalf("the retried InitProducerId: %+v", got)
	}
}

// TestTimeoutAbortFollowsTheAddsVersion: the transaction version of a timed out
// transaction is the one its last add implied, as Kafka records it: a transactions v2
// produce's add makes the abort at the last epoch move to a new producer id, and an
// AddOffsetsToTxn after it, which Kafka takes for transactions v1, makes it a v1 fence
// at MaxInt16 under the same id.
func TestTimeoutAbortFollowsTheAddsVersion(t *testing.T) {
	h := newHarness(t)
	p := h.initAtLastEpoch("app")
	h.addV2("app", p, tp("t", 0))
	if code := recvT(t, h.c.AddOffsets("app", p.ProducerID, p.Epoch, "g")); code != 0 {
		t.Fatalf("AddOffsetsToTxn: %d", code)
	}
	h.clock.Advance(61 * time.Second) // timeout is 1 min
	if m := h.waitState("app", StateCompleteAbort); m.ProducerID != p.ProducerID || m.Epoch != math.MaxInt16 {
		t.Fatalf("after the timeout of a transaction whose last add was AddOffsetsToTxn: %+v", m)
	}
}
