package cli_test

import (
	"regexp"
	"strings"
	"testing"

	"github.com/samsa-streaming/samsa/internal/cli"
	"github.com/samsa-streaming/samsa/internal/testutil"
)

type brokerConfigs struct {
	Broker  *int32 `json:"broker"`
	Configs []struct {
		Name   string  `json:"name"`
		Value  *string `json:"value"`
		Source string  `json:"source"`
	} `json:"configs"`
}

// config is "value SOURCE" of the config named, "absent" when not listed.
func (d brokerConfigs) config(name string) string {
	for _, c := range d.Configs {
		if c.Name == name {
			v := "<nil>"
			if c.Value != nil {
				v = *c.Value
			}
			return v + " " + c.Source
		}
	}
	return "absent"
}

// TestClusterConfig: `cluster config set` alters the dynamic broker configs of the
// cluster-wide default and of one broker (IncrementalAlterConfigs on BROKER resources),
// `cluster config describe` lists those that apply with their sources (--all: every
// property, static and default ones too), --delete falls back to the cluster default
// and then the static value, a static-only property is refused with the broker's
// message once and exit code 1, and a missing or double target is a usage error.
func TestClusterConfig(t *testing.T) {
	b := testutil.StartBroker(t, "log.retention.hours=100")
	describe := func(args ...string) brokerConfigs {
		t.Helper()
		var d brokerConfigs
		okJSON(t, b, &d, append([]string{"cluster", "config", "describe"}, args...)...)
		return d
	}
	check := func(what, got, want string) {
		t.Helper()
		if got != want {
			t.Errorf("%s: got %q, want %q", what, got, want)
		}
	}

	if out := ok(t, b, "", "cluster", "config", "describe", "--default"); !strings.Contains(out, "no dynamic configs apply to the cluster-wide broker default") {
		t.Errorf("describe --default with none set:\n%s", out)
	}
	out := ok(t, b, "", "cluster", "config", "set", "--default", "--set", "log.retention.ms=3600000")
	check("set --default", out, "set log.retention.ms=3600000 on the cluster-wide broker default\n")
	check("the cluster default", describe("--default").config("log.retention.ms"), "3600000 DYNAMIC_DEFAULT_BROKER_CONFIG")
	text := ok(t, b, "", "cluster", "config", "describe", "--broker", "1")
	if !regexp.MustCompile(`(?m)^log\.retention\.ms\s+3600000\s+DYNAMIC_DEFAULT_BROKER_CONFIG\s*$`).MatchString(text) ||
		strings.Contains(text, "log.retention.hours") {
		t.Errorf("describe --broker 1 lists the cluster default that applies, and no static property:\n%s", text)
	}

	// Broker 1's own value wins over the cluster default.
	var altered struct {
		Broker *int32            `json:"broker"`
		Set    map[string]string `json:"set"`
	}
	okJSON(t, b, &altered, "cluster", "config", "set", "--broker", "1", "--set", "log.retention.ms=7200000", "--set", "message.max.bytes=2097152")
	if altered.Broker == nil || *altered.Broker != 1 || altered.Set["message.max.bytes"] != "2097152" {
		t.Errorf("set --broker 1 -o json: %+v", altered)
	}
	d := describe("--broker", "1")
	check("broker 1's override", d.config("log.retention.ms"), "7200000 DYNAMIC_BROKER_CONFIG")
	check("broker 1's message.max.bytes", d.config("message.max.bytes"), "2097152 DYNAMIC_BROKER_CONFIG")
	if d.Broker == nil || *d.Broker != 1 || len(d.Configs) != 2 {
		t.Errorf("describe --broker 1 lists its 2 dynamic configs: %+v", d)
	}
	all := describe("--broker", "1", "--all")
	check("--all: a static property", all.config("log.retention.hours"), "100 STATIC_BROKER_CONFIG")
	check("--all: a default", all.config("num.partitions"), "1 DEFAULT_CONFIG")
	check("--all: a dynamic one", all.config("log.retention.ms"), "7200000 DYNAMIC_BROKER_CONFIG")

	// Removing broker 1's value falls back to the cluster default, then to the static one.
	out = ok(t, b, "", "cluster", "config", "set", "--broker", "1", "--delete", "log.retention.ms")
	check("delete on broker 1", out, "removed log.retention.ms from broker 1 (the default applies)\n")
	check("after the broker's delete", describe("--broker", "1").config("log.retention.ms"), "3600000 DYNAMIC_DEFAULT_BROKER_CONFIG")
	ok(t, b, "", "cluster", "config", "set", "--default", "--delete", "log.retention.ms")
	check("after the default's delete", describe("--broker", "1").config("log.retention.ms"), "absent")
	check("the cluster default after its delete", describe("--default").config("log.retention.ms"), "absent")

	// A static-only property: the broker's refusal, said once.
	res := run(t, b, "", "cluster", "config", "set", "--default", "--set", "listeners=PLAINTEXT://:9999")
	if res.code != cli.ExitFailed || !strings.Contains(res.stderr, "INVALID_REQUEST") ||
		strings.Count(res.stderr, "listeners") != 1 || strings.Count(res.stderr, "\n") != 1 {
		t.Errorf("set listeners: exit %d, stderr %q; want exit %d, one line naming INVALID_REQUEST and listeners once", res.code, res.stderr, cli.ExitFailed)
	}

	// A broker that is not in the cluster.
	for _, args := range [][]string{
		{"describe", "--broker", "5"},
		{"set", "--broker", "5", "--set", "log.retention.ms=1"},
	} {
		res := run(t, b, "", append([]string{"cluster", "config"}, args...)...)
		if res.code != cli.ExitFailed || !strings.Contains(res.stderr, "broker 5 is not in the cluster; `samsa cluster info` lists the brokers") {
			t.Errorf("cluster config %v: exit %d, stderr %q", args, res.code, res.stderr)
		}
	}

	for _, args := range [][]string{
		{"describe"},
		{"describe", "--default", "--broker", "1"},
		{"set", "--set", "log.retention.ms=1"},
		{"set", "--default", "--broker", "1", "--set", "log.retention.ms=1"},
		{"set", "--broker", "-1", "--set", "log.retention.ms=1"},
		{"set", "--default"},
		{"set", "--default", "--set", "log.retention.ms"},
	} {
		if res := run(t, b, "", append([]string{"cluster", "config"}, args...)...); res.code != cli.ExitUsage {
			t.Errorf("cluster config %v: exit %d, want %d; stderr %q", args, res.code, cli.ExitUsage, res.stderr)
		}
	}
}
