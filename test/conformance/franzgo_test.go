package conformance

import (
	"bytes"
	"context"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/samsa-streaming/samsa/internal/testutil"
)

// franzGoTxnTests are franz-go's own transactional tests (package kgo): they read
// KGO_SEEDS and run against any broker. TestTxnEtl produces with a transactional
// producer, committing every 10 000 records (EndAndBeginTransaction, safe and
// unsafe), while chains of GroupTransactSession consumers (range, cooperative-sticky,
// static members) read it read_committed, transform it and check that every record
// arrives exactly once and in order.
const franzGoTxnTests = "^TestTxnEtl$"

// TestFranzGoTransactionalTests runs franz-go's transactional tests (from the module
// in use, copied out of the module cache) against a Samsa broker.
func TestFranzGoTransactionalTests(t *testing.T) {
	if testing.Short() {
		t.Skip("runs franz-go's own test suite")
	}
	src := moduleDir(t, "github.com/twmb/franz-go")
	work := filepath.Join(t.TempDir(), "franz-go")
	if err := copyTree(src, work); err != nil {
		t.Fatal(err)
	}
	tg := startTarget(t, "group.initial.rebalance.delay.ms=0")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "test", "-count=1", "-run", franzGoTxnTests, "./pkg/kgo")
	cmd.Dir = work
	cmd.Env = append(os.Environ(),
		"KGO_SEEDS="+tg.addr,
		"KGO_TEST_RF=1",          // one broker
		"KGO_TEST_RECORDS=30000", // three transactions of 10 000 and the last one
		"KGO_LOG_LEVEL=none",
		"GOFLAGS=-mod=mod",
	)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("franz-go %s against Samsa: %v\n%s", franzGoTxnTests, err, tail(out.String(), 80))
	}
	t.Logf("franz-go %s: %s", franzGoTxnTests, lastLine(out.String()))
}

// moduleDir returns the directory of a module this repository requires.
func moduleDir(t *testing.T, module string) string {
	t.Helper()
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", module)
	cmd.Dir = testutil.RepoRoot()
	out, err := cmd.Output()
	if err != nil || strings.TrimSpace(string(out)) == "" {
		t.Fatalf("go list -m %s: %v", module, err)
	}
	return strings.TrimSpace(string(out))
}

// copyTree copies a read-only module directory into a writable one (go test writes
// go.sum entries there).
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(target, data, 0o644)
	})
}
