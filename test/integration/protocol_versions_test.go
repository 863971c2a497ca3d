package integration

// The newest versions of the data-path and cluster APIs, driven with raw requests:
// Produce v13 (topics by id), ListOffsets v9–11 (tiered-storage timestamps), Metadata
// v13, ApiVersions v5 (KIP-1242), DescribeLogDirs v5 and DescribeCluster v2.

import (
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/samsa-streaming/samsa/internal/testutil"
)

// pinned returns a client that sends key at most at version max (kgo sends the
// highest version both sides serve).
func pinned(t *testing.T, b *testutil.Broker, key kmsg.Key, max int16) *kgo.Client {
	versions := kversion.Stable()
	versions.SetMaxKeyVersion(int16(key), max)
	return newClient(t, b, kgo.MaxVersions(versions))
}

func TestProduceByTopicID(t *testing.T) {
	t.Parallel()
	b := testutil.StartBroker(t)
	createTopic(t, newAdmin(t, b), "byid-produce", 1, nil)
	cl := pinned(t, b, kmsg.Produce, 13)
	id := topicID(t, cl, "byid-produce")

	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = -1, 5000
	for _, tid := range [][16]byte{id, {9, 9, 9}} {
		rt := kmsg.NewProduceRequestTopic()
		rt.TopicID = tid
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Records = rawBatch(-1, -1, -1, "by-id")
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
	}
	resp, err := req.RequestWith(ctxT(t, 10*time.Second), cl)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Version != 13 {
		t.Fatalf("answered in v%d, want 13", resp.Version)
	}
	if got := resp.Topics[0]; got.TopicID != id || got.Partitions[0].ErrorCode != 0 || got.Partitions[0].BaseOffset != 0 {
		t.Fatalf("produce by id: topic id %x, partition %+v", got.TopicID, got.Partitions[0])
	}
	if got := resp.Topics[1]; got.TopicID != [16]byte{9, 9, 9} || got.Partitions[0].ErrorCode != kerr.UnknownTopicID.Code {
		t.Fatalf("produce to an unknown topic id: topic id %x, error %d", got.TopicID, got.Partitions[0].ErrorCode)
	}
	recs := consumeN(t, b, "byid-produce", 1)
	if string(recs[0].Value) != "by-id" || recs[0].Offset != 0 {
		t.Fatalf("consumed %q at %d", recs[0].Value, recs[0].Offset)
	}
}

func TestListOffsetsTieredTimestamps(t *testing.T) {
	t.Parallel()
	b := testutil.StartBroker(t)
	createTopic(t, newAdmin(t, b), "tiered", 1, nil)
	produceSync(t, newClient(t, b), &kgo.Record{Topic: "tiered", Value: []byte("a")}, &kgo.Record{Topic: "tiered", Value: []byte("b")})

	list := func(cl *kgo.Client, ts int64) kmsg.ListOffsetsResponseTopicPartition {
		t.Helper()
		req := kmsg.NewPtrListOffsetsRequest()
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = "tiered"
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Timestamp = ts
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctxT(t, 10*time.Second), cl)
		if err != nil {
			t.Fatal(err)
		}
		return resp.Topics[0].Partitions[0]
	}
	v11 := pinned(t, b, kmsg.ListOffsets, 11)
	for ts, want := range map[int64]int64{-1: 2, -2: 0, -4: 0, -5: -1, -6: -1} {
		if p := list(v11, ts); p.ErrorCode != 0 || p.Offset != want {
			t.Errorf("v11 timestamp %d: offset %d, error %d; want %d", ts, p.Offset, p.ErrorCode, want)
		}
	}
	// A special timestamp the version does not know is refused, as on Kafka.
	for ts, v := range map[int64]int16{-5: 8, -6: 10, -4: 7, -3: 6, -7: 11} {
		if p := list(pinned(t, b, kmsg.ListOffsets, v), ts); p.ErrorCode != kerr.UnsupportedVersion.Code {
			t.Errorf("v%d timestamp %d: error %d, want UNSUPPORTED_VERSION", v, ts, p.ErrorCode)
		}
	}
}

func TestClusterAPIsNewestVersions(t *testing.T) {
	t.Parallel()
	b := testutil.StartBroker(t)
	createTopic(t, newAdmin(t, b), "newest", 2, nil)
	cl := newClient(t, b)
	ctx := ctxT(t, 20*time.Second)

	meta := kmsg.NewPtrMetadataRequest()
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr("newest")
	meta.Topics = append(meta.Topics, mt)
	mresp, err := meta.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if mresp.Version != 13 || mresp.ErrorCode != 0 || len(mresp.Topics) != 1 || len(mresp.Topics[0].Partitions) != 2 {
		t.Fatalf("metadata v%d: error %d, topics %+v", mresp.Version, mresp.ErrorCode, mresp.Topics)
	}

	dirs := kmsg.NewPtrDescribeLogDirsRequest()
	dresp, err := dirs.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if dresp.Version != 5 || len(dresp.Dirs) != 1 || dresp.Dirs[0].IsCordoned || len(dresp.Dirs[0].Topics) == 0 {
		t.Fatalf("describe log dirs v%d: %+v", dresp.Version, dresp.Dirs)
	}

	desc := kmsg.NewPtrDescribeClusterRequest()
	desc.IncludeFencedBrokers = true
	cresp, err := desc.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if cresp.Version != 2 || cresp.ClusterID == "" || len(cresp.Brokers) != 1 || cresp.Brokers[0].IsFenced {
		t.Fatalf("describe cluster v%d: cluster %q, brokers %+v", cresp.Version, cresp.ClusterID, cresp.Brokers)
	}

	// ApiVersions v5 on a raw connection: the client may name the cluster and node it
	// means to reach.
	other := "another-cluster"
	for _, c := range []struct {
		name    string
		cluster *string
		node    int32
		want    int16
	}{
		{"bootstrapping", nil, -1, 0},
		{"this node", &cresp.ClusterID, cresp.Brokers[0].NodeID, 0},
		{"another node", &cresp.ClusterID, cresp.Brokers[0].NodeID + 1, kerr.RebootstrapRequired.Code},
		{"another cluster", &other, cresp.Brokers[0].NodeID, kerr.RebootstrapRequired.Code},
		{"cluster without node", &cresp.ClusterID, -1, kerr.InvalidRequest.Code},
		{"node without cluster", nil, cresp.Brokers[0].NodeID, kerr.InvalidRequest.Code},
	} {
		req := kmsg.NewPtrApiVersionsRequest()
		req.Version = 5
		req.ClientSoftwareName, req.ClientSoftwareVersion = "samsa-test", "1.0"
		req.ClusterID, req.NodeID = c.cluster, c.node
		resp := rawAPIVersions(t, b, req)
		if resp.ErrorCode != c.want || (c.want == 0) != (len(resp.ApiKeys) > 0) {
			t.Errorf("%s: error %d with %d api keys, want error %d", c.name, resp.ErrorCode, len(resp.ApiKeys), c.want)
		}
	}
	bad := kmsg.NewPtrApiVersionsRequest()
	bad.Version = 3
	bad.ClientSoftwareName, bad.ClientSoftwareVersion = "-not valid-", "1.0"
	if resp := rawAPIVersions(t, b, bad); resp.ErrorCode != kerr.InvalidRequest.Code {
		t.Errorf("software name %q: error %d, want INVALID_REQUEST", bad.ClientSoftwareName, resp.ErrorCode)
	}
}

// rawAPIVersions sends one ApiVersions request (v3+: flexible header) on a fresh
// connection and decodes the answer.
func rawAPIVersions(t *testing.T, b *testutil.Broker, req *kmsg.ApiVersionsRequest) *kmsg.ApiVersionsResponse {
	t.Helper()
	conn, err := net.DialTimeout("tcp", b.Addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	body := append(requestHeader(int16(kmsg.ApiVersions), req.Version, 7), 0) // empty header tags
	if _, err := conn.Write(frame(req.AppendTo(body))); err != nil {
		t.Fatal(err)
	}
	var size [4]byte
	if _, err := io.ReadFull(conn, size[:]); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(conn, buf); err != nil {
		t.Fatal(err)
	}
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.Version = req.Version
	if err := resp.ReadFrom(buf[4:]); err != nil { // after the correlation id (ApiVersions' response header has no tags)
		t.Fatal(err)
	}
	return resp
}
