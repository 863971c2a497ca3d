package console

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Server is the web console. New builds it, Start listens, Close stops it.
type Server struct {
	cfg       Config
	cl        *kgo.Client
	adm       *kadm.Client
	templates templates
	lag       *lagSampler
	handler   http.Handler

	httpSrv  *http.Server
	listener net.Listener
	stop     context.CancelFunc
	done     sync.WaitGroup
}

// New validates cfg, builds the Kafka client and the routes. It does not contact the
// cluster: pages do, so a console started before its cluster works once it is up.
func New(cfg Config) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("invalid console configuration:\n%w", err)
	}
	cfg = cfg.withDefaults()
	t, err := parseTemplates()
	if err != nil {
		return nil, fmt.Errorf("console templates: %w", err)
	}
	cl, adm, err := newClient(cfg)
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, cl: cl, adm: adm, templates: t, lag: newLagSampler(adm, cfg)}
	s.handler = s.routes()
	return s, nil
}

// Handler returns the console's HTTP handler (every route and middleware).
func (s *Server) Handler() http.Handler { return s.handler }

func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	static, _ := fs.Sub(staticFS, "static")
	mux.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(static)))
	mux.Handle("GET /favicon.ico", http.RedirectHandler("/static/favicon.svg", http.StatusMovedPermanently))
	mux.HandleFunc("GET /{$}", s.overview)
	mux.HandleFunc("GET /topics", s.topics)
	mux.HandleFunc("POST /topics", s.createTopic)
	mux.HandleFunc("GET /topics/{topic}", s.topic)
	mux.HandleFunc("GET /topics/{topic}/delete", s.confirmDeleteTopic)
	mux.HandleFunc("POST /topics/{topic}/delete", s.deleteTopic)
	mux.HandleFunc("POST /topics/{topic}/configs", s.alterTopicConfigs)
	mux.HandleFunc("POST /topics/{topic}/produce", s.produce)
	mux.HandleFunc("GET /topics/{topic}/messages", s.messages)
	mux.HandleFunc("GET /topics/{topic}/messages/{partition}/{offset}", s.message)
	mux.HandleFunc("GET /groups", s.groups)
	mux.HandleFunc("GET /groups/{group}", s.group)
	mux.HandleFunc("GET /groups/{group}/lag", s.groupLag)
	mux.HandleFunc("GET /groups/{group}/reset", s.reviewReset)
	mux.HandleFunc("POST /groups/{group}/reset", s.resetOffsets)
	mux.HandleFunc("GET /doctor", s.doctor)
	mux.HandleFunc("/", s.notFound)

	cop := http.NewCrossOriginProtection()
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.cfg.Logger.Warn("refused a cross-origin request", "method", r.Method, "path", r.URL.Path,
			"origin", r.Header.Get("Origin"))
		s.render(w, http.StatusForbidden, "message", page{Title: "Refused",
			Data: messageData{Error: "refused: this change was requested from another site (cross-origin request)"}})
	}))
	return s.logRequests(securityHeaders(s.checkHost(cop.Handler(mux))))
}

// checkHost refuses requests whose Host is a name the console was not told to
// answer to: a web page whose own host name was re-pointed at the console's address
// (DNS rebinding) would otherwise be same-origin with the console, and so pass the
// cross-origin check. That holds on every listen address, not only on a loopback
// one: a console listening on 0.0.0.0 inside a container whose port is published on
// the host's 127.0.0.1 is reached the same way. Answered: IP literals (a rebound page
// always has a name), localhost, Listen's own host name and Config.AllowedHosts.
func (s *Server) checkHost(next http.Handler) http.Handler {
	allowed := map[string]bool{"localhost": true}
	if listenHost, _, _ := net.SplitHostPort(s.cfg.Listen); listenHost != "" {
		allowed[normalHost(listenHost)] = true
	}
	for _, h := range s.cfg.AllowedHosts {
		allowed[normalHost(h)] = true
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host := r.Host
		if h, _, err := net.SplitHostPort(host); err == nil {
			host = h
		}
		host = normalHost(host)
		if allowed["*"] || allowed[host] || (host != "" && net.ParseIP(host) != nil) {
			next.ServeHTTP(w, r)
			return
		}
		s.render(w, http.StatusMisdirectedRequest, "message", page{Title: "Refused",
			Data: messageData{Error: "refused: this console answers only to localhost, an IP address or the host names it is told to allow, not to " + r.Host + "; allow it with samsa console --allowed-host " + host + " (or console.allowed.hosts for the console of samsa serve)"}})
	})
}

// normalHost is a host name as checkHost compares it: lower case, without the
// brackets of an IPv6 literal or a final dot.
func normalHost(host string) string {
	return strings.TrimSuffix(strings.ToLower(strings.Trim(host, "[]")), ".")
}

// isLoopback reports whether host is localhost or a loopback IP.
func isLoopback(host string) bool {
	host = strings.Trim(host, "[]")
	ip := net.ParseIP(host)
	return strings.EqualFold(host, "localhost") || (ip != nil && ip.IsLoopback())
}

// logRequests logs every request at debug level, and at warn level those that took
// longer than the Kafka timeout.
func (s *Server) logRequests(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		next.ServeHTTP(rec, r)
		took := time.Since(start)
		level := slog.LevelDebug
		if took > s.cfg.Timeout {
			level = slog.LevelWarn
		}
		s.cfg.Logger.Log(r.Context(), level, "request", "method", r.Method, "path", r.URL.Path, "status", rec.status, "took", took)
	})
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(status int) {
	r.status = status
	r.ResponseWriter.WriteHeader(status)
}

// securityHeaders sets the headers every response carries: a Content-Security-Policy
// that runs only the console's own script and styles (so markup that slipped into a
// page could not run), no framing, no MIME sniffing.
func securityHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; "+
			"img-src 'self'; connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "same-origin")
		h.Set("Cache-Control", "no-store")
		next.ServeHTTP(w, r)
	})
}

// Start listens on cfg.Listen, serves in the background and starts the lag sampler.
func (s *Server) Start() error {
	l, err := net.Listen("tcp", s.cfg.Listen)
	if err != nil {
		return fmt.Errorf("console listener: %w", err)
	}
	s.listener = l
	s.httpSrv = &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
	}
	ctx, stop := context.WithCancel(context.Background())
	s.stop = stop
	s.done.Add(2)
	go func() {
		defer s.done.Done()
		if err := s.httpSrv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.cfg.Logger.Error("console server stopped", "err", err)
		}
	}()
	go func() {
		defer s.done.Done()
		s.lag.run(ctx)
	}()
	s.cfg.Logger.Info("console listening", "url", s.URL(), "brokers", strings.Join(s.cfg.Brokers, ","))
	if host, _, _ := net.SplitHostPort(s.cfg.Listen); !isLoopback(host) {
		s.cfg.Logger.Warn("the console has no login and listens beyond this machine: anyone who reaches it can change topics and offsets",
			"listen", s.cfg.Listen)
	}
	return nil
}

// URL is the console's address, http://host:port/, once started.
func (s *Server) URL() string {
	if s.listener == nil {
		return ""
	}
	return "http://" + s.listener.Addr().String() + "/"
}

// Close stops serving, the sampler and the Kafka client.
func (s *Server) Close() error {
	var err error
	if s.httpSrv != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err = s.httpSrv.Shutdown(ctx)
		cancel()
		s.stop()
		s.done.Wait()
	}
	s.cl.Close()
	return err
}

// requestContext bounds the Kafka requests behind one page.
func (s *Server) requestContext(r *http.Request) (context.Context, context.CancelFunc) {
	return context.WithTimeout(r.Context(), s.cfg.Timeout)
}

func (s *Server) notFound(w http.ResponseWriter, r *http.Request) {
	s.render(w, http.StatusNotFound, "message", page{Title: "Not found",
		Data: messageData{Error: "there is no page at " + r.URL.Path, Next: "/", NextText: "Overview"}})
}

// redirect sends the browser on with 303 See Other, the answer to a POST.
func redirect(w http.ResponseWriter, r *http.Request, to string) {
	http.Redirect(w, r, to, http.StatusSeeOther)
}
