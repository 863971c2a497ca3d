package conformance

import (
	"context"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"
)

// franzGoTests are franz-go's own tests (github.com/twmb/franz-go/pkg/kgo, at the
// version go.mod pins) that exercise the KIP-848 consumer protocol and share groups
// against an external broker (they read KGO_SEEDS). Each skips itself when the broker
// does not advertise what it needs, so a skip here is a failure.
//
//	TestGroupSimple             a classic and a KIP-848 group consume and commit
//	Test848RegexBrokerResolves  the broker resolves a regex subscription
//	TestGroupETL                chained groups (classic, cooperative, static, and
//	                            range/sticky/static on KIP-848) never read a record
//	                            twice and read every record
//	TestShareGroup              a share consumer reads and acknowledges
//	TestShareGroupETL           chained share groups with accept, release, reject,
//	                            members added and killed
//	TestShareGroupAckOnClose    acknowledgements sent when the consumer closes
//	TestShareGroupOffsetsAdmin  Alter/Describe/DeleteShareGroupOffsets
//	TestConsumeRegexShareSkipsInternal  a share consumer's regex subscription
var franzGoTests = []string{
	"TestGroupSimple", "Test848RegexBrokerResolves", "TestGroupETL",
	"TestShareGroup", "TestShareGroupETL", "TestShareGroupAckOnClose", "TestShareGroupOffsetsAdmin",
	"TestConsumeRegexShareSkipsInternal",
}

// TestFranzGoOwnTests runs franz-go's KIP-848 and share group tests against a real
// samsa serve.
func TestFranzGoOwnTests(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go toolchain on PATH to run franz-go's tests")
	}
	tg := startTarget(t,
		"group.initial.rebalance.delay.ms=0",
		"group.consumer.min.heartbeat.interval.ms=100",
		"group.consumer.heartbeat.interval.ms=500",
		"group.share.heartbeat.interval.ms=1000",
	)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, goTool, "test", "-count=1", "-v",
		"-run", "^("+strings.Join(franzGoTests, "|")+")$", "github.com/twmb/franz-go/pkg/kgo")
	cmd.Env = append(os.Environ(),
		"KGO_SEEDS="+tg.addr,
		"KGO_TEST_RF=1",
		"KGO_TEST_RECORDS=20000", // franz-go's default is 500,000: minutes on 2 cores
		"KGO_LOG_LEVEL=none",
	)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("franz-go's tests failed: %v\n%s", err, tail(string(out), 80))
	}
	// Every test must have run, none skipped.
	for _, name := range franzGoTests {
		if !regexp.MustCompile(`(?m)^--- PASS: ` + name + ` `).Match(out) {
			t.Errorf("franz-go's %s did not pass:\n%s", name, tail(string(out), 80))
		}
	}
	if skipped := regexp.MustCompile(`(?m)^\s*--- SKIP: .*$`).FindAll(out, -1); len(skipped) > 0 {
		t.Errorf("franz-go's tests skipped: %s", skipped)
	}
	t.Logf("franz-go's tests:\n%s", strings.Join(regexp.MustCompile(`(?m)^\s*--- (PASS|FAIL).*$`).FindAllString(string(out), -1), "\n"))
}
