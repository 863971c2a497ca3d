package peer_test

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-streaming/samsa/internal/peer"
	"github.com/samsa-streaming/samsa/internal/protocol"
	"github.com/samsa-streaming/samsa/internal/server"
)

// olderNode serves WriteTxnMarkers up to v1 and BrokerRegistration up to v2, as a
// node of an older build would, and records the versions it was sent.
type olderNode struct {
	mu       sync.Mutex
	versions []int16
}

var olderVersions = map[int16]int16{18: 3, int16(kmsg.WriteTxnMarkers): 1, int16(kmsg.BrokerRegistration): 2}

func (h *olderNode) Handle(req *protocol.Request) <-chan protocol.Response {
	switch req.Body.(type) {
	case *kmsg.ApiVersionsRequest:
		resp := kmsg.NewPtrApiVersionsResponse()
		resp.SetVersion(req.Version)
		for k, v := range olderVersions {
			resp.ApiKeys = append(resp.ApiKeys, kmsg.ApiVersionsResponseApiKey{ApiKey: k, MaxVersion: v})
		}
		return protocol.Ready(protocol.Response{Body: resp})
	case *kmsg.WriteTxnMarkersRequest:
		h.mu.Lock()
		h.versions = append(h.versions, req.Version)
		h.mu.Unlock()
		resp := kmsg.NewPtrWriteTxnMarkersResponse()
		resp.SetVersion(req.Version)
		return protocol.Ready(protocol.Response{Body: resp})
	}
	return protocol.Ready(protocol.Response{Close: true, None: true})
}

// TestDowngradeToAnOlderPeer: a Conn with Options.Downgrade asks the peer its
// versions when it connects and sends a listed request at the peer's highest
// version when that is lower than the request's, or refuses it (naming the API and
// the versions) when the peer serves none this node may send. Without Downgrade the
// version is sent as built, and the older peer refuses it.
func TestDowngradeToAnOlderPeer(t *testing.T) {
	h := &olderNode{}
	srv, err := server.New(server.Config{
		Listeners: server.Listen("127.0.0.1:0"),
		Handler:   h,
		Versions: func(key int16) (int16, int16, bool) {
			v, ok := olderVersions[key]
			return 0, v, ok
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	addr := srv.Addrs()[0].String()

	c := peer.New(addr, peer.Options{ClientID: "newer", Downgrade: map[int16]int16{
		int16(kmsg.WriteTxnMarkers): 1, int16(kmsg.BrokerRegistration): 3}})
	defer c.Close()
	markers := kmsg.NewPtrWriteTxnMarkersRequest()
	markers.SetVersion(2)
	if _, err := c.Request(ctxT(t, 5*time.Second), markers); err != nil {
		t.Fatalf("WriteTxnMarkers to a node serving v1: %v", err)
	}
	h.mu.Lock()
	got := h.versions
	h.mu.Unlock()
	if len(got) != 1 || got[0] != 1 {
		t.Fatalf("the older node received WriteTxnMarkers at versions %v, want [1]", got)
	}
	reg := kmsg.NewPtrBrokerRegistrationRequest()
	reg.SetVersion(4)
	_, err = c.Request(ctxT(t, 5*time.Second), reg)
	if !errors.Is(err, peer.ErrUnsupported) || !strings.Contains(err.Error(), "serves BrokerRegistration up to v2; this node sends v3 or later") {
		t.Fatalf("BrokerRegistration to a node serving up to v2: %v", err)
	}

	plain := peer.New(addr, peer.Options{ClientID: "as built"})
	defer plain.Close()
	markers = kmsg.NewPtrWriteTxnMarkersRequest()
	markers.SetVersion(2)
	if _, err := plain.Request(ctxT(t, 5*time.Second), markers); err == nil {
		t.Fatal("WriteTxnMarkers v2 without negotiation was answered by a node serving v1")
	}
}
