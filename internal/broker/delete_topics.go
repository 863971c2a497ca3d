package broker

// DeleteTopics (key 20), versions 0–6; on the client listeners and the controller
// listener.
//
// Topics are named (v0–v5) or named or identified by topic ID (v6). A broker forwards
// the request to the active controller and answers once its own image no longer has
// the deleted topics. The controller commits the deletion through the metadata
// quorum; each broker then removes the partitions' files (renamed aside and deleted
// in the background). Internal topics cannot be deleted, and no topic can when the
// controller's delete.topic.enable is false (TOPIC_DELETION_DISABLED). As on Kafka's
// controller, an entry with neither a name nor an id, or with both, a name or id given
// twice, and a name given along with its topic's id are INVALID_REQUEST and delete
// nothing (checkDeleteTargets).

import (
	"context"
	"fmt"

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

	var targets []deleteTarget
	if r.Version >= 6 {
		for _, t := range r.Topics {
			targets = append(targets, deleteTarget{name: t.Topic, id: t.TopicID})
		}
	} else {
		for _, n := range r.TopicNames {
			targets = append(targets, deleteTarget{name: kmsg.StringPtr(n)})
		}
	}

	img := b.image()
	for _, tg := range checkDeleteTargets(img, targets) {
		st := kmsg.NewDeleteTopicsResponseTopic()
		st.Topic, st.TopicID = tg.name, tg.id
		if tg.invalid != "" {
			st.ErrorCode, st.ErrorMessage = kerr.InvalidRequest.Code, kmsg.StringPtr(tg.invalid)
			resp.Topics = append(resp.Topics, st)
			continue
		}
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

// deleteTarget is one topic a DeleteTopics request names, by name or (v6) by id;
// invalid, when set, is why the request's shape refuses it (INVALID_REQUEST).
type deleteTarget struct {
	name    *string
	id      [16]byte
	invalid string
}

// checkDeleteTargets refuses, as Kafka's ControllerApis.deleteTopics does, an entry
// with neither a name nor an id, one with both, a name or an id given twice (one
// answer for all its entries) and a name whose topic's id is given too (one answer
// for both); none of them is deleted. The others are returned as they came.
func checkDeleteTargets(img *metadata.Image, targets []deleteTarget) []deleteTarget {
	names, ids := map[string]int{}, map[[16]byte]int{}
	for _, tg := range targets {
		switch zero := tg.id == [16]byte{}; {
		case tg.name != nil && zero:
			names[*tg.name]++
		case tg.name == nil && !zero:
			ids[tg.id]++
		}
	}
	// A name whose topic's id is given in another entry.
	collides := map[string][16]byte{}
	for id, n := range ids {
		if t, ok := img.TopicByID(metadata.TopicID(id)); ok && n == 1 && names[t.Name] == 1 {
			collides[t.Name] = id
		}
	}
	out := make([]deleteTarget, 0, len(targets))
	answered := map[any]bool{}
	for _, tg := range targets {
		zero := tg.id == [16]byte{}
		switch {
		case tg.name == nil && zero:
			tg.invalid = "an entry names neither a topic nor a topic id: give one of them"
		case tg.name != nil && !zero:
			tg.invalid = "an entry names both a topic and a topic id: give one of them"
		case tg.name != nil && names[*tg.name] > 1:
			if answered[*tg.name] {
				continue
			}
			answered[*tg.name] = true
			tg.invalid = fmt.Sprintf("topic %q is named more than once: name it once", *tg.name)
		case tg.name == nil && ids[tg.id] > 1:
			if answered[tg.id] {
				continue
			}
			answered[tg.id] = true
			tg.invalid = fmt.Sprintf("topic id %s is given more than once: give it once", metadataTopicID(tg.id))
		case tg.name != nil && collides[*tg.name] != [16]byte{}:
			continue // answered with its id's entry
		case tg.name == nil:
			if t, ok := img.TopicByID(metadata.TopicID(tg.id)); ok && collides[t.Name] == tg.id {
				name := t.Name
				tg.name, tg.invalid = &name, fmt.Sprintf("topic %q is named both by its name and by its id: name it once", name)
			}
		}
		out = append(out, tg)
	}
	return out
}
