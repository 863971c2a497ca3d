package conformance

import (
	"context"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// franzGoGroupTests are franz-go's own tests (github.com/twmb/franz-go/pkg/kgo, at the
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
var franzGoGroupTests = []string{
	"TestGroupSimple", "Test848RegexBrokerResolves", "TestGroupETL",
	"TestShareGroup", "TestShareGroupETL", "TestShareGroupAckOnClose", "TestShareGroupOffsetsAdmin",
	"TestConsumeRegexShareSkipsInternal",
}

// franzGoTxnTests are franz-go's own transactional tests:
//
//	TestTxnEtl  a transactional producer commits every 10,000 records
//	            (EndAndBeginTransaction, safe and unsafe) while chains of
//	            GroupTransactSession consumers (range, cooperative-sticky, static)
//	            read it read_committed, transform it, and see every record once and
//	            in order
var franzGoTxnTests = []string{"TestTxnEtl"}

// TestFranzGoOwnTests runs franz-go's KIP-848 and share group tests against a real
// samsa serve.
func TestFranzGoOwnTests(t *testing.T) {
	runFranzGoTests(t, franzGoGroupTests, 20000, // franz-go's default is 500,000: minutes on 2 cores
		"group.initial.rebalance.delay.ms=0",
		"group.consumer.min.heartbeat.interval.ms=100",
		"group.consumer.heartbeat.interval.ms=500",
		"group.share.min.heartbeat.interval.ms=1000", "group.share.heartbeat.interval.ms=1000",
		// TestShareGroupETL's releasing, bailing and killed consumers may hand a record
		// out several times; on this loaded 2-core machine it once saw a delivery
		// count of 5, Kafka's default limit, and two records never accepted (a record
		// released at the limit is archived, and the test waits for every one). Ten
		// is the largest limit Kafka allows.
		"group.share.delivery.count.limit=10",
	)
}

// TestFranzGoTransactionalTests runs franz-go's transactional tests against a real
// samsa serve: 30,000 records are three transactions of 10,000 and the last one.
func TestFranzGoTransactionalTests(t *testing.T) {
	runFranzGoTests(t, franzGoTxnTests, 30000, "group.initial.rebalance.delay.ms=0")
}

// runFranzGoTests runs the named tests of franz-go's kgo package, with records as
// KGO_TEST_RECORDS, against a samsa serve started with overrides. Every test must
// pass; a skip is a failure.
func runFranzGoTests(t *testing.T, tests []string, records int, overrides ...string) {
	if testing.Short() {
		t.Skip("runs franz-go's own test suite")
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go toolchain on PATH to run franz-go's tests")
	}
	tg := startTarget(t, overrides...)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, goTool, "test", "-count=1", "-v",
		"-run", "^("+strings.Join(tests, "|")+")$", "github.com/twmb/franz-go/pkg/kgo")
	cmd.Env = append(os.Environ(),
		"KGO_SEEDS="+tg.addr,
		"KGO_TEST_RF=1",
		"KGO_TEST_RECORDS="+strconv.Itoa(records),
		"KGO_LOG_LEVEL=none",
	)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("franz-go's tests failed: %v\n%s\nlast lines:\n%s", err, failureLines(string(out)), tail(string(out), 40))
	}
	for _, name := range tests {
		if !regexp.MustCompile(`(?m)^--- PASS: ` + name + ` `).Match(out) {
			t.Errorf("franz-go's %s did not pass:\n%s", name, tail(string(out), 80))
		}
	}
	if skipped := regexp.MustCompile(`(?m)^\s*--- SKIP: .*$`).FindAll(out, -1); len(skipped) > 0 {
		t.Errorf("franz-go's tests skipped: %s", skipped)
	}
	t.Logf("franz-go's tests:\n%s", strings.Join(regexp.MustCompile(`(?m)^\s*--- (PASS|FAIL).*$`).FindAllString(string(out), -1), "\n"))
}

// testMessage is a line a test logged (t.Log, t.Error): "name_test.go:123: …".
var testMessage = regexp.MustCompile(`^\w+_test\.go:\d+: `)

// failureLines picks what says why franz-go's tests failed out of their whole output:
// the FAIL lines and the tests' own messages (file:line), without the clean-up logs.
func failureLines(out string) string {
	var keep []string
	for _, line := range strings.Split(out, "\n") {
		trimmed := strings.TrimSpace(line)
		switch {
		case strings.Contains(trimmed, ": deleting "):
		case strings.HasPrefix(trimmed, "--- FAIL"), strings.HasPrefix(trimmed, "panic:"),
			testMessage.MatchString(trimmed):
			keep = append(keep, line)
		}
	}
	return strings.Join(keep, "\n")
}
