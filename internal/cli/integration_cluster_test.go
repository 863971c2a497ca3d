package cli_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/samsa-streaming/samsa/internal/cli"
	"github.com/samsa-streaming/samsa/internal/testutil"
)

// clusterTopic is the part of `topic describe -o json` the cluster commands change.
type clusterTopic struct {
	OfflinePartitions         []int32 `json:"offline_partitions"`
	UnderReplicatedPartitions []int32 `json:"under_replicated_partitions"`
	UnderMinISRPartitions     []int32 `json:"under_min_isr_partitions"`
	Partitions                []struct {
		Partition       int32   `json:"partition"`
		Leader          int32   `json:"leader"`
		Replicas        []int32 `json:"replicas"`
		ISR             []int32 `json:"isr"`
		OfflineReplicas []int32 `json:"offline_replicas"`
		LogEndOffset    *int64  `json:"log_end_offset"`
	} `json:"partitions"`
}

func sortedIDs(ids []int32) []int32 {
	out := slices.Clone(ids)
	slices.Sort(out)
	return out
}

// TestClusterCommands runs the replication commands against three real nodes, two
// of them in rack-a and one in rack-b: a partition with records moves to other
// brokers with `cluster reassign --wait` (its records come along), a preferred
// election gives it to its first replica, doctor reports a topic with one copy and
// a partition whose copies share a rack, and `topic describe` and doctor report the
// offline, under-replicated and under-min-ISR partitions a dead broker leaves.
func TestClusterCommands(t *testing.T) {
	t.Parallel()
	c := testutil.StartCluster(t, testutil.ClusterOptions{
		Overrides:     []string{"replica.lag.time.max.ms=3000", "replica.fetch.backoff.ms=200"},
		NodeOverrides: map[int32][]string{1: {"broker.rack=rack-a"}, 2: {"broker.rack=rack-a"}, 3: {"broker.rack=rack-b"}},
	})
	seed := c.Node(1).Broker
	ok(t, seed, "", "topic", "create", "solo", "-p", "1", "-r", "1")
	ok(t, seed, "", "topic", "create", "trio", "-p", "2", "-r", "3", "-c", "min.insync.replicas=3")
	lines := make([]string, 200)
	for i := range lines {
		lines[i] = fmt.Sprintf("record-%03d", i)
	}
	ok(t, seed, strings.Join(lines, "\n")+"\n", "produce", "solo", "--acks", "all")

	var solo clusterTopic
	okJSON(t, seed, &solo, "topic", "describe", "solo")
	from := solo.Partitions[0].Replicas[0]
	end := *solo.Partitions[0].LogEndOffset
	// The new replicas: both rack-a brokers, the one not holding it first.
	to := []int32{1, 2}
	if from == 1 {
		to = []int32{2, 1}
	}
	out := ok(t, seed, "", "cluster", "reassign", "--topic", "solo", "--partition", "0", "--replicas", fmt.Sprintf("%d,%d", to[0], to[1]), "--wait")
	if !strings.Contains(out, fmt.Sprintf("solo-0: moving from %d to %d,%d", from, to[0], to[1])) || !strings.Contains(out, "solo-0: done, on") {
		t.Fatalf("reassign --wait output:\n%s", out)
	}
	okJSON(t, seed, &solo, "topic", "describe", "solo")
	p := solo.Partitions[0]
	if !slices.Equal(sortedIDs(p.Replicas), []int32{1, 2}) || !slices.Equal(sortedIDs(p.ISR), []int32{1, 2}) || p.LogEndOffset == nil || *p.LogEndOffset != end {
		t.Fatalf("solo-0 after the move: %+v, want replicas and ISR 1,2 and log end %d", p, end)
	}
	records := jsonLines[consumed](t, ok(t, seed, "", "consume", "solo", "--from", "beginning", "--count", "200", "-o", "json"))
	if len(records) != 200 || *records[0].Value != "record-000" || *records[199].Value != "record-199" {
		t.Fatalf("solo after the move: %d records", len(records))
	}
	var listed struct {
		Reassignments []json.RawMessage `json:"reassignments"`
	}
	okJSON(t, seed, &listed, "cluster", "reassignments")
	if len(listed.Reassignments) != 0 {
		t.Fatalf("reassignments after the move: %s", listed.Reassignments)
	}

	// A move that only drops replicas finishes at once on the controller; --wait
	// reports it done however far the broker it asks lags (each partition through
	// another node).
	ok(t, seed, "", "topic", "create", "shrink", "-p", "3", "-r", "3")
	for p := range 3 {
		node := c.Node(int32(p + 1)).Broker
		out := ok(t, node, "", "cluster", "reassign", "--topic", "shrink", "--partition", strconv.Itoa(p), "--replicas", "1,3", "--wait")
		if want := fmt.Sprintf("shrink-%d: done, on ", p); !strings.Contains(out, want) {
			t.Fatalf("shrinking reassign --wait through node %d output:\n%s", p+1, out)
		}
	}
	ok(t, seed, "", "topic", "delete", "shrink")

	var election struct {
		Partitions []struct {
			Topic     string `json:"topic"`
			Partition int32  `json:"partition"`
			Result    string `json:"result"`
			Leader    int32  `json:"leader"`
		} `json:"partitions"`
	}
	okJSON(t, seed, &election, "cluster", "elect-leaders", "--topic", "solo")
	if len(election.Partitions) != 1 || election.Partitions[0].Result == "failed" {
		t.Fatalf("preferred election: %+v", election)
	}
	testutil.WaitFor(t, 10*time.Second, func() bool {
		okJSON(t, seed, &solo, "topic", "describe", "solo")
		return solo.Partitions[0].Leader == to[0]
	}, fmt.Sprintf("solo-0 led by its preferred replica %d", to[0]))
	okJSON(t, seed, &election, "cluster", "elect-leaders", "--topic", "solo")
	if election.Partitions[0].Result != "not_needed" {
		t.Fatalf("a second preferred election: %+v, want not_needed", election)
	}

	ok(t, seed, "", "topic", "create", "lonely", "-p", "1", "-r", "1")
	rep := doctor(t, seed, cli.ExitFindings, "--window", "0")
	want := []string{"lonely//replication_factor_one", "solo//replicas_in_one_rack", "trio//min_isr_equals_replication_factor"}
	if !slices.Equal(rep.codes(), want) {
		t.Fatalf("doctor findings %v, want %v", rep.codes(), want)
	}

	// A dead broker: what it alone held is offline, the rest under-replicated and
	// (min.insync.replicas=3) under min ISR.
	var lonely clusterTopic
	okJSON(t, seed, &lonely, "topic", "describe", "lonely")
	dead := lonely.Partitions[0].Replicas[0]
	c.Node(dead).Kill()
	alive := c.Node(dead%3 + 1).Broker
	testutil.WaitFor(t, 30*time.Second, func() bool {
		okJSON(t, alive, &lonely, "topic", "describe", "lonely")
		return len(lonely.OfflinePartitions) == 1
	}, fmt.Sprintf("lonely-0 offline once broker %d is fenced", dead))
	if p := lonely.Partitions[0]; p.Leader != -1 || !slices.Equal(p.OfflineReplicas, []int32{dead}) {
		t.Fatalf("lonely-0 with its only broker dead: %+v", p)
	}
	var trio clusterTopic
	testutil.WaitFor(t, 30*time.Second, func() bool {
		okJSON(t, alive, &trio, "topic", "describe", "trio")
		return len(trio.UnderReplicatedPartitions) == 2
	}, fmt.Sprintf("trio under-replicated without broker %d", dead))
	if !slices.Equal(trio.UnderMinISRPartitions, []int32{0, 1}) || !slices.Contains(trio.Partitions[0].OfflineReplicas, dead) {
		t.Fatalf("trio without broker %d: %+v", dead, trio)
	}
	text := ok(t, alive, "", "topic", "describe", "lonely")
	if !strings.Contains(text, "Offline:") || !strings.Contains(text, "OFFLINE") {
		t.Fatalf("topic describe text of an offline partition:\n%s", text)
	}
	rep = doctor(t, alive, cli.ExitFindings, "--window", "0", "--topic", "trio")
	if codes := rep.codes(); !slices.Contains(codes, "trio//under_min_isr") || !slices.Contains(codes, "trio//under_replicated") {
		t.Fatalf("doctor on trio without broker %d: %v", dead, codes)
	}
	rep = doctor(t, alive, cli.ExitFindings, "--window", "0", "--topic", "lonely")
	if codes := rep.codes(); !slices.Contains(codes, "lonely//offline_partitions") {
		t.Fatalf("doctor on lonely without broker %d: %v", dead, codes)
	}
}
