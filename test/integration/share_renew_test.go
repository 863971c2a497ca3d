package integration

// RENEW acknowledgements (KIP-1222) as Kafka serves them: only in a request that sets
// IsRenewAck (ShareFetch and ShareAcknowledge v2), a ShareFetch that sets it with its
// fetch parameters at 0 and acquiring nothing, and only while the group's
// share.renew.acknowledge.enable (true by default) allows them.

import (
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-streaming/samsa/internal/testutil"
)

// shareFetchAcks is a ShareFetch of s's partition at its epoch carrying acks, with
// the fetch parameters given and IsRenewAck set as asked.
func shareFetchAcks(s *rawShareSession, isRenewAck bool, maxWait, minBytes, maxBytes, maxRecords int32, acks ...shareAckRange) *kmsg.ShareFetchRequest {
	req := kmsg.NewPtrShareFetchRequest()
	req.GroupID, req.MemberID, req.ShareSessionEpoch = &s.group, &s.member, s.epoch
	req.MaxWaitMillis, req.MinBytes, req.MaxBytes, req.MaxRecords, req.BatchSize = maxWait, minBytes, maxBytes, maxRecords, 5
	req.ShareAcquireMode = 1 // record limit
	req.IsRenewAck = isRenewAck
	rt := kmsg.NewShareFetchRequestTopic()
	rt.TopicID = s.topicID
	rp := kmsg.NewShareFetchRequestTopicPartition()
	for _, a := range acks {
		ab := kmsg.NewShareFetchRequestTopicPartitionAcknowledgementBatch()
		ab.FirstOffset, ab.LastOffset, ab.AcknowledgeTypes = a.first, a.last, []int8{a.ackType}
		rp.AcknowledgementBatches = append(rp.AcknowledgementBatches, ab)
	}
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

// shareAck sends a ShareAcknowledge (v2) of s's partition with IsRenewAck as asked
// and returns the partition's error code; the session's epoch moves on when the
// request is not refused as a whole.
func (s *rawShareSession) shareAck(t *testing.T, isRenewAck bool, acks ...shareAckRange) int16 {
	t.Helper()
	req := shareAcknowledgeRequest(s.group, s.member, s.topicID, s.epoch, acks...)
	req.IsRenewAck = isRenewAck
	resp, err := req.RequestWith(ctxT(t, 10*time.Second), s.c)
	if err != nil {
		t.Fatal(err)
	}
	if resp.ErrorCode != 0 {
		t.Fatalf("ShareAcknowledge: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
	s.epoch++
	return resp.Topics[0].Partitions[0].ErrorCode
}

// fetchAcks sends shareFetchAcks and returns its answer (failing on a top-level
// error) and the partition's answer (zero when the answer names none).
func (s *rawShareSession) fetchAcks(t *testing.T, isRenewAck bool, maxWait, maxRecords int32, acks ...shareAckRange) kmsg.ShareFetchResponseTopicPartition {
	t.Helper()
	resp, err := shareFetchAcks(s, isRenewAck, maxWait, 1, 1<<20, maxRecords, acks...).RequestWith(ctxT(t, 10*time.Second), s.c)
	if err != nil {
		t.Fatal(err)
	}
	if resp.ErrorCode != 0 {
		t.Fatalf("ShareFetch: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
	s.epoch++
	if len(resp.Topics) == 0 || len(resp.Topics[0].Partitions) == 0 {
		return kmsg.ShareFetchResponseTopicPartition{}
	}
	return resp.Topics[0].Partitions[0]
}

// renewTestTopic starts a broker with a one-partition topic holding n records, whose
// group starts at the earliest offset with these extra group configs, and returns
// the broker, a raw session of member on it and the metrics address.
func renewTestTopic(t *testing.T, name string, n int, groupConfigs map[string]string) (*testutil.Broker, func(member string) *rawShareSession, string) {
	t.Helper()
	metricsAddr := fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t))
	b := startGroupBroker(t, "metrics.listener="+metricsAddr)
	createTopic(t, newAdmin(t, b), name, 1, nil)
	configs := map[string]string{"share.auto.offset.reset": "earliest"}
	for k, v := range groupConfigs {
		configs[k] = v
	}
	setGroupConfigs(t, b, name, configs)
	produceValues(t, b, name, "r", n)
	id := topicID(t, newClient(t, b), name)
	return b, func(member string) *rawShareSession {
		return &rawShareSession{c: newClient(t, b), group: name, member: member, topicID: id}
	}, metricsAddr
}

// TestShareRenewNeedsIsRenewAck: a RENEW in a request whose IsRenewAck is false —
// ShareAcknowledge v2, a ShareFetch's piggy-backed acknowledgements, ShareAcknowledge
// v1, which has no such field — refuses the partition's acknowledgements whole with
// INVALID_REQUEST, as Kafka's KafkaApis.validateAcknowledgementBatches: the ACCEPT
// beside it is not applied. With IsRenewAck the same acknowledgements are applied.
func TestShareRenewNeedsIsRenewAck(t *testing.T) {
	t.Parallel()
	b, session, _ := renewTestTopic(t, "share-renew-flag", 10, nil)
	ctx := ctxT(t, 2*time.Minute)
	a := session("a")
	if got, err := a.fetch(ctx, 0, 10, nil, 0); err != nil || len(got) != 10 {
		t.Fatalf("a acquired %v (%v), want 0-9", got, err)
	}

	if code := a.shareAck(t, false, shareAckRange{0, 1, 1}, shareAckRange{2, 2, 4}); code != kerr.InvalidRequest.Code {
		t.Fatalf("ShareAcknowledge v2 with a RENEW and IsRenewAck false: %v, want INVALID_REQUEST", kerr.ErrorForCode(code))
	}
	if rp := a.fetchAcks(t, false, 0, 1, shareAckRange{0, 1, 1}, shareAckRange{2, 2, 4}); rp.AcknowledgeErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("ShareFetch with a RENEW and IsRenewAck false: acknowledgements answered %v, want INVALID_REQUEST",
			kerr.ErrorForCode(rp.AcknowledgeErrorCode))
	}

	raw := dialRaw(t, b)
	v1 := shareAcknowledgeRequest(a.group, a.member, a.topicID, a.epoch, shareAckRange{0, 1, 1}, shareAckRange{2, 2, 4})
	v1.SetVersion(1)
	raw.send(v1)
	v1resp := kmsg.NewPtrShareAcknowledgeResponse()
	v1resp.SetVersion(1)
	raw.read(v1resp)
	if v1resp.ErrorCode != 0 {
		t.Fatalf("ShareAcknowledge v1: %v", kerr.ErrorForCode(v1resp.ErrorCode))
	}
	a.epoch++
	if code := v1resp.Topics[0].Partitions[0].ErrorCode; code != kerr.InvalidRequest.Code {
		t.Fatalf("ShareAcknowledge v1 with a RENEW: %v, want INVALID_REQUEST", kerr.ErrorForCode(code))
	}

	// None of the refused ACCEPTs of 0-1 was applied: a holds them still, and the
	// same acknowledgements with IsRenewAck are applied.
	if code := a.shareAck(t, true, shareAckRange{0, 1, 1}, shareAckRange{2, 2, 4}); code != 0 {
		t.Fatalf("ShareAcknowledge v2 with a RENEW and IsRenewAck: %v", kerr.ErrorForCode(code))
	}
	if code := a.shareAck(t, false, shareAckRange{0, 1, 1}); code != kerr.InvalidRecordState.Code {
		t.Fatalf("accepting 0-1 again: %v, want INVALID_RECORD_STATE (accepted once)", kerr.ErrorForCode(code))
	}
}

// TestShareRenewOnlyFetch: a ShareFetch with IsRenewAck whose MaxWaitMillis, MinBytes,
// MaxBytes or MaxRecords is not 0 is refused with INVALID_REQUEST before its session
// is used, as Kafka's KafkaApis.handleShareFetchRequest; with them at 0 (BatchSize
// is not checked) it applies its acknowledgements, RENEW and ACCEPT, acquires
// nothing though records are available, and is answered at once. The renewed records
// stay held past the lock they were acquired with.
func TestShareRenewOnlyFetch(t *testing.T) {
	t.Parallel()
	const lock = 3 * time.Second
	_, session, _ := renewTestTopic(t, "share-renew-only", 10, map[string]string{
		"share.record.lock.duration.ms": strconv.Itoa(int(lock.Milliseconds()))})
	ctx := ctxT(t, 2*time.Minute)
	a := session("a")
	if got, err := a.fetch(ctx, 0, 5, nil, 0); err != nil || fmt.Sprint(got) != "[0 1 2 3 4]" {
		t.Fatalf("a acquired %v (%v), want 0-4", got, err)
	}
	acquiredBy := time.Now() // the locks of 0-4 end by acquiredBy+lock

	renew := []shareAckRange{{0, 1, 1}, {2, 4, 4}}
	for _, c := range []struct {
		name                                   string
		maxWait, minBytes, maxBytes, maxRecord int32
	}{
		{"MaxWaitMillis", 500, 0, 0, 0},
		{"MinBytes", 0, 1, 0, 0},
		{"MaxBytes", 0, 0, 1 << 20, 0},
		{"MaxRecords", 0, 0, 0, 5},
	} {
		resp, err := shareFetchAcks(a, true, c.maxWait, c.minBytes, c.maxBytes, c.maxRecord, renew...).RequestWith(ctx, a.c)
		if err != nil {
			t.Fatal(err)
		}
		if resp.ErrorCode != kerr.InvalidRequest.Code {
			t.Fatalf("a renew-only ShareFetch with %s set: %v, want INVALID_REQUEST", c.name, kerr.ErrorForCode(resp.ErrorCode))
		}
		// The session's epoch did not move: a's next request carries the same one.
	}

	// The lock is half over when a renews 2-4 and accepts 0-1.
	processing := time.NewTimer(time.Until(acquiredBy.Add(lock / 2)))
	<-processing.C
	start := time.Now()
	resp, err := shareFetchAcks(a, true, 0, 0, 0, 0, renew...).RequestWith(ctx, a.c)
	if err != nil {
		t.Fatal(err)
	}
	answeredIn := time.Since(start)
	if resp.ErrorCode != 0 {
		t.Fatalf("renew-only ShareFetch: %v (its session epoch did not move?)", kerr.ErrorForCode(resp.ErrorCode))
	}
	a.epoch++
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		t.Fatalf("renew-only ShareFetch answered %+v, want the partition acknowledged", resp.Topics)
	}
	if rp := resp.Topics[0].Partitions[0]; rp.AcknowledgeErrorCode != 0 || rp.ErrorCode != 0 || len(rp.AcquiredRecords) != 0 || len(rp.Records) != 0 {
		t.Fatalf("renew-only ShareFetch: acknowledgements %v, partition %v, acquired %v (%d bytes of records); want applied, nothing acquired",
			kerr.ErrorForCode(rp.AcknowledgeErrorCode), kerr.ErrorForCode(rp.ErrorCode), rp.AcquiredRecords, len(rp.Records))
	}
	t.Logf("renew-only ShareFetch answered in %v", answeredIn)

	// 5-9 are still available: another member acquires them.
	if got, err := session("b").fetch(ctx, 0, 10, nil, 0); err != nil || fmt.Sprint(got) != "[5 6 7 8 9]" {
		t.Fatalf("b acquired %v (%v), want 5-9", got, err)
	}
	// Past the lock 2-4 were acquired with, a holds them still (renewed), and 0-1
	// were accepted.
	processing.Reset(time.Until(acquiredBy.Add(lock + 300*time.Millisecond)))
	<-processing.C
	if code := a.shareAck(t, false, shareAckRange{2, 4, 1}); code != 0 {
		t.Fatalf("accepting the renewed 2-4 after their first lock ended: %v", kerr.ErrorForCode(code))
	}
	if code := a.shareAck(t, false, shareAckRange{0, 1, 1}); code != kerr.InvalidRecordState.Code {
		t.Fatalf("accepting 0-1 again: %v, want INVALID_RECORD_STATE (accepted by the renew-only fetch)", kerr.ErrorForCode(code))
	}
}

// TestShareRenewGroupConfig: while a group's share.renew.acknowledge.enable is false,
// a partition's acknowledgements holding a RENEW are refused whole with
// INVALID_RECORD_STATE (Kafka's SharePartition.acknowledge, which undoes the
// partition's other changes); set true again, the next request's are applied.
func TestShareRenewGroupConfig(t *testing.T) {
	t.Parallel()
	b, session, _ := renewTestTopic(t, "share-renew-config", 10, map[string]string{"share.renew.acknowledge.enable": "false"})
	ctx := ctxT(t, 2*time.Minute)
	a := session("a")
	if got, err := a.fetch(ctx, 0, 10, nil, 0); err != nil || len(got) != 10 {
		t.Fatalf("a acquired %v (%v), want 0-9", got, err)
	}
	if code := a.shareAck(t, true, shareAckRange{0, 1, 1}, shareAckRange{2, 2, 4}); code != kerr.InvalidRecordState.Code {
		t.Fatalf("ShareAcknowledge with a RENEW, renewals disabled: %v, want INVALID_RECORD_STATE", kerr.ErrorForCode(code))
	}
	if rp := a.fetchAcks(t, false, 0, 1, shareAckRange{3, 3, 1}); rp.AcknowledgeErrorCode != 0 {
		t.Fatalf("accepting 3: %v", kerr.ErrorForCode(rp.AcknowledgeErrorCode))
	}
	resp, err := shareFetchAcks(a, true, 0, 0, 0, 0, shareAckRange{4, 4, 4}).RequestWith(ctx, a.c)
	if err != nil || resp.ErrorCode != 0 {
		t.Fatalf("renew-only ShareFetch: %v %v", err, kerr.ErrorForCode(resp.ErrorCode))
	}
	a.epoch++
	if code := resp.Topics[0].Partitions[0].AcknowledgeErrorCode; code != kerr.InvalidRecordState.Code {
		t.Fatalf("renew-only ShareFetch, renewals disabled: %v, want INVALID_RECORD_STATE", kerr.ErrorForCode(code))
	}

	setGroupConfigs(t, b, a.group, map[string]string{"share.renew.acknowledge.enable": "true"})
	// The refused ACCEPT of 0-1 was not applied: a accepts them now.
	if code := a.shareAck(t, true, shareAckRange{0, 1, 1}, shareAckRange{2, 2, 4}); code != 0 {
		t.Fatalf("ShareAcknowledge with a RENEW once renewals are enabled: %v", kerr.ErrorForCode(code))
	}
}

// TestShareRenewFranzGo: franz-go's share consumer renews the lock of a record it holds
// (kgo.AckRenew: a ShareAcknowledge with IsRenewAck) while it processes it. With the
// group's share.renew.acknowledge.enable true, each renewal is applied: the record's
// lock never expires (no lock timeout counted) though the consumer holds it twice as
// long as the lock lasts, and its ACCEPT then is applied. With it false, the renewal
// is refused with INVALID_RECORD_STATE, the lock expires, the record is delivered
// again and accepted: nothing is lost.
func TestShareRenewFranzGo(t *testing.T) {
	t.Parallel()
	const lock = 2 * time.Second
	for _, enabled := range []bool{true, false} {
		t.Run("enable="+strconv.FormatBool(enabled), func(t *testing.T) {
			t.Parallel()
			topic := "share-renew-kgo-" + strconv.FormatBool(enabled)
			b, _, metricsAddr := renewTestTopic(t, topic, 1, map[string]string{
				"share.record.lock.duration.ms":  strconv.Itoa(int(lock.Milliseconds())),
				"share.renew.acknowledge.enable": strconv.FormatBool(enabled),
			})
			metric := func(name string, labels map[string]string) float64 {
				return testutil.MetricValue(scrape(t, metricsAddr), name, labels)
			}
			var mu sync.Mutex
			var results kgo.ShareAckResults
			cl := newClient(t, b, kgo.ShareGroup(topic), kgo.ConsumeTopics(topic), kgo.FetchMaxWait(200*time.Millisecond),
				kgo.ShareAckCallback(func(_ *kgo.Client, rs kgo.ShareAckResults) {
					mu.Lock()
					results = append(results, rs...)
					mu.Unlock()
				}))
			// ack acknowledges r and returns what the broker answered (the callback
			// has it when FlushAcks returns).
			ack := func(r *kgo.Record, status kgo.AckStatus) error {
				t.Helper()
				mu.Lock()
				results = nil
				mu.Unlock()
				r.Ack(status)
				if err := cl.FlushAcks(ctxT(t, 15*time.Second)); err != nil {
					t.Fatalf("flushing %v: %v", status, err)
				}
				mu.Lock()
				defer mu.Unlock()
				if len(results) != 1 {
					t.Fatalf("%v answered %+v, want one partition", status, results)
				}
				return results[0].Err
			}
			poll := func() *kgo.Record {
				t.Helper()
				ctx := ctxT(t, 30*time.Second)
				for ctx.Err() == nil {
					if recs := cl.PollFetches(ctx).Records(); len(recs) > 0 {
						return recs[0]
					}
				}
				t.Fatal("no record within 30 s")
				return nil
			}

			r := poll()
			acquiredBy := time.Now()
			if r.DeliveryCount() != 1 {
				t.Fatalf("first delivery counted %d", r.DeliveryCount())
			}
			if enabled {
				// The consumer processes the record for twice the lock, renewing it
				// every quarter of the lock.
				processing := time.NewTicker(lock / 4)
				defer processing.Stop()
				for time.Since(acquiredBy) < 2*lock {
					if err := ack(r, kgo.AckRenew); err != nil {
						t.Fatalf("renewal after %v refused: %v", time.Since(acquiredBy), err)
					}
					<-processing.C
				}
				if n := metric("samsa_share_lock_timeouts_total", nil); n != 0 {
					t.Fatalf("%v lock timeouts while the record was renewed", n)
				}
				if err := ack(r, kgo.AckAccept); err != nil {
					t.Fatalf("accepting the renewed record after %v: %v", time.Since(acquiredBy), err)
				}
			} else {
				if err := ack(r, kgo.AckRenew); !errors.Is(err, kerr.InvalidRecordState) {
					t.Fatalf("renewal with renewals disabled answered %v, want INVALID_RECORD_STATE", err)
				}
				testutil.WaitFor(t, 30*time.Second, func() bool { return metric("samsa_share_lock_timeouts_total", nil) >= 1 },
					"the refused record's lock to expire")
				// Polling again accepts the first delivery (kgo's auto-accept), which
				// is refused, or applies to the record's next acquisition, which the
				// poll then returns: either way it comes again.
				again := poll()
				if again.Offset != r.Offset || again.DeliveryCount() != 2 {
					t.Fatalf("after the lock expired: offset %d delivered %d times, want offset %d again", again.Offset, again.DeliveryCount(), r.Offset)
				}
				again.Ack(kgo.AckAccept) // refused if the auto-accept applied to this delivery
				if err := cl.FlushAcks(ctxT(t, 15*time.Second)); err != nil {
					t.Fatalf("flushing the accept: %v", err)
				}
			}
			// Nothing lost: the record is accepted once, never archived.
			testutil.WaitFor(t, 30*time.Second, func() bool {
				start, _ := shareStartOffset(t, cl, topic, topic)
				return start == 1
			}, "the share-partition start to pass the record")
			accepted := metric("samsa_share_records_acknowledged_total", map[string]string{"type": "accept"})
			rejected := metric("samsa_share_records_acknowledged_total", map[string]string{"type": "reject"})
			if accepted != 1 || rejected != 0 {
				t.Fatalf("acknowledged: %v accepted, %v rejected; want the record accepted once", accepted, rejected)
			}
		})
	}
}
