package console

import (
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
)

// brokersEnv overrides the default bootstrap brokers, as for every client command.
const brokersEnv = "SAMSA_BROKERS"

// NewCommand returns `samsa console`: serve the web console until interrupted.
func NewCommand() *cobra.Command {
	var (
		brokers  string
		cfg      Config
		logLevel string
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

The console has no login: listen on a loopback address (the default), or put it
behind a proxy that authenticates. Changes are refused when they come from
another site.`,
		Example: `  samsa console
  samsa console -b kafka-1:9092,kafka-2:9092 --listen 127.0.0.1:8080`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var level slog.Level
			if err := level.UnmarshalText([]byte(logLevel)); err != nil {
				return fmt.Errorf("--log-level: %w", err)
			}
			cfg.Logger = slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: level}))
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
	f.DurationVar(&cfg.Timeout, "timeout", defaultTimeout, "how long a page waits for the cluster")
	f.DurationVar(&cfg.LagInterval, "lag-interval", defaultLagInterval, "how often every group's lag is sampled")
	f.IntVar(&cfg.LagHistory, "lag-history", defaultLagHistory, "lag samples kept per group")
	f.StringVar(&logLevel, "log-level", "info", "log level: debug, info, warn, error")
	return cmd
}
