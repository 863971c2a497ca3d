package broker

// The share group offset APIs (KIP-932), served by the group's coordinator:
//
//	DescribeShareGroupOffsets (90) v0–1  each partition's share-partition start offset
//	                                     (SPSO; -1 without state) and, from v1, its lag:
//	                                     records below the high watermark not yet
//	                                     acknowledged or archived
//	AlterShareGroupOffsets    (91) v0    moves the start of partitions of an empty group
//	                                     (created if unknown); what was in flight is
//	                                     dropped
//	DeleteShareGroupOffsets   (92) v0    deletes the state of topics of an empty group
//
// A group that is not a share group answers GROUP_ID_NOT_FOUND; altering or deleting
// the offsets of a group with members answers NON_EMPTY_GROUP.

import (
	"context"
	"maps"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-streaming/samsa/internal/metadata"
	"github.com/samsa-streaming/samsa/internal/protocol"
	"github.com/samsa-streaming/samsa/internal/share"
)

func init() {
	register(kmsg.DescribeShareGroupOffsets, 0, 1, (*Broker).handleDescribeShareGroupOffsets)
	register(kmsg.AlterShareGroupOffsets, 0, 0, (*Broker).handleAlterShareGroupOffsets)
	register(kmsg.DeleteShareGroupOffsets, 0, 0, (*Broker).handleDeleteShareGroupOffsets)
}

// shareLag counts the records of a partition below hw that are not done.
func shareLag(snap share.Snapshot, hw int64) int64 {
	if hw <= snap.Start {
		return 0
	}
	lag := hw - snap.Start
	for _, r := range snap.Runs {
		if r.State == share.Acknowledged || r.State == share.Archived {
			lag -= min(r.Last, hw-1) - r.First + 1
		}
	}
	return max(lag, 0)
}

func (b *Broker) handleDescribeShareGroupOffsets(req *protocol.Request) <-chan protocol.Response {
	r := req.Body.(*kmsg.DescribeShareGroupOffsetsRequest)
	resp := r.ResponseKind().(*kmsg.DescribeShareGroupOffsetsResponse)
	ctx, cancel := b.requestContext(0)
	defer cancel()
	img := b.image()
	for _, rg := range r.Groups {
		out := kmsg.NewDescribeShareGroupOffsetsResponseGroup()
		out.GroupID = rg.GroupID
		code, ok := b.groups.ShareGroupExists(rg.GroupID)
		switch {
		case code != 0:
			out.ErrorCode = code
		case !ok:
			out.ErrorCode = kerr.GroupIDNotFound.Code
			out.ErrorMessage = kmsg.StringPtr("Group " + rg.GroupID + " is not a share group.")
		default:
			out.Topics = b.describeShareOffsets(ctx, img, rg)
		}
		resp.Groups = append(resp.Groups, out)
	}
	return reply(resp)
}

func (b *Broker) describeShareOffsets(ctx context.Context, img *metadata.Image, rg kmsg.DescribeShareGroupOffsetsRequestGroup) []kmsg.DescribeShareGroupOffsetsResponseGroupTopic {
	want := map[string][]int32{}
	var names []string
	if rg.Topics == nil {
		snaps, _ := b.shareState.Snapshots(ctx, rg.GroupID)
		for k := range snaps {
			if t, ok := img.TopicByID(metadata.TopicID(k.TopicID)); ok {
				if _, seen := want[t.Name]; !seen {
					names = append(names, t.Name)
				}
				want[t.Name] = append(want[t.Name], k.Partition)
			}
		}
		slices.Sort(names)
	} else {
		for _, t := range rg.Topics {
			names = append(names, t.Topic)
			want[t.Topic] = t.Partitions
		}
	}
	var out []kmsg.DescribeShareGroupOffsetsResponseGroupTopic
	for _, name := range names {
		ot := kmsg.NewDescribeShareGroupOffsetsResponseGroupTopic()
		ot.Topic = name
		t, ok := img.Topic(name)
		ps := slices.Clone(want[name])
		slices.Sort(ps)
		for _, p := range ps {
			op := kmsg.NewDescribeShareGroupOffsetsResponseGroupTopicPartition()
			op.Partition, op.StartOffset, op.LeaderEpoch, op.Lag = p, -1, -1, -1
			if !ok {
				op.ErrorCode = kerr.UnknownTopicOrPartition.Code
				ot.Partitions = append(ot.Partitions, op)
				continue
			}
			ot.TopicID = t.ID
			k := share.Key{Group: rg.GroupID, TopicID: t.ID, Partition: p}
			snap, found, err := b.shareState.Read(ctx, k)
			switch {
			case err != nil:
				op.ErrorCode = shareErrorCode(err)
			case found:
				op.StartOffset = snap.Start
				if part := b.replicas.Get(name, p); part != nil {
					op.Lag = shareLag(snap, part.HighWatermark())
					op.LeaderEpoch = part.LeaderEpoch()
				}
			}
			ot.Partitions = append(ot.Partitions, op)
		}
		out = append(out, ot)
	}
	return out
}

// emptyShareGroup checks that a group is a share group without members.
func (b *Broker) emptyShareGroup(groupID string) (int16, string) {
	code, exists, empty := b.groups.ShareGroupEmpty(groupID)
	switch {
	case code != 0:
		return code, ""
	case !exists:
		return kerr.GroupIDNotFound.Code, "Group " + groupID + " is not a share group."
	case !empty:
		return kerr.NonEmptyGroup.Code, "Share group " + groupID + " has members; its offsets change only while it is empty."
	}
	return 0, ""
}

func (b *Broker) handleAlterShareGroupOffsets(req *protocol.Request) <-chan protocol.Response {
	r := req.Body.(*kmsg.AlterShareGroupOffsetsRequest)
	resp := r.ResponseKind().(*kmsg.AlterShareGroupOffsetsResponse)
	if code := <-b.groups.EnsureShareGroup(r.GroupID); code != 0 {
		resp.ErrorCode = code
		return reply(resp)
	}
	ctx, cancel := b.requestContext(0)
	defer cancel()
	img := b.image()
	for _, rt := range r.Topics {
		ot := kmsg.NewAlterShareGroupOffsetsResponseTopic()
		ot.Topic = rt.Topic
		t, ok := img.Topic(rt.Topic)
		if ok {
			ot.TopicID = t.ID
		}
		for _, rp := range rt.Partitions {
			op := kmsg.NewAlterShareGroupOffsetsResponseTopicPartition()
			op.Partition = rp.Partition
			switch {
			case !ok || rp.Partition < 0 || int(rp.Partition) >= len(t.Partitions):
				op.ErrorCode = kerr.UnknownTopicOrPartition.Code
			default:
				k := share.Key{Group: r.GroupID, TopicID: t.ID, Partition: rp.Partition}
				err := b.shares.Do(ctx, k, func(p *share.Partition) error {
					p.Reset(rp.StartOffset)
					return nil
				})
				if err != nil {
					op.ErrorCode = shareErrorCode(err)
				}
			}
			ot.Partitions = append(ot.Partitions, op)
		}
		resp.Topics = append(resp.Topics, ot)
	}
	return reply(resp)
}

func (b *Broker) handleDeleteShareGroupOffsets(req *protocol.Request) <-chan protocol.Response {
	r := req.Body.(*kmsg.DeleteShareGroupOffsetsRequest)
	resp := r.ResponseKind().(*kmsg.DeleteShareGroupOffsetsResponse)
	if code, msg := b.emptyShareGroup(r.GroupID); code != 0 {
		resp.ErrorCode = code
		resp.ErrorMessage = kmsg.StringPtr(msg)
		return reply(resp)
	}
	ctx, cancel := b.requestContext(0)
	defer cancel()
	img := b.image()
	snaps, err := b.shareState.Snapshots(ctx, r.GroupID)
	if err != nil {
		resp.ErrorCode = shareErrorCode(err)
		return reply(resp)
	}
	for _, rt := range r.Topics {
		ot := kmsg.NewDeleteShareGroupOffsetsResponseTopic()
		ot.Topic = rt.Topic
		t, ok := img.Topic(rt.Topic)
		if !ok {
			ot.ErrorCode = kerr.UnknownTopicOrPartition.Code
			resp.Topics = append(resp.Topics, ot)
			continue
		}
		ot.TopicID = t.ID
		for _, k := range slices.SortedFunc(maps.Keys(snaps), func(a, b share.Key) int { return int(a.Partition - b.Partition) }) {
			if k.TopicID != t.ID {
				continue
			}
			b.shares.Forget(k)
			if err := b.shareState.Delete(ctx, k); err != nil && ot.ErrorCode == 0 {
				ot.ErrorCode = shareErrorCode(err)
			}
		}
		resp.Topics = append(resp.Topics, ot)
	}
	return reply(resp)
}
