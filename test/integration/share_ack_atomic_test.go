package integration

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// TestShareAcknowledgeAllOrNone: a partition's acknowledgement batches are applied
// all or none, as Kafka applies them (KafkaApis.validateAcknowledgementBatches
// refuses malformed ones with INVALID_REQUEST before any is tried;
// SharePartition.acknowledge undoes the request's earlier batches when a later one
// names a record the member does not hold). After each refusal the records of the
// valid batches are still the member's: acknowledging them again succeeds, which it
// could not had they been applied.
func TestShareAcknowledgeAllOrNone(t *testing.T) {
	t.Parallel()
	_, session, _ := renewTestTopic(t, "share-ack-atomic", 10, nil)
	ctx := ctxT(t, 2*time.Minute)
	a := session("a")
	if got, err := a.fetch(ctx, 0, 10, nil, 0); err != nil || len(got) != 10 {
		t.Fatalf("a acquired %v (%v), want 0-9", got, err)
	}
	const accept, release = 1, 2
	for _, c := range []struct {
		what  string
		fetch bool // piggy-backed on a ShareFetch rather than a ShareAcknowledge
		acks  []shareAckRange
		want  error
	}{
		{"an ACCEPT of 0-1, then one of offset 20, past the records acquired", false,
			[]shareAckRange{{0, 1, accept}, {20, 20, accept}}, kerr.InvalidRecordState},
		{"a RELEASE of 2-3, then an ACCEPT of 3-3 (3 is no longer acquired)", true,
			[]shareAckRange{{2, 3, release}, {3, 3, accept}}, kerr.InvalidRecordState},
		{"an ACCEPT of 4-5, then one of 4-4 (before the previous batch's last offset)", false,
			[]shareAckRange{{4, 5, accept}, {4, 4, accept}}, kerr.InvalidRequest},
		{"an ACCEPT of 6-6, then type 7 for 7-7", true,
			[]shareAckRange{{6, 6, accept}, {7, 7, 7}}, kerr.InvalidRequest},
		{"an ACCEPT of 8-8, then one of 9-8 (first past last)", false,
			[]shareAckRange{{8, 8, accept}, {9, 8, accept}}, kerr.InvalidRequest},
	} {
		var code int16
		if c.fetch {
			code = a.fetchAcks(t, false, 0, 1, c.acks...).AcknowledgeErrorCode
		} else {
			code = a.shareAck(t, false, c.acks...)
		}
		if err := kerr.ErrorForCode(code); err != c.want {
			t.Fatalf("%s: answered %v, want %v", c.what, err, c.want)
		}
	}
	// Every record is still a's: none of the batches above was applied. Each valid
	// batch's records are accepted on their own (an ACCEPT that took the window's
	// start past 0-1 would make them unknown; one of records done, not acquired).
	for _, r := range []shareAckRange{{0, 1, accept}, {2, 3, accept}, {4, 5, accept}, {6, 6, accept}, {8, 8, accept}} {
		if code := a.shareAck(t, false, r); code != 0 {
			t.Fatalf("accepting %d-%d after the refused acknowledgements: %v; they were applied", r.first, r.last, kerr.ErrorForCode(code))
		}
	}
}
