package share

import (
	"errors"
	"time"
)

// Record states of a share partition (Kafka's RecordState numbering: the persisted
// snapshot stores these values).
const (
	Available    uint8 = 0
	Acquired     uint8 = 1
	Acknowledged uint8 = 2
	Archived     uint8 = 4
)

// Acknowledgement types of ShareFetch and ShareAcknowledge.
const (
	AckGap     int8 = 0
	AckAccept  int8 = 1
	AckRelease int8 = 2
	AckReject  int8 = 3
	AckRenew   int8 = 4
)

// Errors of Acknowledge; the broker maps them to INVALID_RECORD_STATE and
// INVALID_REQUEST.
var (
	ErrInvalidRecordState = errors.New("share: record not acquired by this member")
	ErrInvalidAck         = errors.New("share: invalid acknowledgement")
	// ErrWindowTooWide: a state would span more than MaxWindow offsets.
	ErrWindowTooWide = errors.New("share: window too wide")
)

// Errors a Store returns when the share coordinator refuses a write (Kafka's
// FENCED_LEADER_EPOCH and FENCED_STATE_EPOCH): the partition in memory is stale and
// Manager drops it, so that its next use reads the state again.
var (
	ErrFencedLeaderEpoch = errors.New("share: a newer leader of the topic partition has read the state")
	ErrFencedStateEpoch  = errors.New("share: the state was initialized again (a newer state epoch)")
)

// MaxWindow is the most offsets a share partition's window spans. Its records are held
// one per offset, so an acquisition stops there, and a stored state or a share
// coordinator's write that would span more is refused. In use the window stays far
// below it: share.partition.max.record.locks is at most 10,000, and past that
// only the rest of one batch is acquired.
const MaxWindow = 1 << 20

// PartitionConfig are the per-group limits of a share partition.
type PartitionConfig struct {
	LockDuration  time.Duration // share.record.lock.duration.ms
	DeliveryLimit int16         // share.delivery.count.limit
	MaxInFlight   int           // share.partition.max.record.locks (KIP-1240)
}

// record is one offset of the window. It holds no pointer (the member is an index
// into Partition.members), so that a window of thousands of records is neither
// scanned by the garbage collector nor written with write barriers.
type record struct {
	state      uint8
	deliveries int16
	member     int32 // while Acquired: its index in Partition.members
	deadline   int64 // while Acquired: the lock expires then (Unix nanoseconds)
}

// changeSpan is what of a window changed since its state was last written: the
// offsets [from, to) changed in place, and those from appended on were appended
// (appended -1: none).
type changeSpan struct {
	from, to int64
	appended int64
}

// noChanges is the changeSpan of a window as it was written.
var noChanges = changeSpan{appended: -1}

// Partition is the state of one share partition: the window [start, end) of offsets
// the group has looked at, and each offset's state. Offsets below start are done
// (acknowledged or archived); offsets from end on were never acquired. It is a pure
// state machine: not safe for concurrent use, no clock, no I/O.
type Partition struct {
	cfg PartitionConfig
	// stateEpoch is Kafka's state epoch: Reset (AlterShareGroupOffsets) moves it on,
	// and the share coordinator refuses writes of an older one.
	stateEpoch int32
	// reset is set by Reset until TakeReset: the next persist replaces the stored
	// state instead of adding to it.
	reset bool
	start int64
	end   int64
	// recs[i] is offset start+i. Dropping done records from the front reslices it
	// (append copies only the live part when it grows), so a window of thousands of
	// records is never moved as a whole. arr is the array recs lies in: once the
	// records dropped from its front outnumber the window, Commit moves the window
	// back to its start (compactWindow), so that the array is reused rather than a
	// new one allocated as the window's front moves on.
	recs []record
	arr  []record
	// availFrom: no record below it is Available (where NextFetchOffset looks from).
	availFrom int64
	// earliest is at or before the earliest lock deadline (zero: nothing acquired
	// since the last full look); a timer armed for it may fire early, never late.
	earliest time.Time
	// dirty is set when something the snapshot holds changed; freed when records
	// became acquirable: available again, or room made by the window moving (a
	// waiting fetch may succeed now).
	dirty, freed bool
	// unstored are the offsets whose stored form may differ from the window's since
	// ClearDirty (what Changes gives). Outside them, the stored state is the window.
	unstored changeSpan
	// journal records what changes between Begin and Commit so that Rollback can
	// undo it (a snapshot write that failed).
	journal journal
	// members are the member ids records refer to (index 0: none), memberIndex
	// their indexes. Ids are added as members acquire records and dropped
	// (compactMembers) only outside a Begin–Commit span, so that what Rollback
	// restores still refers to the right ids.
	members     []string
	memberIndex map[string]int32
}

// memberOf returns member's index, adding it when add is set (0: not known).
func (p *Partition) memberOf(member string, add bool) int32 {
	if i, ok := p.memberIndex[member]; ok || !add {
		return i
	}
	if p.memberIndex == nil {
		p.memberIndex = map[string]int32{}
		p.members = []string{""}
	}
	p.compactMembers()
	i := int32(len(p.members))
	p.members = append(p.members, member)
	p.memberIndex[member] = i
	return i
}

// compactMembers drops the member ids no record refers to once there are many of
// them (members that left), unless a change is being recorded (Begin).
func (p *Partition) compactMembers() {
	if len(p.members) < 64 || p.journal.active {
		return
	}
	used := make([]int32, len(p.members))
	for _, r := range p.recs {
		if r.state == Acquired {
			used[r.member] = 1
		}
	}
	live := 0
	for _, u := range used {
		live += int(u)
	}
	if 2*(live+1) > len(p.members) {
		return
	}
	members := []string{""}
	clear(p.memberIndex)
	for i, u := range used {
		if u != 0 {
			used[i] = int32(len(members))
			p.memberIndex[p.members[i]] = used[i]
			members = append(members, p.members[i])
		}
	}
	for i := range p.recs {
		if r := &p.recs[i]; r.state == Acquired {
			r.member = used[r.member]
		}
	}
	p.members = members
}

// NewPartition returns a partition whose window starts (and ends) at start.
func NewPartition(cfg PartitionConfig, start int64) *Partition {
	return &Partition{cfg: cfg, start: start, end: start, unstored: noChanges}
}

// SetConfig changes the partition's limits (a group config changed).
func (p *Partition) SetConfig(cfg PartitionConfig) { p.cfg = cfg }

// StateEpoch is the partition's state epoch.
func (p *Partition) StateEpoch() int32 { return p.stateEpoch }

// TakeReset reports (and forgets) whether Reset was called since the last call.
func (p *Partition) TakeReset() bool {
	r := p.reset
	p.reset = false
	return r
}

// Start is the share-partition start offset (SPSO).
func (p *Partition) Start() int64 { return p.start }

// End is the share-partition end offset (SPEO).
func (p *Partition) End() int64 { return p.end }

// Dirty reports whether the persisted state changed since ClearDirty.
func (p *Partition) Dirty() bool { return p.dirty }

// ClearDirty marks the current state as persisted.
func (p *Partition) ClearDirty() {
	p.dirty = false
	p.unstored = noChanges
}

// changed notes that the offsets [from, to), inside the window, change in place.
func (p *Partition) changed(from, to int64) {
	if p.unstored.appended >= 0 { // from there on, noted as appended
		to = min(to, p.unstored.appended)
	}
	switch {
	case from >= to:
	case p.unstored.from >= p.unstored.to:
		p.unstored.from, p.unstored.to = from, to
	default:
		p.unstored.from, p.unstored.to = min(p.unstored.from, from), max(p.unstored.to, to)
	}
}

// TakeFreed reports (and forgets) whether records became acquirable since the last
// call: released, their lock expired, or the window moved.
func (p *Partition) TakeFreed() bool {
	f := p.freed
	p.freed = false
	return f
}

// NextFetchOffset is where a fetch should read from: the first Available offset of the
// window, else the end; ok is false when nothing can be acquired (the window is full
// of acquired records).
func (p *Partition) NextFetchOffset() (offset int64, ok bool) {
	for o := max(p.availFrom, p.start); o < p.end; o++ {
		if p.recs[o-p.start].state == Available {
			p.availFrom = o
			return o, true
		}
	}
	p.availFrom = p.end
	return p.end, len(p.recs) < p.cfg.MaxInFlight
}

// appendRecord extends the window by one record. A full array is replaced by one of
// three times the window (at least MaxInFlight): the window slides through it,
// dropping done records from the front, and Commit moves it back to the array's start
// (compactWindow) once those outnumber the window. A window that keeps its width
// keeps the array: between two Commits it can drop up to its width of records and
// take as many, after up to its width dropped and not yet moved back. Like append,
// it never writes inside the slice Begin saved.
func (p *Partition) appendRecord(r record) { p.appendRecords(1, r) }

// appendRecords extends the window by n records r (appendRecord's array, grown to
// hold them all at once).
func (p *Partition) appendRecords(n int, r record) {
	if o := p.start + int64(len(p.recs)); p.unstored.appended < 0 || p.unstored.appended > o {
		p.unstored.appended = o
	}
	k := len(p.recs)
	if k+n > cap(p.recs) {
		p.arr = make([]record, max(3*k, p.cfg.MaxInFlight, 16, k+n))
		p.recs = p.arr[:copy(p.arr, p.recs)]
	}
	p.recs = p.recs[:k+n]
	for i := range p.recs[k:] {
		p.recs[k+i] = r
	}
}

// compactWindow moves the window to the start of its array once the records dropped
// from the array's front outnumber the window (each record is so moved at most once
// for every record dropped). Outside Begin–Commit only: Rollback restores a saved
// slice of the array, whose records must stay where they are.
func (p *Partition) compactWindow() {
	if p.journal.active {
		return
	}
	if dropped := cap(p.arr) - cap(p.recs); dropped > 0 && dropped >= len(p.recs) {
		p.recs = p.arr[:copy(p.arr, p.recs)]
	}
}

// madeAvailable notes that offset o became Available.
func (p *Partition) madeAvailable(o int64) { p.availFrom = min(p.availFrom, o) }

// dropFront removes the first n records of the window. Their memory is left as it
// is (they hold no pointer), so Rollback gets them back by restoring the slice. The
// move frees room for a waiting fetch only if it leaves the window under its limit:
// a batch acquired whole may have taken it past, and a fetch woken while it is still
// full would find nothing (NextFetchOffset).
func (p *Partition) dropFront(n int) {
	p.recs = p.recs[n:]
	p.start += int64(n)
	p.dirty = true
	if len(p.recs) < p.cfg.MaxInFlight {
		p.freed = true
	}
}

// AdvanceStart moves the start to at least offset (the log start moved past it, or an
// offset reset): what lies below is dropped.
func (p *Partition) AdvanceStart(offset int64) {
	if offset <= p.start {
		return
	}
	if offset >= p.end {
		p.emptyAt(offset)
		return
	}
	p.dropFront(int(offset - p.start))
}

// Reset sets the window to start empty at offset under a new state epoch
// (AlterShareGroupOffsets): what was stored is replaced, not added to.
func (p *Partition) Reset(offset int64) {
	p.emptyAt(offset)
	p.stateEpoch++
	p.reset = true
}

// emptyAt empties the window and starts it at offset.
func (p *Partition) emptyAt(offset int64) {
	p.journal.detached = true
	// What changed lies outside the new window (a reset replaces the stored state).
	p.unstored = noChanges
	p.recs, p.arr = nil, nil
	p.start, p.end, p.availFrom = offset, offset, offset
	p.dirty, p.freed = true, true
}

// AcquiredRun is a run of consecutive offsets handed to a member with one delivery count.
type AcquiredRun struct {
	First, Last   int64
	DeliveryCount int16
}

// Acquire hands member the acquirable offsets within the batches given (each
// [first, last] as read from the log, below highWatermark), up to maxRecords offsets
// (at least the rest of a batch once started, as Kafka's batch-optimized mode; strict
// stops at maxRecords exactly). Records whose delivery count would pass the limit are
// archived instead. The window grows by whole batches as well: MaxInFlight is checked
// where a batch starts, so the last batch taken may pass it (as Kafka acquires to the
// end of the batch that holds its limit); strict stops at MaxInFlight exactly.
func (p *Partition) Acquire(member string, batches [][2]int64, highWatermark int64, maxRecords int, strict bool, now time.Time) []AcquiredRun {
	var out []AcquiredRun
	taken := 0
	deadline := now.Add(p.cfg.LockDuration)
	deadlineNanos := deadline.UnixNano()
	var m int32
	for _, b := range batches {
		if taken >= maxRecords {
			break
		}
		first := max(b[0], p.start)
		for o := first; o <= b[1] && o < highWatermark; o++ {
			if strict && taken >= maxRecords {
				break
			}
			if o >= p.end {
				if o > p.end && p.start == p.end {
					// The log has no record between the empty window and o (compaction
					// removed them, or they are markers read_committed skips): the
					// window moves to o instead of holding those offsets as done.
					p.start, p.end, p.availFrom = o, o, o
					p.dirty = true
				}
				// The window's width once it reaches o, counting offsets the log no
				// longer has, which it holds as done until the records before them are.
				width := o - p.start
				if width >= int64(p.cfg.MaxInFlight) && (strict || o == first) || width >= MaxWindow {
					break
				}
				for p.end < o { // offsets the log no longer has (compaction): done
					p.appendRecord(record{state: Archived})
					p.end++
				}
				if !strict && p.cfg.DeliveryLimit > 0 {
					// The rest of the batch is new to the window (the in-flight limit
					// is checked where a batch starts): acquired at once.
					last := min(b[1], highWatermark-1, p.start+MaxWindow-1)
					if m == 0 {
						m = p.memberOf(member, true)
					}
					p.appendRecords(int(last-o+1), record{state: Acquired, deliveries: 1, member: m, deadline: deadlineNanos})
					p.end = last + 1
					taken += int(last - o + 1)
					if n := len(out); n > 0 && out[n-1].Last == o-1 && out[n-1].DeliveryCount == 1 {
						out[n-1].Last = last
					} else {
						out = append(out, AcquiredRun{First: o, Last: last, DeliveryCount: 1})
					}
					break
				}
				p.appendRecord(record{})
				p.end++
			}
			r := &p.recs[o-p.start]
			if r.state != Available {
				continue
			}
			p.touch(o)
			if r.deliveries >= p.cfg.DeliveryLimit {
				r.state = Archived
				p.dirty = true
				continue
			}
			if m == 0 {
				m = p.memberOf(member, true)
			}
			r.state, r.member, r.deadline = Acquired, m, deadlineNanos
			r.deliveries++
			taken++
			if n := len(out); n > 0 && out[n-1].Last == o-1 && out[n-1].DeliveryCount == r.deliveries {
				out[n-1].Last = o
			} else {
				out = append(out, AcquiredRun{First: o, Last: o, DeliveryCount: r.deliveries})
			}
		}
	}
	if taken > 0 && (p.earliest.IsZero() || deadline.Before(p.earliest)) {
		p.earliest = deadline
	}
	p.advance()
	return out
}

// ArchiveUndelivered archives the offsets [first, last] below highWatermark that were
// never acquired or are available again — records a read_committed group must not
// deliver (an aborted transaction's) —, extending the window over them as Acquire
// does, within MaxInFlight. Offsets past the end are archived only from the end on:
// the window never skips offsets not yet looked at.
func (p *Partition) ArchiveUndelivered(first, last, highWatermark int64) {
	for o := max(first, p.start); o <= last && o < highWatermark; o++ {
		if o >= p.end {
			if o > p.end || len(p.recs) >= p.cfg.MaxInFlight {
				break
			}
			p.appendRecord(record{state: Archived})
			p.end++
			p.dirty = true
			continue
		}
		if r := &p.recs[o-p.start]; r.state == Available {
			p.touch(o)
			r.state = Archived
			p.dirty = true
		}
	}
	p.advance()
}

// AckCounts are numbers of records by acknowledgement type, indexed by the type
// (AckGap … AckRenew).
type AckCounts [AckRenew + 1]int

// Acknowledge applies one acknowledgement batch of member: types holds one type for
// the whole range, or one per offset. Every offset must be acquired by member with its
// lock still held; otherwise nothing changes and ErrInvalidRecordState is returned.
// Offsets below the start (the log start moved past them after they were acquired)
// are skipped, as Kafka does, unless the whole batch lies there. The records applied
// are added to counts (nil: not counted) by type; none when it fails.
func (p *Partition) Acknowledge(member string, first, last int64, types []int8, now time.Time, counts *AckCounts) error {
	// first >= 0 keeps last-first+1 from overflowing, so no count of types matches a
	// range wider than an int64 holds.
	if first < 0 || last < first || len(types) == 0 || len(types) != 1 && int64(len(types)) != last-first+1 {
		return ErrInvalidAck
	}
	if first < p.start && last >= p.start {
		if len(types) > 1 {
			types = types[p.start-first:]
		}
		first = p.start
	}
	for _, t := range types {
		if t < AckGap || t > AckRenew {
			return ErrInvalidAck
		}
	}
	if first < p.start || last >= p.end {
		return ErrInvalidRecordState
	}
	m, nowNanos := p.memberOf(member, false), now.UnixNano()
	if m == 0 {
		return ErrInvalidRecordState
	}
	for _, r := range p.recs[first-p.start : last-p.start+1] {
		if r.state != Acquired || r.member != m || nowNanos >= r.deadline {
			return ErrInvalidRecordState
		}
	}
	p.touchRange(first, last+1)
	recs := p.recs[first-p.start : last-p.start+1]
	perOffset := len(types) > 1
	if counts != nil && !perOffset {
		counts[types[0]] += len(recs)
	}
	for i := range recs {
		t := types[0]
		if perOffset {
			t = types[i]
			if counts != nil {
				counts[t]++
			}
		}
		r := &recs[i]
		switch t {
		case AckAccept:
			r.state = Acknowledged
		case AckGap, AckReject:
			r.state = Archived
		case AckRelease:
			p.release(first+int64(i), r)
		case AckRenew:
			r.deadline = now.Add(p.cfg.LockDuration).UnixNano()
			continue
		}
		r.member, r.deadline = 0, 0
		p.dirty = true
	}
	// Accepted or archived, a record is not acquirable: only a window that moves
	// (advance) or a release frees anything for a waiting fetch.
	p.advance()
	return nil
}

// release makes an acquired record available again, or archives it at the delivery
// limit.
func (p *Partition) release(o int64, r *record) {
	p.touch(o)
	r.state = Available
	if r.deliveries >= p.cfg.DeliveryLimit {
		r.state = Archived
	} else {
		p.madeAvailable(o)
	}
	r.member, r.deadline = 0, 0
	p.dirty, p.freed = true, true
}

// ReleaseMember releases every record member holds (it left, or closed its session).
// As Kafka does, they go back with their delivery count lowered by one — acquired, but
// most likely never processed (a client closing releases what it fetched and did not
// hand out) — so that none is archived for the delivery limit here.
func (p *Partition) ReleaseMember(member string) {
	m := p.memberOf(member, false)
	for i := range p.recs {
		if r := &p.recs[i]; m != 0 && r.state == Acquired && r.member == m {
			o := p.start + int64(i)
			p.touch(o)
			r.state, r.member, r.deadline = Available, 0, 0
			r.deliveries = max(r.deliveries-1, 0)
			p.madeAvailable(o)
			p.dirty, p.freed = true, true
		}
	}
	p.advance()
}

// ExpireLocks releases the records whose acquisition lock expired by now (archiving
// those at the delivery count limit); it returns how many there were.
func (p *Partition) ExpireLocks(now time.Time) int {
	expired := 0
	nowNanos := now.UnixNano()
	earliest := int64(0)
	for i := range p.recs {
		r := &p.recs[i]
		if r.state != Acquired {
			continue
		}
		if nowNanos >= r.deadline {
			p.release(p.start+int64(i), r)
			expired++
		} else if earliest == 0 || r.deadline < earliest {
			earliest = r.deadline
		}
	}
	p.earliest = time.Time{}
	if earliest != 0 {
		p.earliest = time.Unix(0, earliest)
	}
	p.advance()
	return expired
}

// HoldsStart reports whether member holds the window's first record. While the
// window is full, only that record's acknowledgement moves it on: a fetch of its
// holder that waited for room would wait for its own acknowledgements.
func (p *Partition) HoldsStart(member string) bool {
	m := p.memberOf(member, false)
	return m != 0 && len(p.recs) > 0 && p.recs[0].state == Acquired && p.recs[0].member == m
}

// NextDeadline is when a lock may expire first (possibly earlier than any does: a
// timer armed for it looks again), zero when nothing is acquired.
func (p *Partition) NextDeadline() time.Time { return p.earliest }

// advance moves the start past done records.
func (p *Partition) advance() {
	n := 0
	for n < len(p.recs) && (p.recs[n].state == Acknowledged || p.recs[n].state == Archived) {
		n++
	}
	if n > 0 {
		p.dropFront(n)
	}
}

// StateOf returns an offset's state and delivery count (for tests and Describe).
func (p *Partition) StateOf(offset int64) (state uint8, deliveries int16) {
	switch {
	case offset < p.start:
		return Acknowledged, 0
	case offset >= p.end:
		return Available, 0
	}
	r := p.recs[offset-p.start]
	return r.state, r.deliveries
}
