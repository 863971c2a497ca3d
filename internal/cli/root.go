package cli

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

// Exit codes scripts can rely on. They are documented in docs/cli.md.
const (
	ExitOK       = 0 // the command did what was asked
	ExitFailed   = 1 // the operation failed (cluster unreachable, broker refused, ...)
	ExitUsage    = 2 // the command line is wrong (unknown flag, bad value, missing argument)
	ExitFindings = 3 // doctor found at least one problem
)

// DefaultBrokers is where client commands connect when neither -b nor SAMSA_BROKERS
// says otherwise: the address `samsa serve` listens on by default.
const DefaultBrokers = "127.0.0.1:9092"

// BrokersEnv names the environment variable that overrides DefaultBrokers.
const BrokersEnv = "SAMSA_BROKERS"

// ErrFindings is returned by doctor after it has printed its findings; Execute turns
// it into ExitFindings without printing anything more.
var ErrFindings = errors.New("doctor found problems")

// ErrUsage is what errors of commands added by the caller (bench) match with
// errors.Is when the command line is wrong: Execute exits with ExitUsage for them.
var ErrUsage = errors.New("usage error")

// usageError marks an error as the user's command line being wrong (exit code 2).
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

func usagef(format string, args ...any) error {
	return &usageError{err: fmt.Errorf(format, args...)}
}

// globals holds the flags every client command shares.
type globals struct {
	brokers string
	output  string
	timeout time.Duration
	sec     ClientSecurity
}

const (
	outputText = "text"
	outputJSON = "json"
)

func (g *globals) validate() error {
	switch g.output {
	case outputText, outputJSON:
	default:
		return usagef("--output must be text or json, not %q", g.output)
	}
	if len(g.seeds()) == 0 {
		return usagef("no brokers given: set -b host:port[,host:port...] or %s", BrokersEnv)
	}
	if g.timeout <= 0 {
		return usagef("--timeout must be positive, not %s", g.timeout)
	}
	return nil
}

// seeds returns the broker addresses from --brokers, split on commas.
func (g *globals) seeds() []string {
	var out []string
	for s := range strings.SplitSeq(g.brokers, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// NewRoot returns the root `samsa` command with every client subcommand attached.
// The caller may add more commands (serve) before running it with Execute.
func NewRoot() *cobra.Command {
	g := &globals{}
	root := &cobra.Command{
		Use:   "samsa",
		Short: "Samsa: a Kafka-compatible event streaming platform",
		Long: `samsa runs a Samsa node (samsa serve) and is a client for Samsa or any
Kafka-compatible cluster: manage topics and consumer groups, produce and consume
records, and diagnose common operational problems.

Exit codes: 0 success, 1 the operation failed, 2 usage error, 3 doctor found problems.`,
		Example: `  samsa topic create orders -p 3 -r 1
  printf 'hello\nworld\n' | samsa produce orders
  samsa consume orders --from beginning --count 2
  samsa group describe billing
  samsa doctor --group billing
  SAMSA_BROKERS=kafka-1:9092,kafka-2:9092 samsa cluster info -o json`,
		SilenceErrors: true,
		SilenceUsage:  true,
		Args:          unknownSubcommand,
		RunE:          helpOrUnknown,
	}
	brokers := DefaultBrokers
	if env := strings.TrimSpace(os.Getenv(BrokersEnv)); env != "" {
		brokers = env
	}
	pf := root.PersistentFlags()
	pf.StringVarP(&g.brokers, "brokers", "b", brokers,
		"comma-separated bootstrap brokers host:port (env "+BrokersEnv+")")
	pf.StringVarP(&g.output, "output", "o", outputText, "output format: text or json")
	pf.DurationVar(&g.timeout, "timeout", 10*time.Second,
		"how long to wait for the cluster before giving up")
	g.sec.AddFlags(pf)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &usageError{err: err} })
	for _, cmd := range []*cobra.Command{
		newTopicCmd(g),
		newProduceCmd(g),
		newConsumeCmd(g),
		newGroupCmd(g),
		newTransactionsCmd(g),
		newClusterCmd(g),
		newDoctorCmd(g),
		newACLCmd(g),
		newUserCmd(g),
		newTokenCmd(g),
		newQuotaCmd(g),
	} {
		// Validated per client command, so that commands added by the caller (serve)
		// do not depend on SAMSA_BROKERS or the client flags.
		cmd.PersistentPreRunE = func(*cobra.Command, []string) error { return g.validate() }
		root.AddCommand(cmd)
	}
	return root
}

// Execute runs root and returns the process exit code. It prints the error, if any,
// to root's error stream; usage errors also point at --help.
func Execute(root *cobra.Command) int {
	cmd, err := root.ExecuteC()
	if err == nil {
		return ExitOK
	}
	if errors.Is(err, ErrFindings) {
		return ExitFindings
	}
	stderr := root.ErrOrStderr()
	if ue, ok := errors.AsType[*usageError](err); ok || errors.Is(err, ErrUsage) {
		msg := error(ue)
		if !ok {
			msg = err
		}
		fmt.Fprintf(stderr, "Error: %v\nRun '%s --help' for usage.\n", msg, cmd.CommandPath())
		return ExitUsage
	}
	fmt.Fprintf(stderr, "Error: %v\n", err)
	return ExitFailed
}

// unknownSubcommand is the Args check of commands that only group subcommands: any
// positional argument means the user typed a subcommand that does not exist.
func unknownSubcommand(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
	if cmd.SuggestionsMinimumDistance <= 0 {
		cmd.SuggestionsMinimumDistance = 2
	}
	if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
		msg += fmt.Sprintf(" (did you mean %q?)", s[0])
	}
	return usagef("%s", msg)
}

// helpOrUnknown makes a grouping command runnable so that cobra validates its
// arguments (an unknown subcommand is a usage error, not a silent help page).
func helpOrUnknown(cmd *cobra.Command, args []string) error {
	if err := unknownSubcommand(cmd, args); err != nil {
		return err
	}
	return cmd.Help()
}

// args wraps a cobra positional-argument check so that its failure is a usage error.
func args(check cobra.PositionalArgs) cobra.PositionalArgs {
	return func(cmd *cobra.Command, a []string) error {
		if err := check(cmd, a); err != nil {
			return &usageError{err: err}
		}
		return nil
	}
}

// newGroupingCmd returns a command that only holds subcommands.
func newGroupingCmd(use, short, long string) *cobra.Command {
	return &cobra.Command{
		Use:   use,
		Short: short,
		Long:  long,
		Args:  unknownSubcommand,
		RunE:  helpOrUnknown,
	}
}
