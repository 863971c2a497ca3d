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
