package cluster

import (
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-streaming/samsa/internal/testutil"
)

// TestDynamicClusterDefaultReachesEveryBroker: a cluster-wide dynamic broker config
// (kafka-configs.sh --entity-type brokers --entity-default), sent to a broker that is
// not the active controller, reaches every broker: each describes it on itself and on
// a topic without an override (source DYNAMIC_DEFAULT_BROKER_CONFIG), and every
// partition leader refuses a batch above the lowered message.max.bytes. Broker
// configs could not be altered before.
func TestDynamicClusterDefaultReachesEveryBroker(t *testing.T) {
	t.Parallel()
	c := testutil.StartCluster(t, testutil.ClusterOptions{})
	via := notTheActiveController(t, c)
	const topic = "dyn-default"
	createTopic(t, newNodeClient(t, via.Addr), topic, 6, 3)

	cl, err := kgo.NewClient(kgo.SeedBrokers(via.Addr), kgo.ProducerLinger(0), kgo.DefaultProduceTopic(topic),
		kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	adm := kadm.NewClient(cl)
	resps, err := adm.AlterBrokerConfigs(ctxT(t, 30*time.Second), []kadm.AlterConfig{{Name: "message.max.bytes", Value: kmsg.StringPtr("500")}})
	if err != nil || len(resps) != 1 || resps[0].Err != nil {
		t.Fatalf("set the cluster default message.max.bytes: %v %+v", err, resps)
	}

	for _, n := range c.Nodes() {
		node := newNodeClient(t, n.Addr)
		describe := func(typ kmsg.ConfigResourceType, name, config string) (string, kmsg.ConfigSource) {
			req := kmsg.NewPtrDescribeConfigsRequest()
			res := kmsg.NewDescribeConfigsRequestResource()
			res.ResourceType, res.ResourceName, res.ConfigNames = typ, name, []string{config}
			req.Resources = append(req.Resources, res)
			r, err := node.request(ctxT(t, 10*time.Second), req)
			if err != nil {
				return err.Error(), 0
			}
			rr := r.(*kmsg.DescribeConfigsResponse).Resources[0]
			if rr.ErrorCode != 0 || len(rr.Configs) != 1 {
				return kerr.ErrorForCode(rr.ErrorCode).Error(), 0
			}
			return deref(rr.Configs[0].Value), rr.Configs[0].Source
		}
		testutil.WaitFor(t, 30*time.Second, func() bool {
			tv, ts := describe(kmsg.ConfigResourceTypeTopic, topic, "max.message.bytes")
			bv, bs := describe(kmsg.ConfigResourceTypeBroker, strconv.Itoa(int(n.ID)), "message.max.bytes")
			return tv == "500" && ts == kmsg.ConfigSourceDynamicDefaultBrokerConfig && bv == "500" && bs == kmsg.ConfigSourceDynamicDefaultBrokerConfig
		}, "the cluster default message.max.bytes=500 described by the broker")
	}
	for p := range int32(6) {
		err := cl.ProduceSync(ctxT(t, 30*time.Second), &kgo.Record{Partition: p, Value: make([]byte, 2000)}).FirstErr()
		if !errors.Is(err, kerr.MessageTooLarge) {
			t.Errorf("partition %d: 2000 bytes under message.max.bytes=500: %v, want MESSAGE_TOO_LARGE", p, err)
		}
	}
}
