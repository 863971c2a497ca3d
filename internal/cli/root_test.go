package cli

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
)

// runRoot runs a fresh command tree in-process and returns its exit code and output.
func runRoot(t *testing.T, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	root := NewRoot()
	var out, errOut bytes.Buffer
	root.SetArgs(args)
	root.SetIn(strings.NewReader(stdin))
	root.SetOut(&out)
	root.SetErr(&errOut)
	code = Execute(root)
	return code, out.String(), errOut.String()
}

// closedPort returns an address nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

func TestUsageErrorsExitTwo(t *testing.T) {
	tests := []struct {
		args    []string
		wantErr string
	}{
		{[]string{"bogus"}, `unknown command "bogus" for "samsa"`},
		{[]string{"topci"}, `did you mean "topic"`},
		{[]string{"topic", "bogus"}, `unknown command "bogus" for "samsa topic"`},
		{[]string{"topic", "list", "--nope"}, "unknown flag: --nope"},
		{[]string{"topic", "describe"}, "accepts 1 arg(s)"},
		{[]string{"topic", "create", "t", "-p", "x"}, "invalid argument"},
		{[]string{"topic", "create", "t", "-p", "0"}, "-p must be positive (or -1 for the broker's default), not 0"},
		{[]string{"topic", "create", "t", "-r", "-3"}, "-r must be positive (or -1 for the broker's default), not -3"},
		{[]string{"consume", "t", "--count", "-2"}, "--count must not be negative, not -2"},
		{[]string{"topic", "create", "t", "-c", "novalue"}, "-c wants key=value"},
		{[]string{"topic", "alter-config", "t"}, "nothing to change"},
		{[]string{"topic", "alter-config", "t", "--set", "a=1", "--delete", "a"}, "both set and deleted"},
		{[]string{"topic", "add-partitions", "t"}, "--total N is required"},
		{[]string{"topic", "add-partitions", "t", "--total", "99999999999"}, "99999999999"},
		{[]string{"produce", "t", "--acks", "2"}, "--acks must be all, 1 or 0"},
		{[]string{"produce", "t", "--key", "k", "--key-separator", ":"}, "cannot be used together"},
		{[]string{"consume", "t", "--from", "yesterday"}, "--from wants"},
		{[]string{"consume", "t", "--format", "{{.Nope}}"}, "--format"},
		{[]string{"consume", "t", "--group", "g", "--partition", "1"}, "cannot be used with --group"},
		{[]string{"group", "reset-offsets", "g", "--to", "earliest"}, "--topic is required"},
		{[]string{"group", "reset-offsets", "g", "--topic", "t", "--to", "yesterday"}, "--to wants"},
		{[]string{"doctor", "--window", "-1s"}, "--window must not be negative, not -1s"},
		{[]string{"cluster", "elect-leaders"}, "give either --all or --topic"},
		{[]string{"cluster", "elect-leaders", "--all", "--topic", "t"}, "give either --all or --topic"},
		{[]string{"cluster", "reassign", "--topic", "t", "--partition", "0"}, "give --replicas"},
		{[]string{"cluster", "reassign", "--topic", "t", "--partition", "0", "--replicas", "1,1"}, "must be distinct broker ids"},
		{[]string{"cluster", "reassign", "--cancel", "--topic", "t", "--partition", "0", "--replicas", "1"}, "--cancel takes no --replicas"},
		{[]string{"cluster", "reassign", "--plan", "-", "--topic", "t"}, "give either --plan or"},
		{[]string{"cluster", "reassign", "--plan", "/nonexistent/plan.json"}, "read the reassignment plan"},
		{[]string{"topic", "list", "-o", "yaml"}, "--output must be text or json"},
		{[]string{"topic", "list", "-b", " , "}, "no brokers given"},
		{[]string{"topic", "list", "--timeout", "0s"}, "--timeout must be positive"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			code, _, stderr := runRoot(t, "", tt.args...)
			if code != ExitUsage {
				t.Fatalf("exit code %d, want %d; stderr:\n%s", code, ExitUsage, stderr)
			}
			if !strings.Contains(stderr, tt.wantErr) || !strings.Contains(stderr, "--help") {
				t.Fatalf("stderr %q does not contain %q and a pointer to --help", stderr, tt.wantErr)
			}
		})
	}
}

func TestHelpExitsZero(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {}, {"topic"}, {"consume", "--help"}, {"doctor", "-h"}} {
		code, stdout, stderr := runRoot(t, "", args...)
		if code != ExitOK || !strings.Contains(stdout, "Usage:") {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", args, code, stdout, stderr)
		}
	}
}

func TestEveryCommandHasExamples(t *testing.T) {
	root := NewRoot()
	for _, c := range root.Commands() {
		for _, sub := range append(c.Commands(), c) {
			if sub.Runnable() && sub.HasParent() && !sub.HasSubCommands() && sub.Example == "" {
				t.Errorf("%s has no examples in --help", sub.CommandPath())
			}
		}
	}
}

func TestUnreachableBrokerSaysWhatToDo(t *testing.T) {
	addr := closedPort(t)
	tests := []struct {
		name  string
		env   string
		args  []string
		stdin string
	}{
		{name: "flag", args: []string{"-b", addr, "topic", "list"}},
		{name: "env", env: addr, args: []string{"topic", "list"}},
		{name: "produce", env: addr, args: []string{"produce", "t"}, stdin: "x\n"},
		{name: "consume", env: addr, args: []string{"consume", "t"}},
		{name: "group", env: addr, args: []string{"group", "describe", "g"}},
		{name: "cluster", env: addr, args: []string{"cluster", "info", "-o", "json"}},
		{name: "doctor", env: addr, args: []string{"doctor", "--window", "0"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv(BrokersEnv, tt.env)
			code, stdout, stderr := runRoot(t, tt.stdin, tt.args...)
			if code != ExitFailed {
				t.Fatalf("exit code %d, want %d; stderr:\n%s", code, ExitFailed, stderr)
			}
			want := "cannot reach " + addr + ": is the broker running? set -b or SAMSA_BROKERS"
			if !strings.Contains(stderr, want) || stdout != "" {
				t.Fatalf("stdout %q, stderr %q; want stderr to contain %q", stdout, stderr, want)
			}
		})
	}
}

// silentBroker returns the address of a listener that accepts connections and
// never answers.
func silentBroker(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		var conns []net.Conn
		defer func() {
			for _, c := range conns {
				c.Close()
			}
		}()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c)
		}
	}()
	return l.Addr().String()
}

// A broker that accepts connections but does not answer is named, with the
// timeout, within --timeout (doctor's --window is for sampling, not for waiting).
func TestSilentBrokerNamedWithinTimeout(t *testing.T) {
	addr := silentBroker(t)
	for _, tt := range []struct {
		args  []string
		what  string
		stdin string
	}{
		{[]string{"topic", "list"}, "list topics", ""},
		{[]string{"produce", "t"}, "read metadata", "x\n"},
		{[]string{"doctor"}, "read metadata", ""},
	} {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			start := time.Now()
			code, stdout, stderr := runRoot(t, tt.stdin, append([]string{"-b", addr, "--timeout", "1s"}, tt.args...)...)
			took := time.Since(start)
			want := "Error: " + tt.what + ": no answer from the cluster at " + addr +
				" within 1s (raise --timeout, or check the broker's logs)\n"
			if code != ExitFailed || stdout != "" || stderr != want {
				t.Errorf("exit %d, stdout %q, stderr %q; want exit %d and %q", code, stdout, stderr, ExitFailed, want)
			}
			if took > 5*time.Second {
				t.Errorf("took %s with --timeout 1s", took)
			}
		})
	}
}

func TestBrokersDefaultAndEnvironment(t *testing.T) {
	t.Setenv(BrokersEnv, "")
	if got := NewRoot().PersistentFlags().Lookup("brokers").DefValue; got != DefaultBrokers {
		t.Fatalf("default brokers %q, want %q", got, DefaultBrokers)
	}
	t.Setenv(BrokersEnv, "a:1,b:2")
	root := NewRoot()
	if got := root.PersistentFlags().Lookup("brokers").DefValue; got != "a:1,b:2" {
		t.Fatalf("brokers from env %q", got)
	}
	g := &globals{brokers: " a:1, b:2 ,"}
	if got := g.seeds(); strings.Join(got, "|") != "a:1|b:2" {
		t.Fatalf("seeds = %q", got)
	}
}

func TestAddedCommandsIgnoreClientFlags(t *testing.T) {
	t.Setenv(BrokersEnv, " , ")
	root := NewRoot()
	ran := false
	root.AddCommand(&cobra.Command{Use: "serve", RunE: func(*cobra.Command, []string) error { ran = true; return nil }})
	root.SetArgs([]string{"serve"})
	root.SetOut(io.Discard)
	root.SetErr(io.Discard)
	if code := Execute(root); code != ExitOK || !ran {
		t.Fatalf("serve: exit %d, ran %v", code, ran)
	}
}

func TestExecuteMapsErrorsToExitCodes(t *testing.T) {
	for _, tt := range []struct {
		err  error
		code int
	}{
		{nil, ExitOK},
		{errors.New("boom"), ExitFailed},
		{usagef("bad flag"), ExitUsage},
		{fmt.Errorf("wrapped: %w", usagef("bad flag")), ExitUsage},
		{ErrFindings, ExitFindings},
	} {
		root := &cobra.Command{Use: "x", SilenceErrors: true, SilenceUsage: true, RunE: func(*cobra.Command, []string) error { return tt.err }}
		root.SetArgs(nil)
		var stderr bytes.Buffer
		root.SetErr(&stderr)
		if code := Execute(root); code != tt.code {
			t.Errorf("%v: exit %d, want %d", tt.err, code, tt.code)
		}
		if tt.err == ErrFindings && stderr.Len() != 0 {
			t.Errorf("findings printed an error: %q", stderr.String())
		}
	}
}
