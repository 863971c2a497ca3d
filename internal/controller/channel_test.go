package controller

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-streaming/samsa/internal/protocol"
	"github.com/samsa-streaming/samsa/internal/server"
)

// TestChannelRetriesEveryForwardedAPIOnNotController checks that a broker's channel
// retries, as Kafka's NodeToControllerRequestThread does for any forwarded request
// whose answer holds NOT_CONTROLLER, the admin requests it forwards for ACLs, client
// quotas, SCRAM credentials and delegation tokens — not only the topic and config
// ones — so that a client whose request meets a controller change is not answered
// NOT_CONTROLLER by a broker.
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
		{"SamsaDelegationToken", &protocol.DelegationTokenRequest{Op: protocol.TokenCreate}, func(code int16) kmsg.Response {
			return &protocol.DelegationTokenResponse{ErrorCode: code}
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

// TestChannelRetriesConfigChangesOnAnyNotController: an AlterConfigs or
// IncrementalAlterConfigs answer with NOT_CONTROLLER for one resource and another
// error for the next (a broker resource, refused on any controller; or a resource the
// controller changed before it lost the leadership) is retried, as Kafka retries any
// forwarded answer holding NOT_CONTROLLER: a config change applies the same twice.
func TestChannelRetriesConfigChangesOnAnyNotController(t *testing.T) {
	nc, invalid := kerr.NotController.Code, kerr.InvalidRequest.Code
	cases := []struct {
		name   string
		req    kmsg.Request
		answer func(first bool) kmsg.Response
	}{
		{"IncrementalAlterConfigs", kmsg.NewPtrIncrementalAlterConfigsRequest(), func(first bool) kmsg.Response {
			r := kmsg.NewPtrIncrementalAlterConfigsResponse()
			broker, topic := kmsg.NewIncrementalAlterConfigsResponseResource(), kmsg.NewIncrementalAlterConfigsResponseResource()
			broker.ErrorCode = invalid
			if first {
				topic.ErrorCode = nc
			}
			r.Resources = append(r.Resources, broker, topic)
			return r
		}},
		{"AlterConfigs", kmsg.NewPtrAlterConfigsRequest(), func(first bool) kmsg.Response {
			r := kmsg.NewPtrAlterConfigsResponse()
			broker, topic := kmsg.NewAlterConfigsResponseResource(), kmsg.NewAlterConfigsResponseResource()
			broker.ErrorCode = invalid
			if first {
				topic.ErrorCode = nc
			}
			r.Resources = append(r.Resources, broker, topic)
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
				Local: func(context.Context, kmsg.Request) (kmsg.Response, error) {
					return tc.answer(calls.Add(1) == 1), nil
				},
				RetryBackoff: time.Millisecond,
			})
			defer ch.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if _, err := ch.Send(ctx, tc.req); err != nil {
				t.Fatalf("Send: %v", err)
			}
			if calls.Load() != 2 {
				t.Fatalf("%d attempts, want 2: a NOT_CONTROLLER answer went back to the client", calls.Load())
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
	case *protocol.DelegationTokenResponse:
		return r.ErrorCode == nc
	}
	return false
}

// slowController is a controller listener whose active controller takes longer than
// one request timeout to commit a CreateTopics (a topic of thousands of partitions,
// whose logs it creates before it answers), and serves its commands one at a time
// as the command goroutine does.
type slowController struct {
	mu      sync.Mutex
	created map[string]bool
	delay   time.Duration
	calls   atomic.Int32
}

func (s *slowController) Handle(req *protocol.Request) <-chan protocol.Response {
	if hb, ok := req.Body.(*kmsg.BrokerHeartbeatRequest); ok {
		resp := kmsg.NewPtrBrokerHeartbeatResponse()
		resp.SetVersion(hb.Version)
		return protocol.Ready(protocol.Response{Body: resp})
	}
	r, ok := req.Body.(*kmsg.CreateTopicsRequest)
	if !ok {
		return protocol.Ready(protocol.Response{Close: true, None: true})
	}
	s.calls.Add(1)
	out := make(chan protocol.Response, 1)
	go func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		resp := kmsg.NewPtrCreateTopicsResponse()
		resp.SetVersion(r.Version)
		for _, t := range r.Topics {
			st := kmsg.NewCreateTopicsResponseTopic()
			st.Topic = t.Topic
			if s.created[t.Topic] {
				st.ErrorCode = kerr.TopicAlreadyExists.Code
			} else {
				time.Sleep(s.delay) // the commit and the controller node's own logs
				s.created[t.Topic] = true
			}
			resp.Topics = append(resp.Topics, st)
		}
		out <- protocol.Response{Body: resp}
	}()
	return out
}

// TestChannelWaitsForTheActiveControllerPastTheRequestTimeout checks that a broker
// forwarding a CreateTopics to the active controller waits for its answer, however
// long the controller takes within the client's timeout, rather than giving up
// after one request timeout and sending the request again: the first attempt
// created the topic, and the second, answered TOPIC_ALREADY_EXISTS, would tell the
// client that its own creation failed. Kafka's forwarding broker re-sends a request
// only when the controller answers NOT_CONTROLLER or the connection drops
// (NodeToControllerRequestThread.handleResponse); it waits request.timeout.ms, not
// controller.quorum.request.timeout.ms, for an answer.
func TestChannelWaitsForTheActiveControllerPastTheRequestTimeout(t *testing.T) {
	ctrl := &slowController{created: map[string]bool{}, delay: 600 * time.Millisecond}
	addr := serveFakeController(t, ctrl, kmsg.CreateTopics, kmsg.BrokerHeartbeat)
	ch := NewChannel(ChannelOptions{
		NodeID:         2,
		Voters:         map[int32]string{1: addr},
		Leader:         func() int32 { return 1 }, // node 1 stays the active controller
		RequestTimeout: 150 * time.Millisecond,
		RetryBackoff:   10 * time.Millisecond,
	})
	defer ch.Close()
	req := kmsg.NewPtrCreateTopicsRequest()
	req.SetVersion(5)
	topic := kmsg.NewCreateTopicsRequestTopic()
	topic.Topic, topic.NumPartitions, topic.ReplicationFactor = "big", 3000, 3
	req.Topics = append(req.Topics, topic)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// Meanwhile the broker heartbeats, each within its own short deadline: a
	// heartbeat must not wait behind the CreateTopics (responses come back in
	// request order on one connection) and, timing out, break the connection the
	// CreateTopics waits on.
	stop := make(chan struct{})
	heartbeats := make(chan struct{})
	go func() {
		defer close(heartbeats)
		for {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
			hb := kmsg.NewPtrBrokerHeartbeatRequest()
			hb.SetVersion(1)
			hb.BrokerID, hb.BrokerEpoch = 2, 1
			hctx, hcancel := context.WithTimeout(ctx, 150*time.Millisecond)
			_, _ = ch.Send(hctx, hb)
			hcancel()
		}
	}()
	defer func() { close(stop); <-heartbeats }()
	r, err := ch.Send(ctx, req)
	if err != nil {
		t.Fatalf("Send: %v", err)
	}
	got := r.(*kmsg.CreateTopicsResponse).Topics[0]
	if got.ErrorCode != 0 {
		t.Fatalf("CreateTopics answered %v after %d attempts; the first attempt created the topic", kerr.ErrorForCode(got.ErrorCode), ctrl.calls.Load())
	}
}

// gatedController is a controller listener that holds its answer to a CreateTopics
// of topic "held" until release is closed (a commit taking its time), counting the
// CreateTopics it received per topic; others are answered at once (but, on one
// connection, after "held", as responses come back in request order).
type gatedController struct {
	arrived chan struct{} // closed when the first "held" arrives
	release chan struct{}
	mu      sync.Mutex
	calls   map[string]int
}

func (g *gatedController) Handle(req *protocol.Request) <-chan protocol.Response {
	r, ok := req.Body.(*kmsg.CreateTopicsRequest)
	if !ok {
		return protocol.Ready(protocol.Response{Close: true, None: true})
	}
	g.mu.Lock()
	first := map[string]bool{}
	for _, t := range r.Topics {
		g.calls[t.Topic]++
		first[t.Topic] = g.calls[t.Topic] == 1
		if t.Topic == "held" && first[t.Topic] {
			close(g.arrived)
		}
	}
	g.mu.Unlock()
	out := make(chan protocol.Response, 1)
	go func() {
		resp := kmsg.NewPtrCreateTopicsResponse()
		resp.SetVersion(r.Version)
		for _, t := range r.Topics {
			if t.Topic == "held" {
				<-g.release
			}
			st := kmsg.NewCreateTopicsResponseTopic()
			st.Topic = t.Topic
			if !first[t.Topic] {
				st.ErrorCode = kerr.TopicAlreadyExists.Code
			}
			resp.Topics = append(resp.Topics, st)
		}
		out <- protocol.Response{Body: resp}
	}()
	return out
}

// TestChannelKeepsTheConnectionWhenAForwardedRequestTimesOut checks that a forwarded
// request whose client gives up (its own timeout_ms) is abandoned without breaking
// the connection to the active controller that other forwarded requests wait on:
// breaking it failed them, and the channel sent them again — a CreateTopics then
// answered TOPIC_ALREADY_EXISTS for the topic its first attempt created. Kafka's
// ForwardingManager does not cancel a forwarded request when its client gives up;
// the NetworkClient disconnects only when a request outlives the channel's own
// request timeout.
func TestChannelKeepsTheConnectionWhenAForwardedRequestTimesOut(t *testing.T) {
	ctrl := &gatedController{arrived: make(chan struct{}), release: make(chan struct{}), calls: map[string]int{}}
	addr := serveFakeController(t, ctrl, kmsg.CreateTopics)
	ch := NewChannel(ChannelOptions{
		NodeID:         2,
		Voters:         map[int32]string{1: addr},
		Leader:         func() int32 { return 1 }, // node 1 stays the active controller
		RequestTimeout: 100 * time.Millisecond,
		RetryBackoff:   10 * time.Millisecond,
	})
	defer ch.Close()
	createTopic := func(name string) *kmsg.CreateTopicsRequest {
		req := kmsg.NewPtrCreateTopicsRequest()
		req.SetVersion(5)
		topic := kmsg.NewCreateTopicsRequestTopic()
		topic.Topic, topic.NumPartitions, topic.ReplicationFactor = name, 1, 1
		req.Topics = append(req.Topics, topic)
		return req
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	type result struct {
		resp kmsg.Response
		err  error
	}
	held := make(chan result, 1)
	go func() {
		r, err := ch.Send(ctx, createTopic("held"))
		held <- result{r, err}
	}()
	select {
	case <-ctrl.arrived:
	case <-ctx.Done():
		t.Fatal("the controller never received the CreateTopics")
	}
	// Another client's CreateTopics, with a short timeout, gives up while "held" is
	// still being committed.
	qctx, qcancel := context.WithTimeout(ctx, 50*time.Millisecond)
	_, err := ch.Send(qctx, createTopic("quick"))
	qcancel()
	if err == nil {
		t.Fatal("the short CreateTopics was answered before the one ahead of it on the connection")
	}
	close(ctrl.release)

	res := <-held
	if res.err != nil {
		t.Fatalf("Send: %v", res.err)
	}
	got := res.resp.(*kmsg.CreateTopicsResponse).Topics[0]
	ctrl.mu.Lock()
	calls := ctrl.calls["held"]
	ctrl.mu.Unlock()
	if got.ErrorCode != 0 || calls != 1 {
		t.Fatalf("CreateTopics answered %v after %d attempts; the first attempt created the topic", kerr.ErrorForCode(got.ErrorCode), calls)
	}
}

// serveFakeController serves h on a loopback port for the request keys given (versions
// 0–7) until the test ends, and returns its address.
func serveFakeController(t *testing.T, h protocol.Handler, keys ...kmsg.Key) string {
	t.Helper()
	srv, err := server.New(server.Config{
		Listeners: server.Listen("127.0.0.1:0"),
		Handler:   h,
		Versions: func(key int16) (int16, int16, bool) {
			return 0, 7, slices.Contains(keys, kmsg.Key(key))
		},
		NewRequest: func(key int16) kmsg.Request { return kmsg.RequestForKey(key) },
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return srv.Addrs()[0].String()
}
