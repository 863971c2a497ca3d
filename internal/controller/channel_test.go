package controller

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestChannelRetriesEveryForwardedAPIOnNotController checks that a broker's channel
// retries, as Kafka's NodeToControllerRequestThread does for any forwarded request
// whose answer holds NOT_CONTROLLER, the admin requests it forwards for ACLs, client
// quotas and SCRAM credentials — not only the topic and config ones — so that a client
// whose request meets a controller change is not answered NOT_CONTROLLER by a broker.
func TestChannelRetriesEveryForwardedAPIOnNotController(t *testing.T) {
	nc := kerr.NotController.Code
	cases := []struct {
		name string
		req  kmsg.Request
		// answer builds the controller's answer, every item with code.
		answer func(code int16) kmsg.Response
	}{
		{"CreateAcls", kmsg.NewPtrCreateACLsRequest(), func(code int16) kmsg.Response {
			r := kmsg.NewPtrCreateACLsResponse()
			res := kmsg.NewCreateACLsResponseResult()
			res.ErrorCode = code
			r.Results = append(r.Results, res, res)
			return r
		}},
		{"DeleteAcls", kmsg.NewPtrDeleteACLsRequest(), func(code int16) kmsg.Response {
			r := kmsg.NewPtrDeleteACLsResponse()
			res := kmsg.NewDeleteACLsResponseResult()
			res.ErrorCode = code
			r.Results = append(r.Results, res)
			return r
		}},
		{"AlterClientQuotas", kmsg.NewPtrAlterClientQuotasRequest(), func(code int16) kmsg.Response {
			r := kmsg.NewPtrAlterClientQuotasResponse()
			e := kmsg.NewAlterClientQuotasResponseEntry()
			e.ErrorCode = code
			r.Entries = append(r.Entries, e)
			return r
		}},
		{"AlterUserScramCredentials", kmsg.NewPtrAlterUserSCRAMCredentialsRequest(), func(code int16) kmsg.Response {
			r := kmsg.NewPtrAlterUserSCRAMCredentialsResponse()
			res := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
			res.User, res.ErrorCode = "alice", code
			r.Results = append(r.Results, res)
			return r
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var calls atomic.Int32
			ch := NewChannel(ChannelOptions{
				NodeID: 1,
				Voters: map[int32]string{1: "127.0.0.1:1"},
				Leader: func() int32 { return 1 },
				// The first attempt meets a controller that just lost the leadership.
				Local: func(context.Context, kmsg.Request) (kmsg.Response, error) {
					if calls.Add(1) == 1 {
						return tc.answer(nc), nil
					}
					return tc.answer(0), nil
				},
				RetryBackoff: time.Millisecond,
			})
			defer ch.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			resp, err := ch.Send(ctx, tc.req)
			if err != nil {
				t.Fatalf("Send: %v", err)
			}
			if notControllerAnywhere(resp) {
				t.Fatalf("Send answered NOT_CONTROLLER after %d attempt(s): the channel should have retried on the new controller", calls.Load())
			}
			if calls.Load() != 2 {
				t.Fatalf("%d attempts, want 2", calls.Load())
			}
		})
	}
}

// notControllerAnywhere reports whether any item of resp is NOT_CONTROLLER.
func notControllerAnywhere(resp kmsg.Response) bool {
	nc := kerr.NotController.Code
	switch r := resp.(type) {
	case *kmsg.CreateACLsResponse:
		for _, x := range r.Results {
			if x.ErrorCode == nc {
				return true
			}
		}
	case *kmsg.DeleteACLsResponse:
		for _, x := range r.Results {
			if x.ErrorCode == nc {
				return true
			}
		}
	case *kmsg.AlterClientQuotasResponse:
		for _, x := range r.Entries {
			if x.ErrorCode == nc {
				return true
			}
		}
	case *kmsg.AlterUserSCRAMCredentialsResponse:
		for _, x := range r.Results {
			if x.ErrorCode == nc {
				return true
			}
		}
	}
	return false
}
