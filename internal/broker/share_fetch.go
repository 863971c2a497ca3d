package broker

// ShareFetch (key 78), versions 1–2: a share group member fetches records it acquires
// for group.share.record.lock.duration.ms (share.record.lock.duration.ms), with the
// acknowledgements of earlier records piggy-backed (KIP-932). v2 (Kafka 4.2) adds the
// record-limit acquire mode (KIP-1206): MaxRecords is then a strict bound; in the
// default batch-optimized mode a batch once started is acquired whole.
//
// Share sessions: epoch 0 opens the member's session on this broker (replacing an
// earlier one), with the partitions named; later requests carry the next epoch (1, 2,
// …), add partitions in Topics and drop them in ForgottenTopicsData; epoch -1 closes
// the session after its acknowledgements, releasing every record the member still
// holds here, and fetches nothing. A session also ends when the connection that
// opened it closes, as in Kafka since KAFKA-19015: a fetch of it waiting for records
// stops, and the member's records here are released as by epoch -1 (a consumer that
// reconnects opens a new session with epoch 0). SHARE_SESSION_NOT_FOUND and
// INVALID_SHARE_SESSION_EPOCH answer a session that is unknown or out of step. When
// the last session of a group on this broker ends, however it ends, the group's share
// partitions leave memory once what the session held is released (written to the
// share coordinator), and the next fetch reads their state again (Kafka drops them
// when the group has no session left, ShareGroupListener.onGroupEmpty). As in Kafka,
// the share-partition leader does not ask the group coordinator whether the member
// belongs to the group: a session is keyed by group and member id and tied to its
// connection.
//
// Each partition reads from its first available offset (a released record, or one
// whose lock expired) or its end, acquires up to MaxRecords records in total, and
// answers the record batches that hold them with the acquired offset ranges and their
// delivery counts. MaxRecords and BatchSize are not refused whatever their value, as
// in Kafka (its KafkaApis hands them on unchecked): MaxRecords 0 or less is taken as
// 500, the Java consumer's default, where Kafka's SharePartition.acquire acquires
// nothing; BatchSize, by which Kafka splits what it acquires into ranges, is not
// used. Each fetch of a session starts reading its partitions one position further
// on, as Kafka rotates them, so that each gets its turn. The acknowledgements a
// request carries for the partition it reads first are applied with that
// partition's acquisition, under one hold of the share partition and one write of
// its state (the write keeps both or, failing, neither; the records are then
// acquired without them); those of other partitions beside it, each before its
// partition is read. When nothing is acquired the request
// waits up to MaxWaitMillis, woken by new records or by records becoming available
// again; a partition that stops being served meanwhile (its topic deleted, its
// leadership moved) ends the wait, its error answered. A group whose
// share.isolation.level is read_committed acquires only below the last stable offset,
// and the records of aborted transactions are archived instead of delivered (Kafka
// does the same). Transaction markers are acquired like records, and clients
// acknowledge them as gaps.
//
// As in Kafka, a partition's acknowledgements are applied all or none: one batch
// refused refuses the partition's others (AcknowledgeErrorCode; shareAckCheck,
// applyShareAcks). RENEW acknowledgements (type 4, v2, KIP-1222) restart the locks
// of the records named; a partition's are refused with INVALID_REQUEST unless the
// request sets IsRenewAck, and with INVALID_RECORD_STATE while the group's
// share.renew.acknowledge.enable is false. A fetch with IsRenewAck must have
// MaxBytes, MinBytes, MaxRecords and MaxWaitMillis 0 (else INVALID_REQUEST, its
// session untouched): it applies its acknowledgements, acquires nothing and is
// answered at once.

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-streaming/samsa/internal/config"
	"github.com/samsa-streaming/samsa/internal/metadata"
	"github.com/samsa-streaming/samsa/internal/protocol"
	"github.com/samsa-streaming/samsa/internal/record"
	"github.com/samsa-streaming/samsa/internal/replica"
	"github.com/samsa-streaming/samsa/internal/share"
	"github.com/samsa-streaming/samsa/internal/storage"
)

func init() {
	register(kmsg.ShareFetch, 1, 2, (*Broker).handleShareFetch)
}

// shareSessions are the share sessions of this broker, by (group, member), by the
// connection that opened them, and counted per group.
type shareSessions struct {
	mu sync.Mutex
	// max bounds the sessions open at once (group.share.max.share.sessions); 0: no
	// bound.
	max      int
	sessions map[[2]string]*shareSession
	byConn   map[uint64][]*shareSession
	// perGroup counts each group's sessions, an ended one until what its member
	// held is released (released); a group without one has no entry.
	perGroup map[string]int
}

type shareSession struct {
	key   [2]string // group, member
	conn  uint64    // the connection that opened it (protocol.Request.ConnID; 0: none)
	epoch int32     // the epoch the next request must carry
	parts []share.Key
	in    map[share.Key]struct{} // parts, as a set
	// fetches counts the session's fetches: each starts reading parts at the next
	// position (use).
	fetches int
	// done is closed when the session ends (closed, opened again, or its connection
	// closed): a fetch of it stops waiting and acquires nothing more.
	done chan struct{}
}

// ended reports whether the session ended.
func (s *shareSession) ended() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// use checks a request's session epoch and returns the session and its partitions
// after adding and forgetting; closing reports epoch -1 (the session has ended on
// return). Epoch 0 opens the session on connection conn, ending an earlier one. For a
// fetch the partitions come rotated, the session's n-th fetch starting at position n
// mod their number: a fetch reads partitions in order until it has MaxRecords, and
// without the rotation a member whose first partition always has that many would
// read no other. Kafka rotates by the session epoch (PartitionRotateStrategy), which
// ShareAcknowledge advances too: with two partitions, a consumer that acknowledges
// apart from its fetches would start every fetch at the same one.
func (s *shareSessions) use(group, member string, conn uint64, epoch int32, add []share.Key, forget []share.Key, fetch bool) (sess *shareSession, parts []share.Key, closing bool, code int16) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sessions == nil {
		s.sessions = map[[2]string]*shareSession{}
		s.byConn = map[uint64][]*shareSession{}
		s.perGroup = map[string]int{}
	}
	key := [2]string{group, member}
	sess = s.sessions[key]
	switch {
	case epoch == 0:
		if !fetch {
			return nil, nil, false, kerr.InvalidShareSessionEpoch.Code
		}
		if sess != nil {
			s.endLocked(sess) // replaced: the group keeps its count
		} else if s.max > 0 && len(s.sessions) >= s.max {
			return nil, nil, false, kerr.ShareSessionLimitReached.Code
		} else {
			s.perGroup[group]++
		}
		sess = &shareSession{key: key, conn: conn, done: make(chan struct{})}
		s.sessions[key] = sess
		if conn != 0 {
			s.byConn[conn] = append(s.byConn[conn], sess)
		}
	case sess == nil:
		return nil, nil, false, kerr.ShareSessionNotFound.Code
	case epoch == -1:
		s.endLocked(sess)
		return sess, append(sess.parts, add...), true, 0
	case epoch != sess.epoch:
		return nil, nil, false, kerr.InvalidShareSessionEpoch.Code
	}
	// A set beside the list, so that a request naming many partitions costs time in
	// proportion to them, not to their square.
	if sess.in == nil {
		sess.in = make(map[share.Key]struct{}, len(add))
	}
	for _, k := range add {
		if _, ok := sess.in[k]; !ok {
			sess.in[k] = struct{}{}
			sess.parts = append(sess.parts, k)
		}
	}
	forgotten := false
	for _, k := range forget {
		if _, ok := sess.in[k]; ok {
			delete(sess.in, k)
			forgotten = true
		}
	}
	if forgotten {
		// A new array: the lists handed out before share the old one.
		sess.parts = slices.DeleteFunc(slices.Clone(sess.parts), func(k share.Key) bool {
			_, ok := sess.in[k]
			return !ok
		})
	}
	sess.epoch = nextSessionEpoch(epoch)
	if !fetch || len(sess.parts) == 0 {
		return sess, slices.Clone(sess.parts), false, 0
	}
	at := sess.fetches % len(sess.parts)
	sess.fetches++
	return sess, slices.Concat(sess.parts[at:], sess.parts[:at]), false, 0
}

// endLocked ends a session of the map.
func (s *shareSessions) endLocked(sess *shareSession) {
	delete(s.sessions, sess.key)
	if sess.conn != 0 {
		left := slices.DeleteFunc(s.byConn[sess.conn], func(x *shareSession) bool { return x == sess })
		if len(left) == 0 {
			delete(s.byConn, sess.conn)
		} else {
			s.byConn[sess.conn] = left
		}
	}
	close(sess.done)
}

// released notes that what the member of an ended session of group held is
// released: the session no longer counts for the group.
func (s *shareSessions) released(group string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.perGroup[group]--; s.perGroup[group] <= 0 {
		delete(s.perGroup, group)
	}
}

// idle reports whether group has no share session here, nor an ended one whose
// member's records are not released yet.
func (s *shareSessions) idle(group string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.perGroup[group] == 0
}

// closeConn ends the sessions connection conn opened and returns them.
func (s *shareSessions) closeConn(conn uint64) []*shareSession {
	s.mu.Lock()
	defer s.mu.Unlock()
	ended := slices.Clone(s.byConn[conn])
	for _, sess := range ended {
		s.endLocked(sess)
	}
	return ended
}

// endShareSessions ends the share sessions a closed connection opened, as Kafka does
// when a share consumer's connection drops (KAFKA-19015): their waiting fetches stop,
// and what their members acquired in them is released as on a session close.
func (b *Broker) endShareSessions(conn uint64) {
	ended := b.shareSessionCache.closeConn(conn)
	if len(ended) == 0 {
		return
	}
	go func() {
		ctx, cancel := b.requestContext(0)
		defer cancel()
		for _, sess := range ended {
			b.releaseShareSession(ctx, sess.key[0], sess.key[1], sess.parts)
		}
	}()
}

// releaseShareSession releases what member acquired in the share partitions of its
// ended session (once for each session that ended, not one replaced): they go back
// with their delivery count lowered (share.Partition's ReleaseMember), as Kafka
// releases them on a session close (SharePartitionManager.releaseSession).
// Partitions not in memory hold nothing of the member and are not loaded for it. If
// that was the group's last session here, its share partitions then leave memory
// (dropIdleShareGroup).
func (b *Broker) releaseShareSession(ctx context.Context, group, member string, parts []share.Key) {
	for _, k := range parts {
		_ = b.shares.DoIfLoaded(ctx, k, func(p *share.Partition) error { p.ReleaseMember(member); return nil })
	}
	b.shareSessionCache.released(group)
	b.dropIdleShareGroup(group)
}

// dropIdleShareGroup drops a group's share partitions from memory when no member of
// the group has a share session on this broker, as Kafka's brokers do
// (ShareSessionCache counts sessions per group and tells SharePartitionManager's
// ShareGroupListener.onGroupEmpty, which removes the group's share partitions from
// its cache). Every change of them was written to the share coordinator before it was
// answered, so what leaves is durable, except acquisitions (the sessions that held
// them ended and released them first); the next fetch reads the state again. A
// session that opens meanwhile keeps the partitions it may use.
func (b *Broker) dropIdleShareGroup(group string) {
	idle := func() bool { return b.shareSessionCache.idle(group) }
	if !idle() {
		return
	}
	if n := b.shares.DropGroup(group, idle); n > 0 {
		b.logger.Debug("share partitions left memory: the group has no share session here", "group", group, "partitions", n)
	}
}

// shareConfig is a group's share-partition limits: its group configs over the
// broker's defaults, each within the broker's bounds for it (an override stored when
// they were wider counts as the nearest bound; the delivery limit, bounded by 10 at
// most, cannot wrap around). A share partition takes them again at each use: a
// lower share.partition.max.record.locks stops its window growing until it shrinks
// below it, a higher one lets it grow at the next fetch (a waiting one tries again
// when the metadata image, which holds the group configs, changes).
func (b *Broker) shareConfig(groupID string) share.PartitionConfig {
	overrides := b.image().GroupConfigs(groupID)
	return share.PartitionConfig{
		LockDuration:  time.Duration(config.GroupInt(b.cfg, overrides, "share.record.lock.duration.ms")) * time.Millisecond,
		DeliveryLimit: int16(config.GroupInt(b.cfg, overrides, "share.delivery.count.limit")),
		MaxInFlight:   config.GroupInt(b.cfg, overrides, "share.partition.max.record.locks"),
	}
}

// shareInitialOffset is where a share partition without state starts.
func (b *Broker) shareInitialOffset(k share.Key) (int64, error) {
	p, err := b.sharePartition(k)
	if err != nil {
		return 0, err
	}
	if config.GroupValue(b.cfg, b.image().GroupConfigs(k.Group), "share.auto.offset.reset") == "earliest" {
		return p.Log.LogStartOffset(), nil
	}
	return p.HighWatermark(), nil
}

// shareLeaderEpoch is the leader epoch of a share key's topic partition while this
// node leads it.
func (b *Broker) shareLeaderEpoch(k share.Key) (int32, error) {
	p, err := b.sharePartition(k)
	if err != nil {
		return 0, err
	}
	return p.LeaderEpoch(), nil
}

// sharePartition is the led partition of a share key.
func (b *Broker) sharePartition(k share.Key) (*replica.Partition, error) {
	t, ok := b.image().TopicByID(metadata.TopicID(k.TopicID))
	if !ok {
		return nil, kerr.UnknownTopicID
	}
	p := b.topicReplica(t.Name, t.ID, k.Partition)
	if err := fetchablePartition(p, -1); err != nil {
		return nil, err
	}
	return p, nil
}

// shareAck is one acknowledgement batch: one type for [first, last], or one per offset.
type shareAck struct {
	first, last int64
	types       []int8
}

// shareAckCheck refuses a partition's acknowledgements as Kafka does, before any of
// them is applied, with INVALID_REQUEST (KafkaApis.validateAcknowledgementBatches): a
// batch whose first offset is past its last or before the previous batch's last, one
// without types or with a count of types that is neither 1 nor one per offset, a type
// out of range (RENEW, 4, needs v2), or a RENEW (KIP-1222) in a request whose
// IsRenewAck is false (ShareFetch or ShareAcknowledge v1, or v2 without the flag). A
// RENEW while the group's share.renew.acknowledge.enable is false is refused with
// INVALID_RECORD_STATE (SharePartition.acknowledge); the group config is read at the
// first renewal of the request, so a change applies from the next request.
type shareAckCheck struct {
	b          *Broker
	group      string
	version    int16
	isRenewAck bool
	enabled    int8 // the group's share.renew.acknowledge.enable: 0 not read yet, 1 true, -1 false
}

// code is the AcknowledgeErrorCode that refuses batches, 0 if they may be applied.
func (c *shareAckCheck) code(batches []shareAck) int16 {
	maxType := share.AckReject
	if c.version >= 2 {
		maxType = share.AckRenew
	}
	renews := false
	prevLast := int64(-1)
	for _, a := range batches {
		if a.first > a.last || a.first < prevLast || len(a.types) == 0 ||
			len(a.types) > 1 && int64(len(a.types)-1) != a.last-a.first {
			return kerr.InvalidRequest.Code
		}
		for _, t := range a.types {
			if t < share.AckGap || t > maxType {
				return kerr.InvalidRequest.Code
			}
			renews = renews || t == share.AckRenew
		}
		prevLast = a.last
	}
	switch {
	case !renews:
		return 0
	case !c.isRenewAck:
		return kerr.InvalidRequest.Code
	case c.enabled == 0:
		c.enabled = -1
		if config.GroupBool(c.b.cfg, c.b.image().GroupConfigs(c.group), "share.renew.acknowledge.enable") {
			c.enabled = 1
		}
	}
	if c.enabled < 0 {
		return kerr.InvalidRecordState.Code
	}
	return 0
}

// shareAcknowledge applies one partition's acknowledgement batches.
func (b *Broker) shareAcknowledge(ctx context.Context, k share.Key, member string, batches []shareAck) int16 {
	if _, err := b.sharePartition(k); err != nil {
		return errorCode(err)
	}
	now := b.clock.Now()
	var ackErr error
	var applied share.AckCounts
	err := b.shares.Do(ctx, k, func(p *share.Partition) error {
		ackErr = applyShareAcks(p, member, batches, now, &applied)
		return nil
	})
	if err == nil {
		b.shareAcknowledged(&applied)
	}
	return shareAckCode(err, ackErr)
}

// applyShareAcks applies a partition's acknowledgement batches, all or none, as Kafka
// does: should one fail, those applied before it are undone (Partition.Undo: they are
// the first change since Begin) and its error returned. The records applied are added
// to applied.
func applyShareAcks(p *share.Partition, member string, batches []shareAck, now time.Time, applied *share.AckCounts) error {
	before := *applied
	for _, bt := range batches {
		if err := p.Acknowledge(member, bt.first, bt.last, bt.types, now, applied); err != nil {
			p.Undo()
			*applied = before
			return err
		}
	}
	return nil
}

// shareAcknowledged records acknowledgements applied to a share partition, once its
// state holding them is written (Manager.Do returned nil): none of a change that was
// undone or refused.
func (b *Broker) shareAcknowledged(applied *share.AckCounts) {
	b.metrics.ShareAcknowledged(applied[share.AckAccept], applied[share.AckRelease], applied[share.AckReject], applied[share.AckRenew])
}

// shareAckCode is a partition's AcknowledgeErrorCode: err is the share-state
// operation's (its write failed: nothing was applied), ackErr applyShareAcks'.
func shareAckCode(err, ackErr error) int16 {
	switch {
	case err != nil:
		return shareErrorCode(err)
	case errors.Is(ackErr, share.ErrInvalidAck):
		return kerr.InvalidRequest.Code
	case ackErr != nil:
		return kerr.InvalidRecordState.Code
	}
	return 0
}

// shareAcquired is one partition's part of a ShareFetch response.
type shareAcquired struct {
	key  share.Key
	code int16
	// records are the batches answered, in buf (of Broker.shareReads), which the
	// response holds until it is written (shareResponse).
	records []byte
	buf     *[]byte
	runs    []share.AcquiredRun
	// acked: acknowledgements were given (shareAcquire's acks), ackCode their
	// AcknowledgeErrorCode.
	acked   bool
	ackCode int16
	// heldBySelf: nothing could be acquired because the window is full and this
	// member holds its first record — waiting would only delay its acknowledgements.
	heldBySelf bool
}

// shareAcquire acquires records of one partition for the member of sess, while sess
// lasts, after applying the member's acknowledgements of the partition (acks): both
// under one hold of the share partition and one write of its state. Should that
// write fail, nothing of it is kept: the acknowledgements are answered with the
// error and the records are acquired again without them.
func (b *Broker) shareAcquire(ctx context.Context, k share.Key, sess *shareSession, maxRecords int, strict bool, maxBytes int, acks []shareAck) shareAcquired {
	member := sess.key[1]
	out := shareAcquired{key: k}
	p, err := b.sharePartition(k)
	if err != nil {
		out.code = errorCode(err)
		if len(acks) > 0 {
			out.acked, out.ackCode = true, out.code
		}
		return out
	}
	now := b.clock.Now()
	readCommitted := config.GroupValue(b.cfg, b.image().GroupConfigs(k.Group), "share.isolation.level") == "read_committed"
	chunk := shareFirstRead
	if size, ok := b.shareRecordSizes.Load(shareLogKeyOf(k)); ok {
		chunk = shareReadSize(maxRecords, size.(int))
	}
	// The log is read straight into the answer's buffer, after the batches kept so
	// far; the batches that hold no acquired record are then moved over.
	var ans *[]byte
	var aborted []storage.AbortedTxn
	acquire := func(sp *share.Partition) error {
		// Checked under the partition's lock: a session's end is followed by the
		// release of what its member holds, so nothing is acquired after it.
		if sess.ended() {
			return nil
		}
		sp.AdvanceStart(p.Log.LogStartOffset())
		// hw bounds what is acquired: the high watermark, or for read_committed the
		// last stable offset.
		hw := p.HighWatermark()
		if readCommitted {
			hw = p.LastStableOffset()
		}
		// Read about as much as the records still wanted take (from the size of the
		// records read so far, or at the partition's last acquisition), so that
		// acquiring a few hundred records reads neither everything up to the high
		// watermark nor a fixed large chunk.
		var ranges [][2]int64
		lastFrom := int64(-1)
		for taken := 0; taken < maxRecords && maxBytes > 0; {
			from, ok := sp.NextFetchOffset()
			if !ok {
				out.heldBySelf = taken == 0 && sp.HoldsStart(member)
				return nil
			}
			if from >= hw || from <= lastFrom { // each step moves on, or stops
				return nil
			}
			lastFrom = from
			n, room := len(out.records), min(maxBytes, chunk)
			ans = b.growShareAnswer(ans, n, n+room)
			out.records = (*ans)[:n]
			if b.beforeShareRead != nil {
				b.beforeShareRead(k, from)
			}
			data, err := p.Log.ReadBytesInto((*ans)[n:], from, room, hw)
			if errors.Is(err, storage.ErrOffsetOutOfRange) {
				if logStart := p.Log.LogStartOffset(); logStart > from {
					// The log start moved past from since AdvanceStart (DeleteRecords,
					// retention): as Kafka does on OFFSET_OUT_OF_RANGE
					// (SharePartition.updateCacheAndOffsets), the share partition moves
					// to the log start and the acquisition goes on from there.
					sp.AdvanceStart(logStart)
					continue
				}
			}
			if err != nil {
				return err
			}
			raw, err := record.Split(data)
			if err != nil || len(raw) == 0 {
				return err
			}
			ranges = ranges[:0]
			for _, bt := range raw {
				h, err := record.ParseHeader(bt)
				if err != nil {
					return err
				}
				ranges = append(ranges, [2]int64{h.BaseOffset, h.LastOffset()})
			}
			if ranges[0][0] > from {
				// The log no longer has [from, first batch) (compaction removed
				// records released or never acquired): archived, as Kafka's
				// maybeArchiveStaleBatches does, or the window would wait for them.
				sp.ArchiveUndelivered(from, ranges[0][0]-1, hw)
			}
			var skipped [][2]int64
			if readCommitted {
				raw, ranges, skipped, aborted = skipAborted(p, raw, ranges, aborted)
			}
			var runs []share.AcquiredRun
			if len(ranges) > 0 {
				runs = sp.Acquire(member, ranges, hw, maxRecords-taken, strict, now)
			}
			// After the acquisition, which archives the skipped batches it passes: the
			// window stays in offset order.
			for _, r := range skipped {
				sp.ArchiveUndelivered(r[0], r[1], hw)
			}
			if len(ranges) == 0 && len(skipped) > 0 {
				continue // all archived: the next fetch offset is past them
			}
			if len(runs) == 0 {
				return nil
			}
			// Answer only the batches that hold acquired records.
			answered := 0
			for i, bt := range raw {
				if overlaps(ranges[i], runs) {
					answered += len(bt)
				}
			}
			// A batch larger than the room was read into a slice of its own.
			ans = b.growShareAnswer(ans, n, n+answered)
			kept := (*ans)[:n]
			for i, bt := range raw {
				if overlaps(ranges[i], runs) {
					kept = append(kept, bt...) // within the buffer: moved down in place
				}
			}
			out.records = kept
			maxBytes -= answered
			for _, r := range runs {
				taken += int(r.Last - r.First + 1)
			}
			out.runs = append(out.runs, runs...)
			perRecord := max(len(data)/max(int(ranges[len(ranges)-1][1]-ranges[0][0]+1), 1), 1)
			b.shareRecordSizes.Store(shareLogKeyOf(k), perRecord)
			chunk = shareReadSize(maxRecords-taken, perRecord)
		}
		return nil
	}
	// ackErr and readErr are the acknowledgements' and the acquisition's own
	// failures; err the share state's (loading it, or writing the change).
	var ackErr, readErr error
	var applied share.AckCounts
	err = b.shares.Do(ctx, k, func(sp *share.Partition) error {
		if len(acks) > 0 {
			ackErr = applyShareAcks(sp, member, acks, now, &applied)
		}
		readErr = acquire(sp)
		return nil
	})
	if err == nil { // written: what was acknowledged and acquired holds
		b.shareAcknowledged(&applied)
		acquiredRecords := 0
		for _, r := range out.runs {
			acquiredRecords += int(r.Last - r.First + 1)
		}
		b.metrics.ShareAcquired(p.Topic, acquiredRecords)
	}
	if sess.ended() {
		// The session ended while this waited for the partition, which it may have
		// loaded again after its group's partitions left memory.
		b.dropIdleShareGroup(k.Group)
	}
	if len(acks) > 0 {
		out.acked, out.ackCode = true, shareAckCode(err, ackErr)
		if err != nil && !errors.Is(err, share.ErrFencedLeaderEpoch) && !errors.Is(err, share.ErrFencedStateEpoch) {
			// The write failed and was undone, acquisition included: acquire
			// without the acknowledgements, as when they were applied apart.
			b.putShareAnswer(ans)
			retry := b.shareAcquire(ctx, k, sess, maxRecords, strict, maxBytes, nil)
			retry.acked, retry.ackCode = out.acked, out.ackCode
			return retry
		}
	}
	switch {
	case err != nil: // nothing acquired is kept
		out.code = shareErrorCode(err)
		if errors.Is(err, share.ErrWindowTooWide) { // stays so until an operator acts
			b.logger.Warn("share partition cannot be loaded", "group", k.Group, "topic_id", metadataTopicID(k.TopicID), "partition", k.Partition, "err", err)
		}
		out.records, out.runs = nil, nil
	case readErr != nil:
		out.code = shareErrorCode(readErr)
	}
	if len(out.records) > 0 {
		out.buf = ans
	} else {
		b.putShareAnswer(ans)
	}
	return out
}

// growShareAnswer returns a buffer of Broker.shareReads, at its full length, of at
// least size bytes and holding the first n bytes of ans (nil: none); ans goes back
// to the pool when it is replaced.
func (b *Broker) growShareAnswer(ans *[]byte, n, size int) *[]byte {
	if ans != nil && cap(*ans) >= size {
		*ans = (*ans)[:cap(*ans)]
		return ans
	}
	next := b.shareReads.Get(size)
	*next = (*next)[:cap(*next)]
	if ans != nil {
		copy(*next, (*ans)[:n])
		b.shareReads.Put(ans)
	}
	return next
}

// putShareAnswer gives back an answer buffer no response holds (nil: none).
func (b *Broker) putShareAnswer(ans *[]byte) {
	if ans != nil {
		b.shareReads.Put(ans)
	}
}

// skipAborted splits, for a read_committed share group, the batches among raw (with
// their offset ranges) that an aborted transaction wrote from the others: their
// records are archived instead of delivered, as a read_committed consumer drops them.
// It returns the other batches and the ranges skipped; aborted is scratch space,
// returned for reuse.
func skipAborted(p *replica.Partition, raw [][]byte, ranges [][2]int64,
	aborted []storage.AbortedTxn) ([][]byte, [][2]int64, [][2]int64, []storage.AbortedTxn) {
	aborted = p.Log.AbortedTransactions(ranges[0][0], ranges[len(ranges)-1][1]+1, aborted[:0])
	if len(aborted) == 0 {
		return raw, ranges, nil, aborted
	}
	var skipped [][2]int64
	keep := 0
	for i, bt := range raw {
		if h, err := record.ParseHeader(bt); err == nil && h.IsTransactional() && !h.IsControl() &&
			abortedBatch(aborted, h.ProducerID, h.BaseOffset) {
			skipped = append(skipped, ranges[i])
			continue
		}
		raw[keep], ranges[keep] = bt, ranges[i]
		keep++
	}
	return raw[:keep], ranges[:keep], skipped, aborted
}

// abortedBatch reports whether the batch of producerID at baseOffset belongs to one
// of the aborted transactions: it starts at or after the transaction's first offset
// and before its abort marker.
func abortedBatch(aborted []storage.AbortedTxn, producerID, baseOffset int64) bool {
	for _, a := range aborted {
		if a.ProducerID == producerID && a.FirstOffset <= baseOffset && baseOffset < a.LastOffset {
			return true
		}
	}
	return false
}

// How much of a partition's log one acquisition step reads: what the records still
// wanted take at the size records had in the last step (of this acquisition or the
// partition's last one), within [shareMinRead, shareMaxRead]; shareFirstRead when
// that size is not known yet. The reads go through a pooled buffer.
const (
	shareFirstRead = 64 << 10
	shareMinRead   = 16 << 10
	shareMaxRead   = 256 << 10
)

// shareReadSize is the read of an acquisition step for records of perRecord bytes.
func shareReadSize(records, perRecord int) int {
	return min(max(records*perRecord, shareMinRead), shareMaxRead)
}

// forgetShare drops a share partition from memory (its state was reset or deleted).
func (b *Broker) forgetShare(k share.Key) { b.shares.Forget(k) }

// shareLogKey names a share key's topic partition, whatever the group.
type shareLogKey struct {
	topicID   [16]byte
	partition int32
}

func shareLogKeyOf(k share.Key) shareLogKey { return shareLogKey{k.TopicID, k.Partition} }

func overlaps(r [2]int64, runs []share.AcquiredRun) bool {
	for _, a := range runs {
		if a.First <= r[1] && a.Last >= r[0] {
			return true
		}
	}
	return false
}

func (b *Broker) handleShareFetch(req *protocol.Request) <-chan protocol.Response {
	r := req.Body.(*kmsg.ShareFetchRequest)
	resp := r.ResponseKind().(*kmsg.ShareFetchResponse)
	if r.GroupID == nil || *r.GroupID == "" || r.MemberID == nil || *r.MemberID == "" {
		resp.ErrorCode = kerr.InvalidRequest.Code
		return reply(resp)
	}
	groupID, member := *r.GroupID, *r.MemberID
	cfg := b.shareConfig(groupID)
	resp.AcquisitionLockTimeoutMillis = int32(cfg.LockDuration.Milliseconds())
	// A renew-only fetch (v2, KIP-1222) carries acknowledgements and fetches nothing:
	// as in Kafka (KafkaApis.handleShareFetchRequest), one whose MaxBytes, MinBytes,
	// MaxRecords or MaxWaitMillis is not 0 is refused before its session is used.
	renewOnly := r.Version >= 2 && r.IsRenewAck
	if renewOnly && (r.MaxBytes != 0 || r.MinBytes != 0 || r.MaxRecords != 0 || r.MaxWaitMillis != 0) {
		resp.ErrorCode = kerr.InvalidRequest.Code
		return reply(resp)
	}

	var add, forget []share.Key
	acks := map[share.Key][]shareAck{}
	var order []share.Key // the partitions answered, in the request's order
	inOrder := map[share.Key]bool{}
	for _, t := range r.Topics {
		for _, p := range t.Partitions {
			k := share.Key{Group: groupID, TopicID: t.TopicID, Partition: p.Partition}
			add = append(add, k)
			for _, a := range p.AcknowledgementBatches {
				if !inOrder[k] {
					order, inOrder[k] = append(order, k), true
				}
				acks[k] = append(acks[k], shareAck{a.FirstOffset, a.LastOffset, a.AcknowledgeTypes})
			}
		}
	}
	for _, t := range r.ForgottenTopicsData {
		for _, p := range t.Partitions {
			forget = append(forget, share.Key{Group: groupID, TopicID: t.TopicID, Partition: p})
		}
	}
	sess, parts, closing, code := b.shareSessionCache.use(groupID, member, req.ConnID, r.ShareSessionEpoch, add, forget, true)
	if code != 0 {
		resp.ErrorCode = code
		return reply(resp)
	}
	// The partitions whose acknowledgements are refused before any is tried
	// (shareAckCheck); nil while there is none.
	var refused map[share.Key]int16
	check := shareAckCheck{b: b, group: groupID, version: r.Version, isRenewAck: renewOnly}
	for _, k := range order {
		if code := check.code(acks[k]); code != 0 {
			if refused == nil {
				refused = map[share.Key]int16{}
			}
			refused[k] = code
		}
	}
	ctx, cancel := b.requestContext(0)
	results := map[share.Key]*kmsg.ShareFetchResponseTopicPartition{}
	result := func(k share.Key) *kmsg.ShareFetchResponseTopicPartition {
		if rp := results[k]; rp != nil {
			return rp
		}
		rp := kmsg.NewShareFetchResponseTopicPartition()
		rp.Partition = k.Partition
		rp.CurrentLeader.LeaderID, rp.CurrentLeader.LeaderEpoch = -1, -1
		if p, err := b.sharePartition(k); err == nil {
			rp.CurrentLeader.LeaderID, rp.CurrentLeader.LeaderEpoch = b.nodeID, p.LeaderEpoch()
		}
		results[k] = &rp
		return &rp
	}
	acknowledge := func(k share.Key) int16 {
		if code := refused[k]; code != 0 {
			return code
		}
		actx, acancel := b.shareFetchStateContext(ctx)
		defer acancel()
		return b.shareAcknowledge(actx, k, member, acks[k])
	}
	if closing || renewOnly {
		for _, k := range order {
			result(k).AcknowledgeErrorCode = acknowledge(k)
		}
		if closing {
			b.releaseShareSession(ctx, groupID, member, parts)
		}
		cancel()
		fillShareFetchResponse(resp, order, results)
		return reply(resp)
	}
	// The acknowledgements of the partition read first are applied with its
	// acquisition (one hold of the share partition, one write of its state). The
	// others start at once, side by side with it (each writes its partition's state,
	// on a share coordinator that may be another broker); a partition the fetch comes
	// to later waits for its own to be done, so that what they free can be acquired.
	pendingAcks := map[share.Key][]shareAck{}
	type ackRun struct {
		done chan struct{}
		code int16
	}
	acking := map[share.Key]*ackRun{}
	for _, k := range order {
		if code := refused[k]; code != 0 {
			result(k).AcknowledgeErrorCode = code
			continue
		}
		if len(parts) > 0 && k == parts[0] {
			pendingAcks[k] = acks[k]
			continue
		}
		run := &ackRun{done: make(chan struct{})}
		acking[k] = run
		go func() {
			defer close(run.done)
			run.code = acknowledge(k)
		}()
	}
	maxRecords := int(r.MaxRecords)
	if maxRecords <= 0 {
		maxRecords = 500 // KIP-1206's default
	}
	strict := r.Version >= 2 && r.ShareAcquireMode == 1
	heldBySelf := false
	var bufs []*[]byte // what the answer's records lie in
	fetchAll := func() int {
		acquired := 0
		remaining := int(b.fetchByteLimit(r.MaxBytes, true))
		for _, k := range parts {
			if acquired >= maxRecords || remaining <= 0 {
				break
			}
			if run := acking[k]; run != nil {
				<-run.done
			}
			actx, acancel := b.shareFetchStateContext(ctx)
			a := b.shareAcquire(actx, k, sess, maxRecords-acquired, strict, remaining, pendingAcks[k])
			acancel()
			if a.buf != nil {
				bufs = append(bufs, a.buf)
			}
			if a.acked {
				result(k).AcknowledgeErrorCode = a.ackCode
				delete(pendingAcks, k)
			}
			heldBySelf = heldBySelf || a.heldBySelf
			if a.code == 0 && len(a.runs) == 0 {
				continue
			}
			rp := result(k)
			if !inOrder[k] {
				order, inOrder[k] = append(order, k), true
			}
			rp.ErrorCode = a.code
			if rp.Records == nil {
				rp.Records = a.records
			} else {
				rp.Records = append(rp.Records, a.records...)
			}
			for _, run := range a.runs {
				rp.AcquiredRecords = append(rp.AcquiredRecords, kmsg.ShareFetchResponseTopicPartitionAcquiredRecord{
					FirstOffset: run.First, LastOffset: run.Last, DeliveryCount: run.DeliveryCount,
				})
				acquired += int(run.Last - run.First + 1)
			}
			remaining -= len(a.records)
		}
		return acquired
	}
	acquired := fetchAll()
	// The first partition's acknowledgements when the fetch did not come to it.
	for k := range pendingAcks {
		result(k).AcknowledgeErrorCode = acknowledge(k)
	}
	clear(pendingAcks)
	for k, run := range acking {
		<-run.done
		result(k).AcknowledgeErrorCode = run.code
	}
	// A member holding the first record of a full window is answered at once: its
	// acknowledgements (sent with its next request) are what moves the window on.
	// Others wait for that, rather than ask again and again while it is full.
	if acquired > 0 || r.MaxWaitMillis <= 0 || len(parts) == 0 || heldBySelf {
		cancel()
		fillShareFetchResponse(resp, order, results)
		return protocol.Ready(b.shareResponse(resp, bufs))
	}
	out := make(chan protocol.Response, 1)
	b.answerLater(req, out, func() {
		defer cancel()
		wake := make(chan struct{}, 1)
		var waitedOn []*replica.Partition
		defer func() { // once answered, nothing keeps wake registered
			for _, p := range waitedOn {
				p.StopWaiting(wake)
			}
			for _, k := range parts {
				b.shares.StopWaiting(k, wake)
			}
		}()
		expired, stop := b.after(time.Duration(r.MaxWaitMillis) * time.Millisecond)
		defer stop()
		// The partitions served here when the wait starts: one that stops being
		// served (its topic deleted, its leadership moved) ends the wait, so that its
		// error is answered at once, as Kafka completes the delayed share fetches of
		// a partition this broker stops leading or deletes.
		var served []share.Key
		for _, k := range parts {
			if _, err := b.sharePartition(k); err == nil {
				served = append(served, k)
			}
		}
		lost := func() bool {
			for _, k := range served {
				if _, err := b.sharePartition(k); err != nil {
					return true
				}
			}
			return false
		}
		got := 0
		for {
			imageChanged := b.imageWatch.next()
			for _, k := range parts {
				if p, err := b.sharePartition(k); err == nil {
					p.Wait(wake)
					if !slices.Contains(waitedOn, p) {
						waitedOn = append(waitedOn, p)
					}
				}
				b.shares.Wait(k, wake)
			}
			if got = fetchAll(); got > 0 || heldBySelf || lost() {
				break
			}
			select {
			case <-wake:
				continue
			case <-imageChanged:
				continue
			case <-expired:
			case <-sess.done: // ended (its connection closed, most likely): stop waiting
			}
			break
		}
		// Counted before the answer goes, as Kafka's delayed share fetches: each
		// ends with records, or without (MaxWait passed, the session ended, a
		// partition stopped being served, the member holds the full window's start).
		b.metrics.ShareFetchWaited(got > 0)
		fillShareFetchResponse(resp, order, results)
		out <- b.shareResponse(resp, bufs)
	})
	return out
}

// shareResponse is a ShareFetch answer whose records lie in bufs (of
// Broker.shareReads): they go back to the pool once it is written.
func (b *Broker) shareResponse(resp *kmsg.ShareFetchResponse, bufs []*[]byte) protocol.Response {
	r := protocol.Response{Body: resp}
	if len(bufs) > 0 {
		r.Written = func() {
			for _, buf := range bufs {
				b.shareReads.Put(buf)
			}
		}
	}
	return r
}

// shareFetchStateContext bounds the share-state operations a ShareFetch makes for
// one partition (its piggy-backed acknowledgements; loading the share partition) by
// offsets.commit.timeout.ms rather than shareStoreTimeout: its client gives up soon
// after MaxWaitMillis (franz-go 5 s later), one partition waiting for a coordinator
// would hold up the records of the others, and an acknowledgement refused here
// (COORDINATOR_NOT_AVAILABLE) is sent again with the next fetch.
func (b *Broker) shareFetchStateContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, time.Duration(b.cfg.OffsetsCommitTimeoutMs)*time.Millisecond)
}

// fillShareFetchResponse groups the partition results by topic, in request order.
func fillShareFetchResponse(resp *kmsg.ShareFetchResponse, order []share.Key, results map[share.Key]*kmsg.ShareFetchResponseTopicPartition) {
	index := map[[16]byte]int{}
	for _, k := range order {
		i, ok := index[k.TopicID]
		if !ok {
			i = len(resp.Topics)
			index[k.TopicID] = i
			resp.Topics = append(resp.Topics, kmsg.ShareFetchResponseTopic{TopicID: k.TopicID})
		}
		resp.Topics[i].Partitions = append(resp.Topics[i].Partitions, *results[k])
	}
}
