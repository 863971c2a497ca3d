package share

import "time"

// journal lets a Partition undo what changed since Begin: Manager applies a change,
// writes the snapshot, and rolls the change back when the write failed, so that what
// the members hold stays as it was (an acknowledgement that was refused can be sent
// again, and its records are still acquired by the member).
//
// The window's scalars and the records slice are saved at Begin. The records are
// changed in three ways: in place (touch saves the old value first), by appending
// (which never writes inside the saved slice: appends go past its end or into a new
// array), by dropping from the front (dropFront only reslices: the dropped records
// stay as they were in the saved slice), and by emptying the window (emptyAt, after
// which every record is new). So restoring the saved slice and then the touched
// values, newest first, gives back the partition as it was at Begin. The member ids
// records refer to are only added to while a change is recorded
// (Partition.compactMembers waits for Commit), so restored records keep theirs.
type journal struct {
	active     bool
	stateEpoch int32
	reset      bool
	start, end int64
	availFrom  int64
	earliest   time.Time
	dirty      bool
	freed      bool
	unstored   changeSpan
	recs, arr  []record
	// touched are the runs of records changed in place, in the order they were
	// saved; their old values lie in saved.
	touched []touchedRun
	saved   []record
	// detached: the window was emptied (emptyAt) since Begin; the records from then
	// on live in a new array and may reuse saved offsets, so they are not touched.
	detached bool
}

// touchedRun: the records of offsets [offset, offset+n) were saved[at:at+n].
type touchedRun struct {
	offset int64
	at, n  int
}

// Begin starts recording changes; Commit or Rollback ends it.
func (p *Partition) Begin() {
	j := &p.journal
	j.active = true
	j.stateEpoch, j.reset = p.stateEpoch, p.reset
	j.start, j.end, j.availFrom, j.earliest = p.start, p.end, p.availFrom, p.earliest
	j.dirty, j.freed = p.dirty, p.freed
	j.unstored = p.unstored
	j.recs, j.arr = p.recs, p.arr
	j.touched, j.saved = j.touched[:0], j.saved[:0]
	j.detached = false
}

// Commit keeps the changes made since Begin.
func (p *Partition) Commit() {
	j := &p.journal
	j.active = false
	p.compactMembers()
	p.compactWindow()
	j.recs, j.arr = nil, nil
	j.touched, j.saved = j.touched[:0], j.saved[:0]
}

// Rollback undoes every change made since Begin, after a write of them failed.
func (p *Partition) Rollback() {
	if !p.journal.active {
		return
	}
	p.restore()
	// The write that failed may have been stored all the same (its answer was lost):
	// the next one carries the whole window, so that the stored state is the
	// window again.
	p.unstored.from, p.unstored.to = p.start, p.end
	p.Commit()
}

// Undo takes back every change made since Begin, before anything of them was
// written, and goes on recording as from a new Begin: a change refused part way (an
// acknowledgement batch that fails after others of its request were applied) leaves
// nothing behind, and what follows it in the same change is recorded as usual.
func (p *Partition) Undo() {
	j := &p.journal
	if !j.active {
		return
	}
	p.restore()
	j.touched, j.saved = j.touched[:0], j.saved[:0]
	j.detached = false
}

// restore sets the partition back to what Begin saved.
func (p *Partition) restore() {
	j := &p.journal
	p.stateEpoch, p.reset = j.stateEpoch, j.reset
	p.start, p.end, p.availFrom, p.earliest = j.start, j.end, j.availFrom, j.earliest
	p.dirty, p.freed = j.dirty, j.freed
	p.unstored = j.unstored
	p.recs, p.arr = j.recs, j.arr
	for i := len(j.touched) - 1; i >= 0; i-- {
		t := j.touched[i]
		for k := range t.n {
			if idx := t.offset + int64(k) - p.start; idx >= 0 && idx < int64(len(p.recs)) {
				p.recs[idx] = j.saved[t.at+k]
			}
		}
	}
}

// touch saves the record at offset o (inside the window) before it changes.
func (p *Partition) touch(o int64) { p.touchRange(o, o+1) }

// touchRange saves the records of offsets [from, to) (inside the window) before they
// change. A record appended since Begin (at or past the end it saved) needs no
// saving: restoring the saved slice drops it.
func (p *Partition) touchRange(from, to int64) {
	p.changed(from, to)
	j := &p.journal
	if to = min(to, j.end); !j.active || j.detached || from >= to {
		return
	}
	j.touched = append(j.touched, touchedRun{offset: from, at: len(j.saved), n: int(to - from)})
	j.saved = append(j.saved, p.recs[from-p.start:to-p.start]...)
}
