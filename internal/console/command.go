package console

import (
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/samsa-streaming/samsa/internal/cli"
)

// brokersEnv overrides the default bootstrap brokers, as for every client command.
const brokersEnv = "SAMSA_BROKERS"

// NewCommand returns `samsa console`: serve the web console until interrupted.
func NewCommand() *cobra.Command {
	var (
		brokers  string
		cfg      Config
		logLevel string
		sec      cli.ClientSecurity
	)
	cmd := &cobra.Command{
		Use:   "console",
		Short: "Serve the web console: topics, messages, consumer groups, lag and doctor in a browser",
		Long: `Serve a web console for Samsa or any Kafka-compatible cluster on --listen until
interrupted (Ctrl-C or SIGTERM). It is a Kafka client like the other subcommands:
pages show the brokers, topics and their partitions, records, consumer groups with
their lag over time, and doctor's findings; forms create and delete topics, edit
topic configs, produce a record and reset a group's offsets. Every consumer group's
lag is sampled every --lag-interval from the console's start.

It connects to the brokers with the same TLS and SASL flags as the other client
commands (--tls-ca, --sasl-mechanism, --user, --password, --command-config…);
every page then shows what that principal may see and do.

The console has no login: listen on a loopback address (the default), or put it
behind a proxy that authenticates. Changes are refused when they come from
another site.`,
		Example: `  samsa console
  samsa console -b kafka-1:9092,kafka-2:9092 --listen 127.0.0.1:8080
  SAMSA_PASSWORD=alice-secret samsa console -b kafka-1:9095 --tls-ca ca.pem \
      --sasl-mechanism SCRAM-SHA-512 --user alice
  samsa console -b kafka-1:9095 --command-config client.properties`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var level slog.Level
			if err := level.UnmarshalText([]byte(logLevel)); err != nil {
				return fmt.Errorf("--log-level: %w", err)
			}
			cfg.Logger = slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: level}))
			opts, err := sec.Opts()
			if err != nil {
				return err
			}
			cfg.ClientOpts = opts
			for b := range strings.SplitSeq(brokers, ",") {
				if b = strings.TrimSpace(b); b != "" {
					cfg.Brokers = append(cfg.Brokers, b)
				}
			}
			srv, err := New(cfg)
			if err != nil {
				return err
			}
			// Catch the signals before the URL is logged: whoever reads it may stop us.
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			if err := srv.Start(); err != nil {
				srv.Close()
				return err
			}
			<-ctx.Done()
			cfg.Logger.Info("console stopping")
			return srv.Close()
		},
	}
	def := "127.0.0.1:9092"
	if env := strings.TrimSpace(os.Getenv(brokersEnv)); env != "" {
		def = env
	}
	f := cmd.Flags()
	f.StringVarP(&brokers, "brokers", "b", def, "comma-separated bootstrap brokers host:port (env "+brokersEnv+")")
	f.StringVar(&cfg.Listen, "listen", DefaultListen, "HTTP listen address host:port")
	f.StringSliceVar(&cfg.AllowedHosts, "allowed-host", nil, "a host name the console answers to besides localhost, IP addresses and --listen's own (repeatable; * for any): others are refused against DNS rebinding")
	f.DurationVar(&cfg.Timeout, "timeout", defaultTimeout, "how long a page waits for the cluster")
	f.DurationVar(&cfg.LagInterval, "lag-interval", defaultLagInterval, "how often every group's lag is sampled")
	f.IntVar(&cfg.LagHistory, "lag-history", defaultLagHistory, "lag samples kept per group")
	f.StringVar(&logLevel, "log-level", "info", "log level: debug, info, warn, error")
	// The client commands' own security flags; being the console's, they shadow the
	// same flags of the root command (whose settings only its client commands read).
	sec.AddFlags(f)
	return cmd
}
