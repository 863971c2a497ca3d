package peer_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-streaming/samsa/internal/peer"
	"github.com/samsa-streaming/samsa/internal/protocol"
	"github.com/samsa-streaming/samsa/internal/server"
	"github.com/samsa-streaming/samsa/internal/testutil"
)

// testHandler answers Raft requests with their sender as the cluster id, after
// hold is closed when the request carries a message "hold" (held is signalled when
// such a request arrives).
type testHandler struct {
	hold chan struct{}
	held chan struct{}
}

func (h *testHandler) Handle(req *protocol.Request) <-chan protocol.Response {
	switch r := req.Body.(type) {
	case *protocol.RaftRequest:
		ch := make(chan protocol.Response, 1)
		go func() {
			if len(r.Messages) > 0 && string(r.Messages[0]) == "hold" {
				if h.held != nil {
					h.held <- struct{}{}
				}
				<-h.hold
			}
			ch <- protocol.Response{Body: &protocol.RaftResponse{ClusterID: fmt.Sprint(r.From)}}
		}()
		return ch
	case *kmsg.ApiVersionsRequest:
		resp := kmsg.NewPtrApiVersionsResponse()
		resp.SetVersion(req.Version)
		resp.ApiKeys = []kmsg.ApiVersionsResponseApiKey{{ApiKey: 18, MaxVersion: 4}}
		return protocol.Ready(protocol.Response{Body: resp})
	}
	return protocol.Ready(protocol.Response{Close: true, None: true})
}

func startServer(t *testing.T, addr string, h protocol.Handler) *server.Server {
	t.Helper()
	srv, err := server.New(server.Config{
		Listeners: server.Listen(addr),
		Handler:   h,
		Versions: func(key int16) (int16, int16, bool) {
			switch key {
			case protocol.RaftKey:
				return 0, 0, true
			case 18:
				return 0, 4, true
			}
			return 0, 0, false
		},
		NewRequest: func(key int16) kmsg.Request {
			if r := protocol.NewInternalRequest(key); r != nil {
				return r
			}
			return kmsg.RequestForKey(key)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return srv
}

func ctxT(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func TestRequestsPipelinedInOrder(t *testing.T) {
	h := &testHandler{hold: make(chan struct{}), held: make(chan struct{}, 1)}
	srv := startServer(t, "127.0.0.1:0", h)
	c := peer.New(srv.Addrs()[0].String(), peer.Options{ClientID: "test"})
	defer c.Close()

	// A flexible kmsg request (ApiVersions v3 has a non-flexible response header).
	v := kmsg.NewPtrApiVersionsRequest()
	v.SetVersion(3)
	resp, err := c.Request(ctxT(t, 5*time.Second), v)
	if err != nil || len(resp.(*kmsg.ApiVersionsResponse).ApiKeys) != 1 {
		t.Fatalf("ApiVersions: %v %+v", err, resp)
	}

	// The first request is held; the others queue behind it on the connection and
	// are answered after it, in order.
	var wg sync.WaitGroup
	got := make([]string, 5)
	for i := range 5 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			msg := "go"
			if i == 0 {
				msg = "hold"
			}
			r, err := c.Request(ctxT(t, 5*time.Second), &protocol.RaftRequest{From: int32(i), Messages: [][]byte{[]byte(msg)}})
			if err != nil {
				t.Error(err)
				return
			}
			got[i] = r.(*protocol.RaftResponse).ClusterID
		}()
		if i == 0 {
			select { // the held request is on the wire before the others
			case <-h.held:
			case <-time.After(5 * time.Second):
				t.Fatal("the held request did not arrive")
			}
		}
	}
	close(h.hold)
	wg.Wait()
	for i, g := range got {
		if g != fmt.Sprint(i) {
			t.Fatalf("response %d = %q", i, g)
		}
	}
}

func TestTimeoutBreaksAndBackoffThenReconnect(t *testing.T) {
	h := &testHandler{hold: make(chan struct{})}
	srv := startServer(t, "127.0.0.1:0", h)
	addr := srv.Addrs()[0].String()
	c := peer.New(addr, peer.Options{BackoffMin: 100 * time.Millisecond, BackoffMax: 100 * time.Millisecond})
	defer c.Close()

	_, err := c.Request(ctxT(t, 100*time.Millisecond), &protocol.RaftRequest{Messages: [][]byte{[]byte("hold")}})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("held request: %v", err)
	}
	close(h.hold)
	if _, err := c.Request(ctxT(t, time.Second), &protocol.RaftRequest{}); !errors.Is(err, peer.ErrBackingOff) {
		t.Fatalf("right after a failure: %v", err)
	}
	testutil.WaitFor(t, 5*time.Second, func() bool {
		_, err := c.Request(ctxT(t, time.Second), &protocol.RaftRequest{From: 7})
		return err == nil
	}, "a reconnect after the backoff")

	// The server goes away and comes back on the same address.
	srv.Close()
	if _, err := c.Request(ctxT(t, time.Second), &protocol.RaftRequest{}); err == nil {
		t.Fatal("request to a closed server succeeded")
	}
	if _, err := net.Dial("tcp", addr); err == nil {
		t.Fatal("address still accepting")
	}
	startServer(t, addr, &testHandler{})
	testutil.WaitFor(t, 5*time.Second, func() bool {
		_, err := c.Request(ctxT(t, time.Second), &protocol.RaftRequest{})
		return err == nil
	}, "a reconnect to the restarted server")
}
