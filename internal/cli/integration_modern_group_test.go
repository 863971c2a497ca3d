package cli_test

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/samsa-streaming/samsa/internal/cli"
	"github.com/samsa-streaming/samsa/internal/testutil"
)

// TestGroupCommandsModernGroups: `group list` and `group describe` show KIP-848
// consumer groups and share groups, with their type, members, assignments and lag.
func TestGroupCommandsModernGroups(t *testing.T) {
	b := testutil.StartBroker(t,
		"group.consumer.min.session.timeout.ms=500", "group.consumer.session.timeout.ms=3000",
		"group.consumer.min.heartbeat.interval.ms=50", "group.consumer.heartbeat.interval.ms=200",
		"group.share.min.heartbeat.interval.ms=1000", "group.share.heartbeat.interval.ms=1000")
	ok(t, b, "", "topic", "create", "modern", "-p", "2")
	produceEach(t, b, "modern", 2, 10)

	// A KIP-848 member reads everything and commits.
	cg, err := kgo.NewClient(kgo.SeedBrokers(b.Addr), kgo.ConsumerGroup("m848"), kgo.ServerSideBalancer(),
		kgo.ConsumeTopics("modern"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit())
	if err != nil {
		t.Fatal(err)
	}
	defer cg.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for n := 0; n < 20; {
		fs := cg.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatal("the KIP-848 member did not read 20 records")
		}
		n += len(fs.Records())
	}
	if err := cg.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 20*time.Second, func() bool {
		return groupIs(t, b, "m848", func(d groupDescription) bool {
			return d.Type == "consumer" && d.State == "Stable" && len(d.Members) == 1 && d.assigned() == 2 && d.TotalLag == 0 && len(d.Partitions) == 2
		})
	}, "the consumer group described with its member and no lag")

	// A share group reads everything and accepts it: from the start, as `group
	// alter-config` tells it before it exists (its default is the log end).
	ok(t, b, "", "group", "alter-config", "shared", "--set", "share.auto.offset.reset=earliest")
	sc, err := kgo.NewClient(kgo.SeedBrokers(b.Addr), kgo.ShareGroup("shared"), kgo.ConsumeTopics("modern"))
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	for n := 0; n < 20; {
		fs := sc.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatal("the share consumer did not read 20 records")
		}
		fs.EachRecord(func(r *kgo.Record) { r.Ack(kgo.AckAccept) })
		n += len(fs.Records())
	}
	if err := sc.FlushAcks(ctx); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 20*time.Second, func() bool {
		return groupIs(t, b, "shared", func(d groupDescription) bool {
			committed := int64(0)
			for _, p := range d.Partitions {
				if p.CommittedOffset != nil {
					committed += *p.CommittedOffset
				}
			}
			return d.Type == "share" && len(d.Members) == 1 && d.TotalLag == 0 && committed == 20
		})
	}, "the share group described with its start offsets and no lag")

	var groups struct {
		Groups []struct {
			Group string `json:"group"`
			Type  string `json:"type"`
		} `json:"groups"`
	}
	okJSON(t, b, &groups, "group", "list")
	types := map[string]string{}
	for _, g := range groups.Groups {
		types[g.Group] = g.Type
	}
	if types["m848"] != "consumer" || types["shared"] != "share" {
		t.Fatalf("group list types: %v", types)
	}
}

// TestGroupAlterConfig: `group alter-config` sets and removes a group's own configs
// (GROUP resources), `group describe` shows them, and a value outside the broker's
// bounds or a name that is not a group config is refused with the broker's reason.
func TestGroupAlterConfig(t *testing.T) {
	b := testutil.StartBroker(t,
		"group.consumer.min.session.timeout.ms=500", "group.consumer.session.timeout.ms=3000",
		"group.consumer.min.heartbeat.interval.ms=50", "group.consumer.heartbeat.interval.ms=200")
	ok(t, b, "", "topic", "create", "cfg", "-p", "1")
	cg, err := kgo.NewClient(kgo.SeedBrokers(b.Addr), kgo.ConsumerGroup("tuned"), kgo.ServerSideBalancer(), kgo.ConsumeTopics("cfg"))
	if err != nil {
		t.Fatal(err)
	}
	defer cg.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	go cg.PollFetches(ctx) // joins the group
	testutil.WaitFor(t, 20*time.Second, func() bool {
		return groupIs(t, b, "tuned", func(d groupDescription) bool { return d.Type == "consumer" && len(d.Members) == 1 })
	}, "the KIP-848 member in the group")

	out := ok(t, b, "", "group", "alter-config", "tuned", "--set", "consumer.session.timeout.ms=2000", "--set", "consumer.heartbeat.interval.ms=100")
	if !strings.Contains(out, `set consumer.session.timeout.ms=2000 on group "tuned"`) {
		t.Errorf("alter-config said %q", out)
	}
	d := describeGroup(t, b, "tuned")
	if v, src := d.config("consumer.session.timeout.ms"); v != "2000" || src != "DYNAMIC_GROUP_CONFIG" {
		t.Errorf("consumer.session.timeout.ms described as %q from %q, want 2000 from DYNAMIC_GROUP_CONFIG", v, src)
	}
	if v, src := d.config("consumer.heartbeat.interval.ms"); v != "100" || src != "DYNAMIC_GROUP_CONFIG" {
		t.Errorf("consumer.heartbeat.interval.ms described as %q from %q", v, src)
	}
	text := ok(t, b, "", "group", "describe", "tuned")
	if !regexp.MustCompile(`(?m)^consumer\.session\.timeout\.ms\s+2000\s+DYNAMIC_GROUP_CONFIG\s*$`).MatchString(text) ||
		strings.Contains(text, "share.auto.offset.reset") {
		t.Errorf("group describe lists the group's own configs only, as a table; got:\n%s", text)
	}
	if all := ok(t, b, "", "group", "describe", "tuned", "--all-configs"); !strings.Contains(all, "share.auto.offset.reset") {
		t.Errorf("group describe --all-configs lacks the defaults:\n%s", all)
	}

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--set", "consumer.session.timeout.ms=100"}, "consumer.session.timeout.ms=100"},
		{[]string{"--set", "retention.ms=1000"}, "retention.ms is not a group config"},
		{[]string{"--set", "consumer.heartbeat.interval.ms=5000"}, "consumer.heartbeat.interval.ms"},
	} {
		res := run(t, b, "", append([]string{"group", "alter-config", "tuned"}, c.args...)...)
		if res.code != cli.ExitFailed || !strings.Contains(res.stderr, "INVALID_CONFIG") || !strings.Contains(res.stderr, c.want) {
			t.Errorf("alter-config %v: exit %d, stderr %q; want exit %d naming INVALID_CONFIG and %q", c.args, res.code, res.stderr, cli.ExitFailed, c.want)
		}
	}
	if v, _ := describeGroup(t, b, "tuned").config("consumer.session.timeout.ms"); v != "2000" {
		t.Errorf("a refused change altered the config: %q", v)
	}

	ok(t, b, "", "group", "alter-config", "tuned", "--delete", "consumer.session.timeout.ms", "--delete", "consumer.heartbeat.interval.ms")
	d = describeGroup(t, b, "tuned")
	if v, src := d.config("consumer.session.timeout.ms"); v != "3000" || src == "DYNAMIC_GROUP_CONFIG" {
		t.Errorf("after --delete: %q from %q, want the broker's 3000", v, src)
	}
	if text := ok(t, b, "", "group", "describe", "tuned"); !strings.Contains(text, "Configs: all defaults") {
		t.Errorf("group describe with no group configs:\n%s", text)
	}
}

// TestGroupDescribeMigratingGroup: `group describe` of a consumer group that a
// classic member is part of (a group being migrated) says which protocol each member
// speaks.
func TestGroupDescribeMigratingGroup(t *testing.T) {
	b := testutil.StartBroker(t, "group.initial.rebalance.delay.ms=0",
		"group.consumer.min.session.timeout.ms=500", "group.consumer.session.timeout.ms=3000",
		"group.consumer.min.heartbeat.interval.ms=50", "group.consumer.heartbeat.interval.ms=200")
	ok(t, b, "", "topic", "create", "migrating", "-p", "4")
	consume := func(opts ...kgo.Opt) *kgo.Client {
		cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(b.Addr), kgo.ConsumerGroup("mixed"), kgo.ConsumeTopics("migrating"),
			kgo.HeartbeatInterval(100 * time.Millisecond)}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		go func() {
			for !cl.PollFetches(context.Background()).IsClientClosed() {
			}
		}()
		return cl
	}
	classic := consume()
	testutil.WaitFor(t, 20*time.Second, func() bool {
		return groupIs(t, b, "mixed", func(d groupDescription) bool { return d.Type == "classic" && d.State == "Stable" })
	}, "the classic group to be stable")
	modern := consume(kgo.ServerSideBalancer())
	var d groupDescription
	testutil.WaitFor(t, 20*time.Second, func() bool {
		return groupIs(t, b, "mixed", func(got groupDescription) bool {
			d = got
			return got.Type == "consumer" && got.State == "Stable" && len(got.Members) == 2 && got.assigned() == 4
		})
	}, "the group to be a stable consumer group of two members")
	want := map[string]string{}
	for cl, protocol := range map[*kgo.Client]string{classic: "classic", modern: "consumer"} {
		id, _ := cl.GroupMetadata()
		want[id] = protocol
	}
	for _, m := range d.Members {
		if want[m.MemberID] != m.Protocol {
			t.Fatalf("member %s: protocol %q, want %q (%v)", m.MemberID, m.Protocol, want[m.MemberID], want)
		}
	}
	out := ok(t, b, "", "group", "describe", "mixed")
	if !regexp.MustCompile(`(?m)^MEMBER-ID\s+PROTOCOL\s+CLIENT-ID`).MatchString(out) || !strings.Contains(out, " classic ") {
		t.Fatalf("group describe of a migrating group does not show the members' protocols:\n%s", out)
	}
}
