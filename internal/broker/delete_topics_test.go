package broker

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-streaming/samsa/internal/protocol"
)

// TestDeleteTopicsMalformedEntries: as on Kafka's controller, a v6 entry with
// neither a name nor an id, one with both, a name or an id given twice, and a name
// given along with its topic's id are answered INVALID_REQUEST (once for a repeated
// name or id, once for a name and its id) and delete nothing; a well-formed entry in
// the same request is deleted. An entry with a name and another topic's id had
// deleted the named topic.
func TestDeleteTopicsMalformedEntries(t *testing.T) {
	b := startTestBroker(t)
	for _, name := range []string{"both", "other", "dup-name", "dup-id", "collide", "gone"} {
		createTestTopic(t, b, name, 1)
	}
	id := func(name string) [16]byte {
		tp, ok := b.image().Topic(name)
		if !ok {
			t.Fatalf("no topic %s", name)
		}
		return [16]byte(tp.ID)
	}
	entry := func(name string, id [16]byte) kmsg.DeleteTopicsRequestTopic {
		rt := kmsg.NewDeleteTopicsRequestTopic()
		if name != "" {
			rt.Topic = kmsg.StringPtr(name)
		}
		rt.TopicID = id
		return rt
	}
	req := kmsg.NewPtrDeleteTopicsRequest()
	req.TimeoutMillis = 5000
	req.Topics = []kmsg.DeleteTopicsRequestTopic{
		entry("", [16]byte{}),
		entry("both", id("other")),
		entry("dup-name", [16]byte{}), entry("dup-name", [16]byte{}),
		entry("", id("dup-id")), entry("", id("dup-id")),
		entry("collide", [16]byte{}), entry("", id("collide")),
		entry("gone", [16]byte{}),
	}
	resp := call[*kmsg.DeleteTopicsResponse](t, b, req)
	invalid, deleted := 0, 0
	for _, rt := range resp.Topics {
		switch rt.ErrorCode {
		case kerr.InvalidRequest.Code:
			invalid++
		case 0:
			deleted++
			if rt.Topic == nil || *rt.Topic != "gone" {
				t.Errorf("deleted %s (%x)", deref(rt.Topic), rt.TopicID)
			}
		default:
			t.Errorf("entry %s (%x): %v", deref(rt.Topic), rt.TopicID, kerr.ErrorForCode(rt.ErrorCode))
		}
	}
	if invalid != 5 || deleted != 1 || len(resp.Topics) != 6 {
		t.Errorf("%d answers, %d INVALID_REQUEST, %d deleted; want 6, 5, 1", len(resp.Topics), invalid, deleted)
	}
	for _, name := range []string{"both", "other", "dup-name", "dup-id", "collide"} {
		if _, ok := b.image().Topic(name); !ok {
			t.Errorf("topic %s was deleted", name)
		}
	}

	// Before v6, a name given twice.
	old := kmsg.NewPtrDeleteTopicsRequest()
	old.SetVersion(5)
	old.TimeoutMillis, old.TopicNames = 5000, []string{"dup-name", "dup-name"}
	r := <-b.Handle(&protocol.Request{Key: old.Key(), Version: old.Version, Body: old})
	if got := r.Body.(*kmsg.DeleteTopicsResponse).Topics; len(got) != 1 || got[0].ErrorCode != kerr.InvalidRequest.Code {
		t.Errorf("v5, a name twice: %+v", got)
	}
}

func deref(s *string) string {
	if s == nil {
		return "<null>"
	}
	return *s
}

// TestDeleteTopicsShapeBeforeACLs: with an authorizer, an entry refused for its shape
// is INVALID_REQUEST even when the principal may not delete the topic it names, as
// Kafka checks the shape first.
func TestDeleteTopicsShapeBeforeACLs(t *testing.T) {
	fx := newFuzzFixture(t)
	other, _ := fx.authz.image().Topic(fuzzTopicA)
	req := kmsg.NewPtrDeleteTopicsRequest()
	req.SetVersion(6)
	req.TimeoutMillis = 5000
	both := kmsg.NewDeleteTopicsRequestTopic()
	both.Topic, both.TopicID = kmsg.StringPtr(fuzzTopicB), [16]byte(other.ID) // fuzz:fuzz may not delete fuzz-b
	req.Topics = append(req.Topics, both)
	resp := callAs[*kmsg.DeleteTopicsResponse](t, fx.authz, fuzzPrincipal, req)
	if len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("a name and an id, the name not deletable: %+v, want INVALID_REQUEST", resp.Topics)
	}
}
