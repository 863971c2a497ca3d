package cli_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/samsa-streaming/samsa/internal/cli"
	"github.com/samsa-streaming/samsa/internal/testutil"
)

type groupDescription struct {
	Group   string `json:"group"`
	Type    string `json:"type"`
	State   string `json:"state"`
	Members []struct {
		MemberID    string `json:"member_id"`
		ClientID    string `json:"client_id"`
		Host        string `json:"host"`
		Protocol    string `json:"protocol"`
		Assignments []struct {
			Topic      string  `json:"topic"`
			Partitions []int32 `json:"partitions"`
		} `json:"assignments"`
	} `json:"members"`
	Partitions []struct {
		Topic           string `json:"topic"`
		Partition       int32  `json:"partition"`
		CommittedOffset *int64 `json:"committed_offset"`
		LogEndOffset    *int64 `json:"log_end_offset"`
		Lag             *int64 `json:"lag"`
	} `json:"partitions"`
	TotalLag int64 `json:"total_lag"`
	Configs  []struct {
		Name   string  `json:"name"`
		Value  *string `json:"value"`
		Source string  `json:"source"`
	} `json:"configs"`
}

// config returns the value and source of a config in the group's description.
func (d groupDescription) config(name string) (value, source string) {
	for _, c := range d.Configs {
		if c.Name == name && c.Value != nil {
			return *c.Value, c.Source
		}
	}
	return "", ""
}

func (d groupDescription) assigned() int {
	n := 0
	for _, m := range d.Members {
		for _, a := range m.Assignments {
			n += len(a.Partitions)
		}
	}
	return n
}

func describeGroup(t *testing.T, b *testutil.Broker, group string) groupDescription {
	t.Helper()
	var d groupDescription
	okJSON(t, b, &d, "group", "describe", group)
	return d
}

// groupIs reports whether the group exists and cond holds for it; for WaitFor.
func groupIs(t *testing.T, b *testutil.Broker, group string, cond func(groupDescription) bool) bool {
	t.Helper()
	res := run(t, b, "", "group", "describe", group, "-o", "json")
	var d groupDescription
	return res.code == cli.ExitOK && json.Unmarshal([]byte(res.stdout), &d) == nil && cond(d)
}

type resetPlan struct {
	Group    string `json:"group"`
	Executed bool   `json:"executed"`
	Plan     []struct {
		Topic         string `json:"topic"`
		Partition     int32  `json:"partition"`
		CurrentOffset *int64 `json:"current_offset"`
		NewOffset     int64  `json:"new_offset"`
	} `json:"plan"`
}

// produceEach writes n records to every partition of a topic.
func produceEach(t *testing.T, b *testutil.Broker, topic string, partitions, n int) {
	t.Helper()
	var lines strings.Builder
	for i := range n {
		fmt.Fprintf(&lines, "r%d\n", i)
	}
	for p := range partitions {
		ok(t, b, lines.String(), "produce", topic, "-p", fmt.Sprint(p))
	}
}

func TestGroupCommands(t *testing.T) {
	b := testutil.StartBroker(t, "group.initial.rebalance.delay.ms=0")
	ok(t, b, "", "topic", "create", "work", "-p", "3")
	before := time.Now().Add(-time.Minute)
	produceEach(t, b, "work", 3, 10)

	// Commit offset 0 everywhere first so that every partition has a lag to show.
	ok(t, b, "", "group", "reset-offsets", "billing", "--topic", "work", "--to", "earliest", "--execute")
	ok(t, b, "", "consume", "work", "--group", "billing", "--count", "12")
	d := describeGroup(t, b, "billing")
	var committed int64
	for _, p := range d.Partitions {
		if p.CommittedOffset != nil {
			committed += *p.CommittedOffset
		}
	}
	if d.State != "Empty" || committed != 12 || d.TotalLag != 18 {
		t.Fatalf("after consuming 12 of 30: state %s, committed %d, lag %d", d.State, committed, d.TotalLag)
	}
	var groups struct {
		Groups []struct {
			Group string `json:"group"`
		} `json:"groups"`
	}
	okJSON(t, b, &groups, "group", "list")
	if len(groups.Groups) != 1 || groups.Groups[0].Group != "billing" {
		t.Fatalf("group list: %+v", groups)
	}

	// Dry run changes nothing; --execute does.
	var plan resetPlan
	okJSON(t, b, &plan, "group", "reset-offsets", "billing", "--topic", "work", "--to", "earliest")
	if plan.Executed || len(plan.Plan) != 3 || plan.Plan[0].NewOffset != 0 {
		t.Fatalf("dry-run plan: %+v", plan)
	}
	if text := ok(t, b, "", "group", "reset-offsets", "billing", "--topic", "work", "--to", "earliest"); !strings.Contains(text, "dry run") {
		t.Fatalf("dry-run text: %q", text)
	}
	if d := describeGroup(t, b, "billing"); d.TotalLag != 18 {
		t.Fatalf("dry run changed the lag to %d", d.TotalLag)
	}
	for _, step := range []struct {
		to      string
		wantLag int64
	}{
		{"earliest", 30},
		{"latest", 0},
		{"shift:-2", 6},
		{"offset:7", 9},
		{fmt.Sprintf("timestamp:@%d", before.UnixMilli()), 30},
		{"timestamp:" + time.Now().Add(time.Hour).UTC().Format(time.RFC3339), 0},
	} {
		okJSON(t, b, &plan, "group", "reset-offsets", "billing", "--topic", "work", "--to", step.to, "--execute")
		if d := describeGroup(t, b, "billing"); !plan.Executed || d.TotalLag != step.wantLag {
			t.Fatalf("--to %s: executed %v, lag %d, want %d", step.to, plan.Executed, d.TotalLag, step.wantLag)
		}
	}

	// A running member blocks reset and delete; Ctrl-C commits what it printed.
	ok(t, b, "", "group", "reset-offsets", "billing", "--topic", "work", "--to", "offset:5", "--execute")
	cmd, lines, stderr := startConsume(t, b, "work", "--group", "billing")
	nextLines(t, lines, 15)
	testutil.WaitFor(t, 20*time.Second, func() bool {
		return groupIs(t, b, "billing", func(d groupDescription) bool { return d.State == "Stable" })
	}, "group stable")
	refused := run(t, b, "", "group", "reset-offsets", "billing", "--topic", "work", "--to", "earliest", "--execute")
	if refused.code != cli.ExitFailed || !strings.Contains(refused.stderr, "active member") {
		t.Fatalf("reset with an active member: exit %d, stderr %q", refused.code, refused.stderr)
	}
	refused = run(t, b, "", "group", "delete", "billing")
	if refused.code != cli.ExitFailed || !strings.Contains(refused.stderr, "stop its consumers") {
		t.Fatalf("delete with an active member: exit %d, stderr %q", refused.code, refused.stderr)
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("consume after SIGINT: %v\n%s", err, stderr.String())
	}
	if d := describeGroup(t, b, "billing"); d.TotalLag != 0 || len(d.Members) != 0 {
		t.Fatalf("after Ctrl-C: lag %d, members %d; want the printed records committed", d.TotalLag, len(d.Members))
	}

	ok(t, b, "", "group", "delete", "billing")
	gone := run(t, b, "", "group", "describe", "billing")
	if gone.code != cli.ExitFailed || !strings.Contains(gone.stderr, `group "billing" does not exist`) {
		t.Fatalf("describe deleted group: exit %d, stderr %q", gone.code, gone.stderr)
	}
}

func TestDoctorIdleConsumers(t *testing.T) {
	b := testutil.StartBroker(t, "group.initial.rebalance.delay.ms=0")
	ok(t, b, "", "topic", "create", "four", "-p", "3")
	for range 4 {
		cmd, _, _ := startConsume(t, b, "four", "--group", "crowd")
		t.Cleanup(func() {
			_ = cmd.Process.Signal(syscall.SIGINT)
			_ = cmd.Wait()
		})
	}
	testutil.WaitFor(t, 30*time.Second, func() bool {
		return groupIs(t, b, "crowd", func(d groupDescription) bool {
			return d.State == "Stable" && len(d.Members) == 4 && d.assigned() == 3
		})
	}, "4 stable members sharing 3 partitions")
	rep := doctor(t, b, cli.ExitFindings, "--group", "crowd", "--window", "1s")
	if got := rep.codes(); !slices.Equal(got, []string{"/crowd/idle_consumers"}) {
		t.Fatalf("findings %v, want only idle_consumers", got)
	}
	if n := rep.Findings[0].Numbers; n["members"] != 4 || n["partitions"] != 3 || n["idle_members"] != 1 {
		t.Fatalf("numbers %v", n)
	}
}

func TestDoctorLagSkew(t *testing.T) {
	b := testutil.StartBroker(t, "group.initial.rebalance.delay.ms=0")
	ok(t, b, "", "topic", "create", "skewed", "-p", "3")
	ok(t, b, "", "group", "reset-offsets", "slow", "--topic", "skewed", "--to", "earliest", "--execute")
	var hot, cold strings.Builder
	for i := range 300 {
		fmt.Fprintf(&hot, "hot-key:%d\n", i)
	}
	for i := range 10 {
		fmt.Fprintf(&cold, "%d\n", i)
	}
	ok(t, b, hot.String(), "produce", "skewed", "-K", ":")
	var acks []produced
	acks = jsonLines[produced](t, ok(t, b, "x\n", "produce", "skewed", "-k", "hot-key", "-o", "json"))
	hotPartition := acks[0].Partition
	for p := range int32(3) {
		if p != hotPartition {
			ok(t, b, cold.String(), "produce", "skewed", "-p", fmt.Sprint(p))
		}
	}
	rep := doctor(t, b, cli.ExitFindings, "--group", "slow", "--window", "0")
	if got := rep.codes(); !slices.Equal(got, []string{"skewed/slow/lag_skew"}) {
		t.Fatalf("findings %v, want only lag_skew", got)
	}
	n := rep.Findings[0].Numbers
	if n["partition"] != int64(hotPartition) || n["partition_lag"] != 301 || n["total_lag"] != 321 {
		out, _ := json.Marshal(rep)
		t.Fatalf("numbers %v\n%s", n, out)
	}
}
