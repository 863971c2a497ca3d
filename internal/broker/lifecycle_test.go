package broker

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-streaming/samsa/internal/protocol"
	"github.com/samsa-streaming/samsa/internal/testutil"
)

// TestHeartbeatReportsTheImageActedOn: a broker's heartbeat reports the metadata
// offset of the image it has acted on, not a newer one it has yet to reconcile, as
// Kafka's broker reports the metadata loader's last applied offset, advanced only
// after its publishers (the replica manager among them) ran. The controller lets a
// broker in controlled shutdown go once every active broker reports the entries
// that moved its leaderships, and unfences a broker once it reports its
// registration: a broker that has not opened the partitions it now leads must not
// count. It reported the latest published image.
func TestHeartbeatReportsTheImageActedOn(t *testing.T) {
	b := startTestBroker(t)

	// Reconcile is held up (a broker opening thousands of logs): the next image is
	// published but not acted on.
	b.reconcileMu.Lock()
	held := true
	defer func() {
		if held {
			b.reconcileMu.Unlock()
		}
	}()
	req := kmsg.NewPtrCreateTopicsRequest()
	req.SetVersion(7)
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "not-yet-opened", 1, 1
	req.Topics = append(req.Topics, rt)
	answered := b.Handle(&protocol.Request{Key: req.Key(), Version: req.GetVersion(), Body: req})
	var published int64
	testutil.WaitFor(t, 10*time.Second, func() bool {
		img := b.meta.Image()
		_, ok := img.Topic("not-yet-opened")
		published = img.Offset()
		return ok
	}, "the topic in the published image")

	if got := b.heartbeatRequest(1).CurrentMetadataOffset; got >= published {
		t.Errorf("heartbeat reports metadata offset %d, that of an image with a topic whose partition reconcile has not opened (acted on: %d)", got, b.acted.Load().Offset())
	}
	b.reconcileMu.Unlock()
	held = false
	select {
	case <-answered:
	case <-time.After(10 * time.Second):
		t.Fatal("CreateTopics not answered")
	}
	testutil.WaitFor(t, 10*time.Second, func() bool {
		return b.heartbeatRequest(1).CurrentMetadataOffset >= published
	}, "the heartbeat offset to catch up once reconciled")
}
