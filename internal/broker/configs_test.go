package broker

import (
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestDescribeConfigsIllegalTopicName: a topic resource whose name no topic can have
// is INVALID_TOPIC_EXCEPTION, as Kafka's Topic.validate answers before it looks the
// topic up; a legal name that is not a topic is UNKNOWN_TOPIC_OR_PARTITION.
func TestDescribeConfigsIllegalTopicName(t *testing.T) {
	b := startTestBroker(t)
	for name, want := range map[string]int16{
		"":                       kerr.InvalidTopicException.Code,
		".":                      kerr.InvalidTopicException.Code,
		"..":                     kerr.InvalidTopicException.Code,
		"a b":                    kerr.InvalidTopicException.Code,
		strings.Repeat("x", 250): kerr.InvalidTopicException.Code,
		"no-such-topic":          kerr.UnknownTopicOrPartition.Code,
		"__cluster_metadata":     kerr.UnknownTopicOrPartition.Code,
	} {
		req := kmsg.NewPtrDescribeConfigsRequest()
		res := kmsg.NewDescribeConfigsRequestResource()
		res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeTopic, name
		req.Resources = append(req.Resources, res)
		got := call[*kmsg.DescribeConfigsResponse](t, b, req).Resources[0]
		if got.ErrorCode != want {
			t.Errorf("topic %q: %v, want %v", name, kerr.ErrorForCode(got.ErrorCode), kerr.ErrorForCode(want))
		}
	}
}
