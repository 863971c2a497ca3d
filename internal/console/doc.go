// Package console is Samsa's web console: an HTTP server that shows a cluster's
// brokers, topics, records, consumer groups, lag and doctor's findings, and lets an
// operator create and delete topics, edit topic configs, produce a record and reset
// a group's offsets. Like the CLI it is a Kafka client on franz-go (kgo, kadm) that
// works against Samsa or any Kafka; it never imports Samsa's broker packages. Its TLS
// and SASL come as franz-go options (Config.ClientOpts), which `samsa console` makes
// from the client commands' shared security flags (cli.ClientSecurity); against a
// cluster with an authorizer every page shows what that principal may see.
//
// Layout: config.go (Config, defaults, Validate), server.go (the Server, routes and
// the middleware every response goes through), kafka.go (the client and how its
// errors are classified), one file per page family (overview.go, topics.go,
// messages.go, groups.go, doctor.go), lag.go (the lag sampler), chart.go (the lag
// chart, drawn as SVG), values.go (how record bytes are shown), render.go (templates
// and pagination). Templates and static assets are embedded (templates/, static/).
//
// Pages are rendered on the server with html/template, so everything read from Kafka
// (topic and group names, keys, values, headers) is escaped as text; responses carry a
// Content-Security-Policy that allows only the console's own script and styles. Every
// change is a POST behind http.CrossOriginProtection: a request from another site is
// refused with 403 before any handler runs. On any listen address the console answers
// only to IP literals, localhost, its listen name and Config.AllowedHosts (against
// DNS rebinding). Pages work without JavaScript;
// the one script (static/app.js) only refreshes a group's lag section in place.
//
// The message browser reads at most what it shows: bounded Fetch requests sent to
// the partitions' leaders (no consumer group joined, nothing committed). Offsets and
// records are asked of the leaders the page's own Metadata names. Lists are paginated.
//
// Concurrency: a Server is safe for concurrent use; each request runs on its own
// goroutine with the one shared franz-go client. The lag sampler is one goroutine
// that owns the sampling; its history is guarded by a mutex (lagSampler.mu) that no
// other lock is taken under.
package console
