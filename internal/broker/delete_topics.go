package broker

// DeleteTopics (key 20), versions 0–6.
//
// Topics are named (v0–v5) or named or identified by topic ID (v6). Deletion commits
// through the metadata quorum; each broker then removes the partitions' files (renamed
// aside and deleted in the background). Internal topics cannot be deleted, and no
// topic can when delete.topic.enable is false (TOPIC_DELETION_DISABLED).

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-streaming/samsa/internal/metadata"
	"github.com/samsa-streaming/samsa/internal/protocol"
)

func init() { register(kmsg.DeleteTopics, 0, 6, (*Broker).handleDeleteTopics) }

func (b *Broker) handleDeleteTopics(req *protocol.Request) <-chan protocol.Response {
	r := req.Body.(*kmsg.DeleteTopicsRequest)
	resp := kmsg.NewPtrDeleteTopicsResponse()
	resp.SetVersion(req.Version)

	type target struct {
		name *string
		id   [16]byte
	}
	var targets []target
	if req.Version >= 6 {
		for _, t := range r.Topics {
			targets = append(targets, target{name: t.Topic, id: t.TopicID})
		}
	} else {
		for _, n := range r.TopicNames {
			targets = append(targets, target{name: kmsg.StringPtr(n)})
		}
	}

	ctx, cancel := b.requestContext(r.TimeoutMillis)
	defer cancel()
	img := b.image()
	for _, tg := range targets {
		st := kmsg.NewDeleteTopicsResponseTopic()
		st.Topic, st.TopicID = tg.name, tg.id
		var (
			t  *metadata.Topic
			ok bool
		)
		if tg.name != nil {
			t, ok = img.Topic(*tg.name)
		} else {
			t, ok = img.TopicByID(metadata.TopicID(tg.id))
		}
		switch {
		case !ok && tg.name == nil:
			st.ErrorCode = kerr.UnknownTopicID.Code
		case !ok:
			st.ErrorCode = kerr.UnknownTopicOrPartition.Code
		case !b.cfg.DeleteTopicEnable:
			st.ErrorCode = kerr.TopicDeletionDisabled.Code
			st.ErrorMessage = kmsg.StringPtr("delete.topic.enable is false on this broker")
		case isInternalTopic(t.Name):
			st.ErrorCode = kerr.InvalidTopicException.Code
			st.ErrorMessage = kmsg.StringPtr("internal topic " + t.Name + " cannot be deleted")
		default:
			name := t.Name
			st.Topic, st.TopicID = &name, [16]byte(t.ID)
			res := b.controller.DeleteTopics(ctx, []string{t.Name}, nil)
			if len(res) > 0 && res[0].Err != nil {
				st.ErrorCode = errorCode(res[0].Err)
				st.ErrorMessage = errorMessage(res[0].Err)
			}
		}
		resp.Topics = append(resp.Topics, st)
	}
	return reply(resp)
}
