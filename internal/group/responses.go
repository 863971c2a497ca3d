package group

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Kafka error codes used by the coordinator.
var (
	kerrNone                      int16 = 0
	kerrUnknownTopicOrPartition         = kerr.UnknownTopicOrPartition.Code
	kerrCoordinatorLoadInProgress       = kerr.CoordinatorLoadInProgress.Code
	kerrCoordinatorNotAvailable         = kerr.CoordinatorNotAvailable.Code
	kerrNotCoordinator                  = kerr.NotCoordinator.Code
	kerrIllegalGeneration               = kerr.IllegalGeneration.Code
	kerrInconsistentGroupProtocol       = kerr.InconsistentGroupProtocol.Code
	kerrInvalidGroupID                  = kerr.InvalidGroupID.Code
	kerrUnknownMemberID                 = kerr.UnknownMemberID.Code
	kerrInvalidSessionTimeout           = kerr.InvalidSessionTimeout.Code
	kerrRebalanceInProgress             = kerr.RebalanceInProgress.Code
	kerrOffsetMetadataTooLarge          = kerr.OffsetMetadataTooLarge.Code
	kerrNonEmptyGroup                   = kerr.NonEmptyGroup.Code
	kerrGroupIDNotFound                 = kerr.GroupIDNotFound.Code
	kerrMemberIDRequired                = kerr.MemberIDRequired.Code
	kerrFencedInstanceID                = kerr.FencedInstanceID.Code
	kerrGroupMaxSizeReached             = kerr.GroupMaxSizeReached.Code
	kerrGroupSubscribedToTopic          = kerr.GroupSubscribedToTopic.Code
)

// appendErrorCode maps a failed append to the code clients retry on.
func appendErrorCode(err error) int16 {
	if errors.Is(err, ErrNotCoordinator) {
		return kerrNotCoordinator
	}
	return kerrCoordinatorNotAvailable
}

type joinResult struct {
	code         int16
	memberID     string
	generation   int32
	protocolType string
	protocol     string
	leader       string
	members      []kmsg.JoinGroupResponseMember
	skip         bool
}

func strPtr(s string) *string { return &s }

func (w *joinWaiter) send(r joinResult) {
	resp := kmsg.NewPtrJoinGroupResponse()
	resp.Version = w.version
	resp.ErrorCode = r.code
	resp.Generation = r.generation
	resp.MemberID = r.memberID
	resp.LeaderID = r.leader
	if r.protocolType != "" {
		resp.ProtocolType = strPtr(r.protocolType)
	}
	if r.protocol != "" {
		resp.Protocol = strPtr(r.protocol)
	}
	resp.Members = r.members
	if resp.Members == nil {
		resp.Members = []kmsg.JoinGroupResponseMember{}
	}
	resp.SkipAssignment = r.skip && w.version >= 9
	deliver(w.ch, resp)
}

// deliver hands over a waiter's one response. The channel has room for exactly one;
// a second response would be a coordinator bug, and must not block the coordinator.
func deliver[T any](ch chan T, v T) {
	select {
	case ch <- v:
	default:
	}
}

func (w *joinWaiter) fail(code int16, memberID string) {
	w.send(joinResult{code: code, memberID: memberID, generation: -1})
}

func (w *syncWaiter) send(code int16, g *group, assignment []byte) {
	var protocolType, protocol string
	if code == kerrNone && g != nil {
		protocolType, protocol = g.protocolType, g.protocol
	}
	w.sendAs(code, protocolType, protocol, assignment)
}

// sendAs answers with the protocol type and name given ("" leaves them null).
func (w *syncWaiter) sendAs(code int16, protocolType, protocol string, assignment []byte) {
	resp := kmsg.NewPtrSyncGroupResponse()
	resp.Version = w.version
	resp.ErrorCode = code
	if protocolType != "" {
		resp.ProtocolType = strPtr(protocolType)
	}
	if protocol != "" {
		resp.Protocol = strPtr(protocol)
	}
	resp.MemberAssignment = assignment
	if resp.MemberAssignment == nil {
		resp.MemberAssignment = []byte{}
	}
	deliver(w.ch, resp)
}

func (w *syncWaiter) fail(code int16) { w.send(code, nil, nil) }
