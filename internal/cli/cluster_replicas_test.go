package cli

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

func TestParseReassignmentPlan(t *testing.T) {
	good := `{"version":1,"partitions":[
		{"topic":"orders","partition":0,"replicas":[2,3,1],"log_dirs":["any","any","any"]},
		{"topic":"orders","partition":1,"replicas":[3]}]}`
	moves, err := parseReassignmentPlan([]byte(good), false)
	if err != nil {
		t.Fatal(err)
	}
	if len(moves) != 2 || moves[0].Topic != "orders" || moves[0].Partition != 0 || !slices.Equal(moves[0].Replicas, []int32{2, 3, 1}) ||
		moves[1].Partition != 1 || !slices.Equal(moves[1].Replicas, []int32{3}) {
		t.Fatalf("parsed %+v", moves)
	}
	if moves, err := parseReassignmentPlan([]byte(good), true); err != nil || moves[0].Replicas != nil {
		t.Fatalf("a cancel plan: %+v %v, want the replicas ignored", moves, err)
	}
	for _, tt := range []struct{ plan, want string }{
		{`{"version":1,"partitions":[]}`, "names no partition"},
		{`{"version":2,"partitions":[{"topic":"t","partition":0,"replicas":[1]}]}`, "only version 1"},
		{`{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[]}]}`, "no replicas given"},
		{`{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,2,1]}]}`, "distinct broker ids"},
		{`{"version":1,"partitions":[{"topic":"t","partition":-1,"replicas":[1]}]}`, "partition -1"},
		{`{"version":1,"partitions":[{"partition":0,"replicas":[1]}]}`, "without a topic"},
		{`{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1]},{"topic":"t","partition":0,"replicas":[2]}]}`, "names t-0 twice"},
		{`{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1],"log_dirs":["/data/a"]}]}`, "not supported"},
		{`{"version":1,"partitions":[{"topic":"t","partition":0,"replica":[1]}]}`, "not Kafka's reassignment JSON"},
		{`not json`, "not Kafka's reassignment JSON"},
	} {
		_, err := parseReassignmentPlan([]byte(tt.plan), false)
		if _, usage := errors.AsType[*usageError](err); !usage || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("plan %s: %v, want a usage error mentioning %q", tt.plan, err, tt.want)
		}
	}
}

// A partition's error says the code's name once and then the broker's message, not
// the code's generic description as well.
func TestErrorTextSaysItOnce(t *testing.T) {
	msg := "partition 0 is assigned to broker 5, which is not registered"
	if got, want := errorText(kerr.InvalidReplicaAssignment, msg), "INVALID_REPLICA_ASSIGNMENT: "+msg; got != want {
		t.Errorf("with a broker message: %q, want %q", got, want)
	}
	if got, want := errorText(kerr.InvalidReplicaAssignment, ""), kerr.InvalidReplicaAssignment.Error(); got != want {
		t.Errorf("without one: %q, want %q", got, want)
	}
}
