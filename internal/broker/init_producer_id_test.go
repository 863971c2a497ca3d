package broker

import (
	"testing"

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
