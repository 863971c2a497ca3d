package txn

import (
	"errors"
	"maps"
	"math"
	"regexp"
	"slices"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Kafka error codes the coordinator answers.
var (
	codeNotCoordinator = kerr.NotCoordinator.Code
	codeLoadInProgress = kerr.CoordinatorLoadInProgress.Code
	codeNotAvailable   = kerr.CoordinatorNotAvailable.Code
	codeConcurrent     = kerr.ConcurrentTransactions.Code
	codeInvalidMapping = kerr.InvalidProducerIDMapping.Code
	codeFenced         = kerr.ProducerFenced.Code
	codeInvalidState   = kerr.InvalidTxnState.Code
	codeInvalidTimeout = kerr.InvalidTransactionTimeout.Code
	codeInvalidRequest = kerr.InvalidRequest.Code
	codeNotFound       = kerr.TransactionalIDNotFound.Code
)

// appendErrorCode maps a failed append to the code clients retry on.
func appendErrorCode(err error) int16 {
	if errors.Is(err, ErrNotCoordinator) {
		return codeNotCoordinator
	}
	return codeNotAvailable
}

// ProducerResult answers InitProducerId and EndTxn: an error code, or the producer id
// and epoch the producer uses from now on.
type ProducerResult struct {
	Code       int16
	ProducerID int64
	Epoch      int16
}

func failed(code int16) ProducerResult { return ProducerResult{Code: code, ProducerID: -1, Epoch: -1} }

// InitProducerID handles InitProducerId for a transactional id (v0–v5): a new
// transactional id gets a producer id at epoch 0, a known one its epoch bumped (a new
// id when the epoch is exhausted), which fences its previous producer; a transaction
// in progress is aborted first (the answer is then CONCURRENT_TRANSACTIONS and the
// producer retries). expectedID and expectedEpoch (KIP-360, -1 when not given) are the
// producer id and epoch of a producer that re-initializes itself. The channel receives
// exactly one result.
func (c *Coordinator) InitProducerID(id string, timeout time.Duration, expectedID int64, expectedEpoch int16) <-chan ProducerResult {
	ch := make(chan ProducerResult, 1)
	switch {
	case id == "":
		ch <- failed(codeInvalidRequest)
		return ch
	case timeout <= 0 || timeout > c.cfg.MaxTimeout:
		ch <- failed(codeInvalidTimeout)
		return ch
	}
	var exp *claimedProducer
	if expectedID >= 0 && expectedEpoch >= 0 {
		exp = &claimedProducer{producerID: expectedID, epoch: expectedEpoch}
	}
	c.withProducerID(ch, func(allocated int64) bool { return c.initLocked(id, timeout, exp, allocated, ch) })
	return ch
}

// withProducerID runs try under the lock; when it reports that it needs a new
// producer id, one is allocated outside the lock and try runs again with it.
func (c *Coordinator) withProducerID(ch chan ProducerResult, try func(allocated int64) (needID bool)) {
	c.mu.Lock()
	need := try(-1)
	c.mu.Unlock()
	if !need {
		return
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		pid, err := c.allocateProducerID()
		c.mu.Lock()
		defer c.mu.Unlock()
		if err != nil {
			c.logger.Warn("cannot allocate a producer id", "err", err)
			ch <- failed(codeNotAvailable)
			return
		}
		if try(pid) {
			ch <- failed(codeNotAvailable)
		}
	}()
}

func (c *Coordinator) initLocked(id string, timeout time.Duration, exp *claimedProducer, allocated int64, ch chan ProducerResult) (needID bool) {
	part, code := c.partitionOfLocked(id)
	if code != 0 {
		ch <- failed(code)
		return false
	}
	now := c.clock.Now()
	e := part.txns[id]
	if e == nil {
		if allocated < 0 {
			return true
		}
		e = &entry{md: Metadata{TransactionalID: id, ProducerID: allocated, PrevProducerID: -1, NextProducerID: -1,
			Epoch: -1, LastEpoch: -1, Timeout: timeout, State: StateEmpty, Updated: now}}
		part.txns[id] = e
		allocated = -1
	}
	forgetUnwritten := func() {
		if e.md.Epoch < 0 && e.pending == nil && part.txns[id] == e {
			delete(part.txns, id) // created for this request and never written
		}
	}
	switch {
	case e.pending != nil:
		ch <- failed(codeConcurrent)
		return false
	case exp != nil && !e.md.validExpected(*exp):
		ch <- failed(codeFenced)
		return false
	}
	switch e.md.State {
	case StateEmpty, StateCompleteCommit, StateCompleteAbort:
		var next Metadata
		if epochExhausted(e.md.Epoch) && (exp == nil || exp.epoch == e.md.Epoch) {
			if allocated < 0 {
				return true
			}
			next = e.md.rotate(allocated, timeout, exp != nil, now)
		} else if next, code = e.md.incrementEpoch(timeout, exp, now); code != 0 {
			ch <- failed(code)
			return false
		}
		c.transitLocked(part, e, next, func(err error) {
			if err != nil {
				forgetUnwritten()
				ch <- failed(appendErrorCode(err))
				return
			}
			c.logger.Debug("initialized transactional id", "transactional_id", id, "producer_id", next.ProducerID, "epoch", next.Epoch)
			ch <- ProducerResult{ProducerID: next.ProducerID, Epoch: next.Epoch}
		})
	case StateOngoing:
		// The transaction of the previous producer is aborted with its epoch fenced;
		// the producer retries and gets the epoch after that.
		return c.fenceLocked(part, e, allocated, now, func(err error) {
			if err != nil {
				ch <- failed(appendErrorCode(err))
				return
			}
			ch <- failed(codeConcurrent)
		})
	default: // PrepareCommit, PrepareAbort: the markers are being written
		ch <- failed(codeConcurrent)
	}
	return false
}

// checkProducer checks a request's producer id and epoch against a transactional
// id's: the first error code applying, 0 when none. MaxInt16 is never handed out (it
// is kept for fencing), so no producer may use it.
func checkProducer(e *entry, producerID int64, epoch int16) int16 {
	switch {
	case e == nil || e.md.ProducerID != producerID:
		return codeInvalidMapping
	case e.md.Epoch != epoch || epoch == math.MaxInt16:
		return codeFenced
	}
	return 0
}

// AddPartitions handles AddPartitionsToTxn for one transaction (v0–v5; from v4 a
// broker sends several at once). It adds parts to the transaction (making it
// Ongoing), or with verifyOnly checks that they are in it (KIP-890: a partition
// leader verifying a transactional produce): INVALID_TXN_STATE for a partition that
// is not. The channel receives one code per partition, in the order of parts. v2 is
// the transaction version the request implies, which an add records, as in Kafka: set
// for the brokers' batched AddPartitionsToTxn (v4+, as a transactions v2 produce adds
// its partition), not for a client's AddPartitionsToTxn (v0–v3) or AddOffsetsToTxn,
// which Kafka takes for transactions v1 whatever the producer uses. The coordinator's
// abort of a timed out transaction follows the version recorded last.
func (c *Coordinator) AddPartitions(id string, producerID int64, epoch int16, parts []TopicPartition, verifyOnly, v2 bool) <-chan []int16 {
	ch := make(chan []int16, 1)
	all := func(code int16) []int16 {
		out := make([]int16, len(parts))
		for i := range out {
			out[i] = code
		}
		return out
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if id == "" {
		ch <- all(codeInvalidRequest)
		return ch
	}
	part, code := c.partitionOfLocked(id)
	if code != 0 {
		ch <- all(code)
		return ch
	}
	e := part.txns[id]
	if e != nil && (e.md.State == StatePrepareCommit || e.md.State == StatePrepareAbort) {
		// The producer a transactions v2 end answered, with a new producer id if its
		// epoch was exhausted, adds before the markers are written: it waits, as in
		// Kafka (the new id is not the transactional id's until the end completes).
		if pid, ep := e.md.answerProducer(); producerID == pid && epoch == ep {
			ch <- all(codeConcurrent)
			return ch
		}
	}
	if code := checkProducer(e, producerID, epoch); code != 0 {
		ch <- all(code)
		return ch
	}
	// An add may follow an add still being written (produces to several partitions
	// starting a transaction at once); anything else waits for the write.
	base := &e.md
	if p := e.pending; p != nil {
		if p.State != StateOngoing || verifyOnly {
			ch <- all(codeConcurrent)
			return ch
		}
		base = p
	}
	switch {
	case base.State == StatePrepareCommit || base.State == StatePrepareAbort:
		ch <- all(codeConcurrent)
		return ch
	case verifyOnly:
		out := make([]int16, len(parts))
		for i, p := range parts {
			if base.State != StateOngoing || !base.inTransaction(p) {
				out[i] = codeInvalidState
			}
		}
		ch <- out
		return ch
	case e.pending == nil && base.State == StateOngoing && base.hasPartitions(parts):
		ch <- all(0)
		return ch
	}
	next := base.addPartitions(parts, c.clock.Now())
	next.ClientVersion = 0
	if v2 {
		next.ClientVersion = 2
	}
	c.transitLocked(part, e, next, func(err error) {
		if err != nil {
			ch <- all(appendErrorCode(err))
			return
		}
		ch <- all(0)
	})
	return ch
}

// AddOffsets handles AddOffsetsToTxn (v0–v4): the __consumer_offsets partition of the
// group joins the transaction, so that its TxnOffsetCommit is committed or aborted
// with it. The channel receives exactly one code.
func (c *Coordinator) AddOffsets(id string, producerID int64, epoch int16, group string) <-chan int16 {
	ch := make(chan int16, 1)
	tp := TopicPartition{Topic: OffsetsTopic, Partition: c.offsetsPartition(group)}
	codes := c.AddPartitions(id, producerID, epoch, []TopicPartition{tp}, false, false)
	go func() { ch <- (<-codes)[0] }()
	return ch
}

// EndTxn handles EndTxn (v0–v5): an Ongoing transaction becomes PrepareCommit or
// PrepareAbort (answered at once), its markers are written and it completes. With
// transactions v2 (v2: EndTxn v5, KIP-890 part 2) every end bumps the epoch — the
// answer carries the producer id and epoch to use next —, an empty transaction may
// be aborted, a retry of an end whose answer was lost (the epoch before the bump)
// is answered as it was, and the end of the next transaction while this one's markers
// are still being written is CONCURRENT_TRANSACTIONS. The channel receives exactly
// one result.
func (c *Coordinator) EndTxn(id string, producerID int64, epoch int16, commit, v2 bool) <-chan ProducerResult {
	ch := make(chan ProducerResult, 1)
	if id == "" {
		ch <- failed(codeInvalidRequest)
		return ch
	}
	c.withProducerID(ch, func(allocated int64) bool { return c.endLocked(id, producerID, epoch, commit, v2, allocated, ch) })
	return ch
}

func (c *Coordinator) endLocked(id string, producerID int64, epoch int16, commit, v2 bool, allocated int64, ch chan ProducerResult) (needID bool) {
	part, code := c.partitionOfLocked(id)
	if code != 0 {
		ch <- failed(code)
		return false
	}
	e := part.txns[id]
	if e == nil {
		ch <- failed(codeInvalidMapping)
		return false
	}
	m := &e.md
	// Retries of a transactions v2 end whose answer was lost: the epoch before the
	// bump, or the id before a rotation. An ended transaction (Prepare*, Complete*) is
	// always one epoch past the request that ended it, which Kafka takes as the retry
	// (its retryOnEpochBump): that holds after a reload too, where LastEpoch is not
	// known (not stored). The rotating end's markers are at MaxInt16 under the old id.
	ended := m.State == StatePrepareCommit || m.State == StatePrepareAbort ||
		m.State == StateCompleteCommit || m.State == StateCompleteAbort
	retryRotation := v2 && producerID != m.ProducerID && producerID == m.PrevProducerID && epoch == math.MaxInt16-1 && m.Epoch == 0
	retryBump := v2 && producerID == m.ProducerID && epoch == m.Epoch-1 && (epoch == m.LastEpoch || ended)
	retry := retryRotation || retryBump
	if v2 && !retry && (m.State == StatePrepareCommit || m.State == StatePrepareAbort) {
		// The producer the prepare answered ends its next transaction while the
		// markers of this one are still being written (a client aborts an empty
		// transaction right after a commit): it waits, as for an add, and as Kafka
		// answers it since KAFKA-18464 (4.0; before, PRODUCER_FENCED).
		if pid, ep := m.answerProducer(); producerID == pid && epoch == ep {
			ch <- failed(codeConcurrent)
			return false
		}
	}
	switch {
	case producerID != m.ProducerID && !retryRotation:
		ch <- failed(codeInvalidMapping)
		return false
	case (epoch != m.Epoch || epoch == math.MaxInt16) && !retry: // MaxInt16: see checkProducer
		ch <- failed(codeFenced)
		return false
	case e.pending != nil:
		ch <- failed(codeConcurrent)
		return false
	}
	current := func() ProducerResult {
		pid, ep := m.answerProducer()
		return ProducerResult{ProducerID: pid, Epoch: ep}
	}
	matches := m.State == StateCompleteCommit && commit || m.State == StateCompleteAbort && !commit
	switch m.State {
	case StateOngoing:
		if retry {
			ch <- failed(codeFenced)
			return false
		}
	case StatePrepareCommit, StatePrepareAbort:
		// The markers are being written: whatever the end asks, it waits, as in Kafka
		// (whose completion is pending all that time). Once they are, a retry asking
		// the other outcome is answered below.
		ch <- failed(codeConcurrent)
		return false
	case StateEmpty, StateCompleteCommit, StateCompleteAbort:
		switch {
		case matches && (retry || !v2):
			ch <- current()
			return false
		case retry && commit && m.State == StateCompleteAbort:
			// Only an abort the coordinator made (a timeout, or a new producer's
			// InitProducerId) leaves the producer's own commit at the epoch before the
			// bump: the producer is fenced, as Kafka answers it (KAFKA-20785). Its
			// abort is answered as the abort was (matches, above), as in Kafka.
			ch <- failed(codeFenced)
			return false
		case !(v2 && !commit && !retry):
			ch <- failed(codeInvalidState)
			return false
		}
		// Transactions v2 abort an empty transaction too: it bumps the epoch.
	default:
		ch <- failed(codeInvalidState)
		return false
	}
	nextID := int64(-1)
	if v2 && epochExhausted(m.Epoch) {
		if allocated < 0 {
			return true
		}
		nextID = allocated
	}
	next := m.prepareEnd(commit, v2, false, nextID, c.clock.Now())
	// The end's version is the transaction's, as in Kafka's prepareAbortOrCommit: the
	// markers carry it, and a marker of version 2 must be above the records' epoch,
	// which only an end that bumped it (EndTxn v5) gives.
	next.ClientVersion = 0
	if v2 {
		next.ClientVersion = 2
	}
	c.transitLocked(part, e, next, func(err error) {
		if err != nil {
			ch <- failed(appendErrorCode(err))
			return
		}
		pid, ep := next.answerProducer()
		ch <- ProducerResult{ProducerID: pid, Epoch: ep}
	})
	return false
}

// Describe returns a transactional id's state (DescribeTransactions):
// TRANSACTIONAL_ID_NOT_FOUND when it is not known, NOT_COORDINATOR or
// COORDINATOR_LOAD_IN_PROGRESS when not served here.
func (c *Coordinator) Describe(id string) (Metadata, int16) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if id == "" {
		return Metadata{}, codeInvalidRequest
	}
	part, code := c.partitionOfLocked(id)
	if code != 0 {
		return Metadata{}, code
	}
	e := part.txns[id]
	if e == nil {
		return Metadata{}, codeNotFound
	}
	return e.md.clone(), 0
}

// ListFilter selects transactions (ListTransactions): empty lists match everything,
// MinDuration < 0 every transaction (else the Ongoing ones running longer than that,
// in milliseconds, as Kafka compares them), a nil Pattern every id.
type ListFilter struct {
	States      []State
	ProducerIDs []int64
	MinDuration time.Duration
	Pattern     *regexp.Regexp
}

// List returns the transactions this node coordinates that match f, sorted by id
// (ListTransactions). The code is COORDINATOR_LOAD_IN_PROGRESS while a partition is
// loading (its transactions are missing from the answer).
//
// The lock is taken per partition to copy its transactional ids, then per listChunk
// ids, so that listing many does not hold off every other transaction's requests.
// An id created meanwhile may be missing from the answer; none appears twice.
func (c *Coordinator) List(f ListFilter) ([]Metadata, int16) {
	c.mu.Lock()
	parts := slices.Collect(maps.Values(c.mu.partitions))
	c.mu.Unlock()
	now := c.clock.Now()
	var out []Metadata
	var code int16
	for _, part := range parts {
		ids, loading := c.txnIDsOf(part)
		if loading {
			code = codeLoadInProgress
		}
		for chunk := range slices.Chunk(ids, listChunk) {
			c.mu.Lock()
			for _, id := range chunk {
				if c.mu.partitions[part.id] != part {
					break // unloaded meanwhile: its ids are no longer served here
				}
				e := part.txns[id]
				if e == nil {
					continue
				}
				m := &e.md
				switch {
				case m.Epoch < 0:
				case len(f.States) > 0 && !slices.Contains(f.States, m.State):
				case len(f.ProducerIDs) > 0 && !slices.Contains(f.ProducerIDs, m.ProducerID):
				case f.MinDuration >= 0 && (m.State != StateOngoing || now.UnixMilli()-m.Started.UnixMilli() <= f.MinDuration.Milliseconds()):
				case f.Pattern != nil && !f.Pattern.MatchString(m.TransactionalID):
				default:
					out = append(out, m.clone())
				}
			}
			c.mu.Unlock()
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].TransactionalID < out[j].TransactionalID })
	return out, code
}

// listChunk is how many transactional ids List looks at per taking of the lock.
const listChunk = 1000

// txnIDsOf returns the transactional ids of a partition, or loading when the
// partition is loading (nil when it is no longer served here).
func (c *Coordinator) txnIDsOf(part *partition) (ids []string, loading bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.partitions[part.id] != part {
		return nil, false
	}
	if part.loading {
		return nil, true
	}
	return slices.Collect(maps.Keys(part.txns)), false
}

// Stats summarizes the transactions this node coordinates, for metrics.
type Stats struct {
	Ongoing, Prepared int
	// OldestOngoing is how long the oldest Ongoing transaction has been open.
	OldestOngoing time.Duration
}

// Stats returns the counts of open transactions.
func (c *Coordinator) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.clock.Now()
	var s Stats
	for _, part := range c.mu.partitions {
		for _, e := range part.txns {
			switch e.md.State {
			case StateOngoing:
				s.Ongoing++
				s.OldestOngoing = max(s.OldestOngoing, now.Sub(e.md.Started))
			case StatePrepareCommit, StatePrepareAbort:
				s.Prepared++
			}
		}
	}
	return s
}
