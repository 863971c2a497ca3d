package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"runtime/pprof"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/samsa-streaming/samsa/internal/auth"
	"github.com/samsa-streaming/samsa/internal/broker"
	"github.com/samsa-streaming/samsa/internal/clock"
	"github.com/samsa-streaming/samsa/internal/config"
	"github.com/samsa-streaming/samsa/internal/console"
	"github.com/samsa-streaming/samsa/internal/controller"
	"github.com/samsa-streaming/samsa/internal/metrics"
	"github.com/samsa-streaming/samsa/internal/server"
)

// shutdownGrace bounds a clean shutdown after SIGTERM/SIGINT.
const shutdownGrace = 10 * time.Second

func newServeCommand() *cobra.Command {
	var (
		configFile string
		overrides  []string
		logLevel   string
		cpuProfile string
		addScram   []string
	)
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run a Samsa node (Kafka-compatible broker and metadata controller)",
		Long: `Run a Samsa node. With no arguments it starts the embedded default: one combined
broker+controller node with data in ./samsa-data, listening on 127.0.0.1:9092.

Properties use Kafka's names and defaults (see docs/config.md).`,
		Example: `  samsa serve
  samsa serve -c server.properties
  samsa serve --override log.dirs=/var/lib/samsa --override listeners=PLAINTEXT://127.0.0.1:19092`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cmd.SilenceUsage = true
			if cpuProfile != "" {
				f, err := os.Create(cpuProfile)
				if err != nil {
					return err
				}
				if err := pprof.StartCPUProfile(f); err != nil {
					return err
				}
				defer func() { pprof.StopCPUProfile(); f.Close() }()
			}
			return serve(configFile, overrides, logLevel, addScram)
		},
	}
	cmd.Flags().StringVarP(&configFile, "config", "c", "", "server.properties file")
	cmd.Flags().StringArrayVar(&overrides, "override", nil, "property key=value, overriding the file (repeatable)")
	cmd.Flags().StringVar(&logLevel, "log-level", "info", "log level: debug, info, warn, error")
	cmd.Flags().StringArrayVar(&addScram, "add-scram", nil,
		"create a SCRAM credential unless the user has one for that mechanism, as kafka-storage format --add-scram: 'SCRAM-SHA-256=[name=admin,password=admin-secret]' (repeatable)")
	cmd.Flags().StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of the whole run to this file (for go tool pprof)")
	return cmd
}

func serve(configFile string, overrides []string, logLevel string, addScram []string) error {
	var level slog.Level
	if err := level.UnmarshalText([]byte(logLevel)); err != nil {
		return fmt.Errorf("--log-level: %w", err)
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))

	cfg, err := config.Load(configFile, overrides)
	if err != nil {
		return fmt.Errorf("invalid configuration:\n%w", err)
	}
	var bootstrap []controller.BootstrapScram
	for _, s := range addScram {
		user, cred, err := auth.ParseAddScram(s)
		if err != nil {
			return fmt.Errorf("--add-scram: %w", err)
		}
		bootstrap = append(bootstrap, controller.BootstrapScram{User: user, Credential: cred})
	}
	// The authorization log goes to stderr like the rest, at its own level
	// (authorizer.logger.level), whatever --log-level says.
	authLog := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))

	// The metrics registry is made before the broker (which records into it) and reads
	// the broker's state through this indirection once the broker exists.
	source := &brokerSource{}
	m, err := metrics.New(metrics.Options{Listen: cfg.MetricsListener, Logger: logger.With("component", "metrics"), Source: source})
	if err != nil {
		return err
	}
	brk, err := broker.New(broker.Options{Config: cfg, Clock: clock.Real{}, Logger: logger, Metrics: m,
		AuthorizerLogger: authLog, BootstrapScram: bootstrap})
	if err != nil {
		return err
	}
	source.set(brk)

	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)

	sec := server.Security{Scram: brk.ScramCredential, Clock: clock.Real{}, Logger: logger.With("component", "tls")}
	if cfg.DelegationTokenKey() != "" {
		sec.Tokens = brk.DelegationToken
	}
	limits, err := server.ConnectionLimits(cfg)
	if err != nil {
		brk.Close()
		return err
	}

	// Every listener's TLS and SASL settings are read before anything starts, so
	// that a missing key file stops the start at once.
	var clientListeners []server.Listener
	if clients := cfg.ClientListeners(); cfg.HasRole("broker") && len(clients) > 0 {
		if clientListeners, err = server.ConfigListeners(cfg, clients, sec); err != nil {
			brk.Close()
			return fmt.Errorf("invalid configuration:\n%w", err)
		}
	}

	// The controller listener serves first: the quorum forms through it while Start
	// waits for it.
	var ctrlSrv *server.Server
	if l, ok := cfg.ControllerListener(); ok && cfg.HasRole("controller") {
		var listeners []server.Listener
		listeners, err = server.ConfigListeners(cfg, []config.Listener{l}, sec)
		if err == nil {
			ctrlSrv, err = server.New(server.Config{
				Listeners:      listeners,
				MaxRequestSize: cfg.SocketRequestMaxBytes,
				Handler:        brk.ControllerHandler(),
				Versions:       broker.ControllerVersions,
				APIKeys:        broker.ControllerAPIKeys,
				NewRequest:     broker.ControllerNewRequest,
				Logger:         logger.With("component", "controller-listener"),
				IdleTimeout:    time.Duration(cfg.ConnectionsMaxIdleMs) * time.Millisecond,
				Limits:         server.Limits{SetupTimeout: limits.SetupTimeout},
			})
		}
		if err == nil {
			err = ctrlSrv.Start()
		}
		if err != nil {
			brk.Close()
			return fmt.Errorf("controller listener: %w", err)
		}
	}
	closeAll := func(srv *server.Server) error {
		var errs []error
		if srv != nil {
			errs = append(errs, srv.Close())
		}
		errs = append(errs, brk.Close())
		if ctrlSrv != nil {
			errs = append(errs, ctrlSrv.Close())
		}
		return errors.Join(append(errs, m.Close())...)
	}

	// Start waits for the quorum (and, on a broker, for the controller to unfence
	// it); a signal meanwhile aborts it.
	startCtx, cancelStart := context.WithCancel(context.Background())
	started := make(chan error, 1)
	go func() { started <- brk.Start(startCtx) }()
	select {
	case err = <-started:
	case err := <-brk.Failed():
		// A disk or the metadata log failed while the node started (its start would
		// wait for ever for what it cannot get): it stops at once, as below.
		cancelStart()
		return fmt.Errorf("stopping at once: %w", err)
	case sig := <-sigs:
		logger.Info("shutting down before the node was ready", "signal", sig.String())
		cancelStart()
		<-started
		closeAll(nil)
		return nil
	}
	cancelStart()
	if err != nil {
		closeAll(nil)
		return err
	}

	var srv *server.Server
	var bound string
	if clients := cfg.ClientListeners(); cfg.HasRole("broker") && len(clients) > 0 {
		sc := server.Config{
			Listeners:      clientListeners,
			MaxRequestSize: cfg.SocketRequestMaxBytes,
			Handler:        brk,
			Versions:       broker.Versions,
			APIKeys:        broker.APIKeys,
			ReusableFrames: broker.ReusableFrames,
			Produce:        brk,
			ConnClosed:     brk.ConnClosed,
			Closed:         brk.StopServing, // the close waits for the requests in progress
			Logger:         logger.With("component", "server"),
			Observer:       m,
			IdleTimeout:    time.Duration(cfg.ConnectionsMaxIdleMs) * time.Millisecond,

			Limits:              limits,
			IPConnectionRate:    brk.IPConnectionRate,
			ConnectionThrottled: m.ConnectionThrottled,
		}
		srv, err = server.New(sc)
		if err == nil {
			// The broker-wide connection limits are dynamic (KIP-226).
			brk.WatchConfig(func(eff *config.Broker) {
				lim, err := server.ConnectionLimits(eff)
				if err != nil {
					logger.Warn("connection limits: some are not applied", "err", err)
				}
				srv.SetLimits(lim)
			})
		}
		if err == nil {
			err = m.RequestFrames(srv.FrameBytes)
		}
		if err == nil {
			err = srv.Start()
		}
		if err != nil {
			closeAll(nil)
			return fmt.Errorf("listen: %w", err)
		}
		bound = srv.Addrs()[0].String()
	} else if ctrlSrv != nil {
		bound = ctrlSrv.Addrs()[0].String()
	}
	if err := m.Start(); err != nil {
		closeAll(srv)
		return fmt.Errorf("metrics listener: %w", err)
	}
	web, err := startConsole(cfg, srv, clientListeners, logger)
	if err != nil {
		closeAll(srv)
		return err
	}
	logger.Info("samsa ready", "addr", bound, "node", cfg.NodeID, "roles", strings.Join(cfg.ProcessRoles, ","),
		"cluster", brk.ClusterID(), "controller", brk.Metadata().Leader(), "log.dirs", cfg.LogDirs)

	var sig os.Signal
	select {
	case sig = <-sigs:
	case err := <-brk.Failed():
		// As Kafka halts: no clean shutdown, nothing more written to the failed disks;
		// the exit closes every connection, and in a cluster the node's session expires.
		return fmt.Errorf("stopping at once: %w", err)
	}
	logger.Info("shutting down", "signal", sig.String())
	if web != nil {
		web.Close()
	}
	// Controlled shutdown: the controller moves this broker's leaderships away while
	// clients are still served, bounded by the broker session timeout (after which
	// the controller would fence this broker anyway). Skipped, as Kafka's
	// BrokerServer skips it, when controlled.shutdown.enable is false.
	if cfg.ControlledShutdownEnable {
		shutdownCtx, cancel := context.WithTimeout(context.Background(), time.Duration(cfg.BrokerSessionTimeoutMs)*time.Millisecond)
		if err := brk.Shutdown(shutdownCtx); err != nil {
			logger.Warn("controlled shutdown incomplete; closing anyway", "err", err)
		}
		cancel()
	} else {
		logger.Info("controlled shutdown skipped (controlled.shutdown.enable=false): this node's leaderships stay until the controller fences it after broker.session.timeout.ms")
	}
	done := make(chan error, 1)
	go func() { done <- closeAll(srv) }()
	select {
	case err := <-done:
		if err != nil {
			logger.Error("shutdown", "err", err)
			return err
		}
		logger.Info("stopped cleanly")
		return nil
	case <-time.After(shutdownGrace):
		// What is still running names the step that did not finish.
		fmt.Fprintf(os.Stderr, "goroutines still running after %v:\n", shutdownGrace)
		pprof.Lookup("goroutine").WriteTo(os.Stderr, 1)
		return fmt.Errorf("shutdown did not finish within %v", shutdownGrace)
	}
}

// startConsole serves the web console on console.listener, as a client of this
// node's first PLAINTEXT client listener (the console in serve has no credentials of
// its own); nil when the property is not set.
func startConsole(cfg *config.Broker, srv *server.Server, listeners []server.Listener, logger *slog.Logger) (*console.Server, error) {
	if cfg.ConsoleListener == "" {
		return nil, nil
	}
	if srv == nil {
		return nil, errors.New("console.listener needs a client listener: process.roles must include broker")
	}
	plaintext := slices.IndexFunc(listeners, func(l server.Listener) bool { return l.TLS == nil && l.SASL == nil })
	if plaintext < 0 { // config.Validate refuses this
		return nil, errors.New("console.listener needs a PLAINTEXT client listener to connect to")
	}
	addr := srv.Addrs()[plaintext].String()
	if cfg.Security.Authorizer != "" {
		logger.Warn("the console connects through a PLAINTEXT listener as User:ANONYMOUS: it shows only what ACLs allow that principal",
			"listener", listeners[plaintext].Name, "addr", addr)
	}
	web, err := console.New(console.Config{
		Brokers:      []string{addr},
		Listen:       cfg.ConsoleListener,
		AllowedHosts: cfg.ConsoleAllowedHosts,
		Logger:       logger.With("component", "console"),
	})
	if err != nil {
		return nil, err
	}
	if err := web.Start(); err != nil {
		web.Close()
		return nil, err
	}
	return web, nil
}

// brokerSource hands metrics scrapes to the broker once it has been built.
type brokerSource struct {
	broker atomic.Pointer[broker.Broker]
}

// The collector exports the optional gauge families only for a source that serves
// them: brokerSource must serve every one the broker does.
var (
	_ metrics.QuorumSource      = (*brokerSource)(nil)
	_ metrics.TransactionSource = (*brokerSource)(nil)
	_ metrics.ShareSource       = (*brokerSource)(nil)
)

func (s *brokerSource) set(b *broker.Broker) { s.broker.Store(b) }

func (s *brokerSource) Partitions() []metrics.PartitionStats {
	if b := s.broker.Load(); b != nil {
		return b.Partitions()
	}
	return nil
}

func (s *brokerSource) Quorum() metrics.QuorumStats {
	if b := s.broker.Load(); b != nil {
		return b.Quorum()
	}
	return metrics.QuorumStats{}
}

func (s *brokerSource) Groups() []metrics.GroupStats {
	if b := s.broker.Load(); b != nil {
		return b.Groups()
	}
	return nil
}

func (s *brokerSource) Transactions() metrics.TransactionStats {
	if b := s.broker.Load(); b != nil {
		return b.Transactions()
	}
	return metrics.TransactionStats{}
}

func (s *brokerSource) SharePartitions() []metrics.SharePartitionStats {
	if b := s.broker.Load(); b != nil {
		return b.SharePartitions()
	}
	return nil
}
