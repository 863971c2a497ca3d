package broker

// DeleteTopics (key 20), versions 0–6; on the client listeners and the controller
// listener.
//
// Topics are named (v0–v5) or named or identified by topic ID (v6). A broker forwards
// the request to the active controller and answers once its own image no longer has
// the deleted topics. The controller commits the deletion through the metadata
// quorum; each broker then removes the partitions' files (renamed aside and deleted
// in the background). Internal topics cannot be deleted, and no topic can when the
// controller's delete.topic.enable is false (TOPIC_DELETION_DISABLED).

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-streaming/samsa/internal/metadata"
	"github.com/samsa-streaming/samsa/internal/protocol"
)

func init() {
	register(kmsg.DeleteTopics, 0, 6, (*Broker).handleDeleteTopics)
	registerController(kmsg.DeleteTopics, 0, 6, (*Broker).serveDeleteTopics)
}

func (b *Broker) handleDeleteTopics(req *protocol.Request) <-chan protocol.Response {
	r := req.Body.(*kmsg.DeleteTopicsRequest)
	return b.forward(req, r.TimeoutMillis, func(img *metadata.Image, resp kmsg.Response) bool {
		for _, t := range resp.(*kmsg.DeleteTopicsResponse).Topics {
			if t.ErrorCode != 0 {
				continue
			}
			if id := metadata.TopicID(t.TopicID); !id.IsZero() {
				if _, ok := img.TopicByID(id); ok {
					return false
				}
			} else if t.Topic != nil {
				if _, ok := img.Topic(*t.Topic); ok {
					return false
				}
			}
		}
		return true
	})
}

// serveDeleteTopics is the controller side.
func (b *Broker) serveDeleteTopics(ctx context.Context, req kmsg.Request) kmsg.Response {
	r := req.(*kmsg.DeleteTopicsRequest)
	resp := kmsg.NewPtrDeleteTopicsResponse()
	resp.SetVersion(r.Version)

	type target struct {
		name *string
		id   [16]byte
	}
	var targets []target
	if r.Version >= 6 {
		for _, t := range r.Topics {
			targets = append(targets, target{name: t.Topic, id: t.TopicID})
		}
	} else {
		for _, n := range r.TopicNames {
			targets = append(targets, target{name: kmsg.StringPtr(n)})
		}
	}

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
	return resp
}
