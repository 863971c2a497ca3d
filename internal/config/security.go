package config

import (
	"crypto/tls"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Security protocols of listener.security.protocol.map, Kafka's names.
const (
	ProtocolPlaintext     = "PLAINTEXT"
	ProtocolSSL           = "SSL"
	ProtocolSASLPlaintext = "SASL_PLAINTEXT"
	ProtocolSASLSSL       = "SASL_SSL"
)

// SASL mechanisms, Kafka's names.
const (
	MechanismPlain       = "PLAIN"
	MechanismScramSHA256 = "SCRAM-SHA-256"
	MechanismScramSHA512 = "SCRAM-SHA-512"
	MechanismOAuthBearer = "OAUTHBEARER"
	MechanismGSSAPI      = "GSSAPI"
)

// Authorizer class names authorizer.class.name accepts; both mean Samsa's
// authorizer, which has the StandardAuthorizer's semantics.
const (
	StandardAuthorizer = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
	aclAuthorizer      = "kafka.security.authorizer.AclAuthorizer"
)

// jwksValidator is the OAUTHBEARER server callback handler class that validates
// tokens against a JWKS endpoint (the default validates unsecured JWTs).
const jwksValidator = "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"

var (
	protocols  = []string{ProtocolPlaintext, ProtocolSSL, ProtocolSASLPlaintext, ProtocolSASLSSL}
	mechanisms = []string{MechanismPlain, MechanismScramSHA256, MechanismScramSHA512, MechanismOAuthBearer, MechanismGSSAPI}
	// mechanismProperties may be set per listener and mechanism:
	// listener.name.<listener>.<mechanism in lower case>.<property>.
	mechanismProperties = []string{"sasl.jaas.config", "sasl.server.callback.handler.class", "connections.max.reauth.ms"}
)

// Security holds the broker-wide security, authorizer, quota and connection-limit
// properties. Per-listener settings (TLS, SASL) are resolved by ListenerSecurity.
type Security struct {
	// ProtocolMap is listener.security.protocol.map: listener name → protocol.
	ProtocolMap                 map[string]string
	InterBrokerProtocol         string // security.inter.broker.protocol; "" = not set
	SaslMechanismInterBroker    string // sasl.mechanism.inter.broker.protocol
	SaslMechanismController     string // sasl.mechanism.controller.protocol
	SaslServerMaxReceiveSize    int32  // sasl.server.max.receive.size
	FailedAuthenticationDelayMs int32  // connection.failed.authentication.delay.ms

	Authorizer                string   // authorizer.class.name; "" = none
	SuperUsers                []string // super.users, each Type:Name
	AllowEveryoneIfNoACLFound bool     // allow.everyone.if.no.acl.found
	AuthorizerLogLevel        string   // authorizer.logger.level: OFF, INFO, DEBUG

	MaxConnections               int32            // max.connections
	MaxConnectionsPerIP          int32            // max.connections.per.ip
	MaxConnectionsPerIPOverrides map[string]int32 // max.connections.per.ip.overrides
	MaxConnectionCreationRate    int32            // max.connection.creation.rate
	ConnectionsMaxSetupMs        int64            // connections.max.setup.ms

	QuotaWindowNum         int32 // quota.window.num
	QuotaWindowSizeSeconds int32 // quota.window.size.seconds
	// ControllerQuotaWindowNum and ControllerQuotaWindowSizeSeconds
	// (controller.quota.window.*) measure controller_mutation_rate.
	ControllerQuotaWindowNum         int32
	ControllerQuotaWindowSizeSeconds int32

	// DelegationTokenSecret is delegation.token.secret.key, DelegationTokenMasterKey
	// its deprecated name delegation.token.master.key (DelegationTokenKey picks).
	DelegationTokenSecret        string
	DelegationTokenMasterKey     string
	DelegationTokenMaxLifetimeMs int64 // delegation.token.max.lifetime.ms
	DelegationTokenExpiryTimeMs  int64 // delegation.token.expiry.time.ms
	DelegationTokenExpiryCheckMs int64 // delegation.token.expiry.check.interval.ms

	// ListenerOverrides holds the listener.name.<listener>. properties: listener
	// name (upper case) → property without the prefix → value.
	ListenerOverrides map[string]map[string]string
}

var (
	protocolMapSpec  = text{valid: "NAME:PROTOCOL,...", fn: func(s string) error { _, err := ParseProtocolMap(s); return err }}
	mechanismList    = list{values: mechanisms, valid: strings.Join(mechanisms, ", ")}
	mechanismEnum    = enum{values: mechanisms}
	optionalProtocol = text{valid: strings.Join(protocols, ", "), fn: func(s string) error {
		if s == "" {
			return nil
		}
		return enum{values: protocols}.check(s)
	}}
	superUsersSpec = text{valid: "Type:Name;...", fn: func(s string) error { _, err := parseSuperUsers(s); return err }}
	pemOnly        = text{valid: "PEM", fn: func(s string) error {
		if !strings.EqualFold(s, "PEM") {
			return fmt.Errorf("Samsa reads PEM files only, not %s: convert the store to PEM (openssl pkcs12 -nodes, keytool -exportcert -rfc) and set PEM", s)
		}
		return nil
	}}
	clientAuthEnum = enum{values: []string{"none", "requested", "required"}}
	tlsVersions    = list{values: []string{"TLSv1.2", "TLSv1.3"}, nonEmpty: true}
	cipherSuites   = list{valid: "TLS 1.2 cipher suite names", item: func(s string) error {
		if _, ok := cipherSuiteID(s); !ok {
			return fmt.Errorf("%q is not a cipher suite Go's TLS implements", s)
		}
		return nil
	}}
	authorizerClasses = text{valid: `"", ` + StandardAuthorizer, fn: func(s string) error {
		if s != "" && s != StandardAuthorizer && s != aclAuthorizer {
			return fmt.Errorf("Samsa's authorizer is %s (the ACLs live in the metadata log)", StandardAuthorizer)
		}
		return nil
	}}
	logLevels     = enum{values: []string{"OFF", "INFO", "DEBUG"}}
	ipOverrides   = text{valid: "host:count,...", fn: func(s string) error { _, err := parseIPOverrides(s); return err }}
	anything      = text{}
	passwordValue = text{typ: TypePassword}
)

// securityProperties: listeners' security protocols, TLS, SASL, the authorizer,
// quotas and connection limits.
var securityProperties = []property{
	property{name: "listener.security.protocol.map", spec: protocolMapSpec, def: "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL,SSL:SSL",
		doc:  "Security protocol of each listener name, as NAME:PROTOCOL pairs; the protocols are PLAINTEXT, SSL, SASL_PLAINTEXT and SASL_SSL.",
		note: "When it is not set, the controller listener names are PLAINTEXT, as in Kafka."}.
		bind(binding{set: func(b *Broker, v string) { b.Security.ProtocolMap, _ = ParseProtocolMap(v) },
			get: func(b *Broker) string { return formatProtocolMap(b.Security.ProtocolMap) }}),
	property{name: "security.inter.broker.protocol", spec: optionalProtocol, null: true,
		doc:  "Security protocol between brokers; picks the listener of that name as inter.broker.listener.name. Not to be set together with inter.broker.listener.name.",
		note: "Kafka's default is PLAINTEXT."}.
		bind(str(func(b *Broker) *string { return &b.Security.InterBrokerProtocol })),
	property{name: "sasl.mechanism.inter.broker.protocol", spec: mechanismEnum, def: "GSSAPI",
		doc: "SASL mechanism brokers authenticate to each other with when the inter-broker listener is SASL_PLAINTEXT or SASL_SSL; the credentials are the username and password of that listener's JAAS config for the mechanism."}.
		bind(str(func(b *Broker) *string { return &b.Security.SaslMechanismInterBroker })),
	property{name: "sasl.mechanism.controller.protocol", spec: mechanismEnum, def: "GSSAPI",
		doc: "SASL mechanism nodes authenticate to controllers with when the controller listener is SASL_PLAINTEXT or SASL_SSL."}.
		bind(str(func(b *Broker) *string { return &b.Security.SaslMechanismController })),
	{name: "sasl.enabled.mechanisms", spec: mechanismList, def: "GSSAPI", listener: true,
		doc:  "SASL mechanisms a SASL listener offers: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER.",
		note: "GSSAPI (Kerberos) is not implemented: a SASL listener must name other mechanisms."},
	{name: "sasl.jaas.config", spec: passwordValue, null: true,
		doc:  "JAAS login module configuration of a mechanism, set per listener and mechanism: listener.name.<listener>.<mechanism>.sasl.jaas.config. PlainLoginModule's user_<name>=\"<password>\" options are the PLAIN users; username and password are what this broker logs in with to other nodes.",
		note: "Only the prefixed form is read; an unprefixed value is refused."},
	{name: "sasl.server.callback.handler.class", spec: anything, null: true,
		doc:  "Set per listener and mechanism. For OAUTHBEARER, org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler validates tokens against sasl.oauthbearer.jwks.endpoint.url; unset, unsecured tokens are accepted (development only).",
		note: "No other classes are loaded."},
	property{name: "sasl.server.max.receive.size", spec: atLeast(TypeInt, 1), def: "524288",
		doc: "Largest frame a client may send before it has authenticated; a larger one closes the connection."}.
		bind(i32(func(b *Broker) *int32 { return &b.Security.SaslServerMaxReceiveSize })),
	{name: "connections.max.reauth.ms", spec: atLeast(TypeLong, 0), def: "0", listener: true,
		doc:  "Session lifetime of a SASL connection: a client must re-authenticate within it (KIP-368) or is disconnected at its next request; 0 turns re-authentication off. May also be set per listener and mechanism.",
		note: "The lifetime is shortened to an OAUTHBEARER token's expiry."},
	property{name: "delegation.token.secret.key", spec: passwordValue, null: true,
		doc: "Secret the HMAC of every delegation token is derived from (KIP-48); the same on every node, brokers and controllers. Unset: delegation tokens are disabled, and the token APIs answer DELEGATION_TOKEN_AUTH_DISABLED."}.
		bind(str(func(b *Broker) *string { return &b.Security.DelegationTokenSecret })),
	property{name: "delegation.token.master.key", spec: passwordValue, null: true,
		doc:  "Deprecated name of delegation.token.secret.key, used when that is not set.",
		note: "Deprecated in Kafka too."}.
		bind(str(func(b *Broker) *string { return &b.Security.DelegationTokenMasterKey })),
	property{name: "delegation.token.max.lifetime.ms", spec: atLeast(TypeLong, 1), def: "604800000",
		doc: "Longest lifetime of a delegation token: no renewal extends it past its issue time plus this (a create may ask for less)."}.
		bind(i64(func(b *Broker) *int64 { return &b.Security.DelegationTokenMaxLifetimeMs })),
	property{name: "delegation.token.expiry.time.ms", spec: atLeast(TypeLong, 1), def: "86400000",
		doc: "How long a delegation token lives from its creation or last renewal, unless renewed (a renewal may ask for less)."}.
		bind(i64(func(b *Broker) *int64 { return &b.Security.DelegationTokenExpiryTimeMs })),
	property{name: "delegation.token.expiry.check.interval.ms", spec: atLeast(TypeLong, 1), def: "3600000",
		doc:  "How often the active controller removes expired delegation tokens from the metadata.",
		note: "An expired token no longer authenticates from its expiry on, removed or not."}.
		bind(i64(func(b *Broker) *int64 { return &b.Security.DelegationTokenExpiryCheckMs })),
	property{name: "connection.failed.authentication.delay.ms", spec: atLeast(TypeInt, 0), def: "100",
		doc: "How long the answer to a failed authentication waits before the connection is closed, to slow down password guessing."}.
		bind(i32(func(b *Broker) *int32 { return &b.Security.FailedAuthenticationDelayMs })),
	{name: "sasl.oauthbearer.jwks.endpoint.url", spec: anything, null: true, listener: true,
		doc:  "URL of the JSON Web Key Set used to verify OAUTHBEARER tokens (with the OAuthBearerValidatorCallbackHandler); file:// URLs are read from disk.",
		note: "RS256/384/512, PS256/384/512, ES256/384/512 and EdDSA keys."},
	{name: "sasl.oauthbearer.jwks.endpoint.refresh.ms", spec: atLeast(TypeLong, 1), def: "3600000", listener: true,
		doc: "How often the JWKS is fetched again; an unknown key id also triggers a fetch (at most once a second)."},
	{name: "sasl.oauthbearer.expected.audience", spec: list{valid: "aud,..."}, null: true, listener: true,
		doc: "When set, a token's aud claim must name one of these."},
	{name: "sasl.oauthbearer.expected.issuer", spec: anything, null: true, listener: true,
		doc: "When set, a token's iss claim must equal it."},
	{name: "sasl.oauthbearer.sub.claim.name", spec: anything, def: "sub", listener: true,
		doc: "Claim holding the principal name of an OAUTHBEARER token."},
	{name: "sasl.oauthbearer.scope.claim.name", spec: anything, def: "scope", listener: true,
		doc: "Claim holding a token's scopes."},
	{name: "sasl.oauthbearer.clock.skew.seconds", spec: atLeast(TypeInt, 0), def: "30", listener: true,
		doc: "Clock difference tolerated when checking a token's exp, nbf and iat."},

	{name: "ssl.keystore.type", spec: pemOnly, def: "PEM", listener: true,
		doc:  "Format of the key store: PEM, with ssl.keystore.location naming a file holding the private key and the certificate chain, or ssl.keystore.key and ssl.keystore.certificate.chain inline.",
		note: "Kafka's default is JKS; Samsa reads PEM only and says so for JKS and PKCS12."},
	{name: "ssl.keystore.location", spec: anything, null: true, listener: true,
		doc:  "PEM file with the listener's private key and certificate chain. Re-read when it changes: replacing the file reloads the certificate without a restart.",
		note: "Kafka reloads after an AlterConfigs of this property; Samsa watches the file."},
	{name: "ssl.keystore.key", spec: passwordValue, null: true, listener: true,
		doc: "The private key in PEM, inline (instead of ssl.keystore.location)."},
	{name: "ssl.keystore.certificate.chain", spec: passwordValue, null: true, listener: true,
		doc: "The certificate chain in PEM, inline (with ssl.keystore.key)."},
	{name: "ssl.keystore.password", spec: passwordValue, null: true, listener: true,
		doc: "Password of a JKS or PKCS12 key store.", note: "Not used: PEM key stores have none."},
	{name: "ssl.key.password", spec: passwordValue, null: true, listener: true,
		doc:  "Password of an encrypted private key.",
		note: "Only the legacy PEM encryption (Proc-Type: 4,ENCRYPTED) is decrypted; an encrypted PKCS#8 key is refused with a message."},
	{name: "ssl.truststore.type", spec: pemOnly, def: "PEM", listener: true,
		doc:  "Format of the trust store: PEM certificates, in ssl.truststore.location or inline in ssl.truststore.certificates.",
		note: "Kafka's default is JKS."},
	{name: "ssl.truststore.location", spec: anything, null: true, listener: true,
		doc: "PEM file of the certificate authorities client certificates (and, between brokers, server certificates) are verified against."},
	{name: "ssl.truststore.certificates", spec: passwordValue, null: true, listener: true,
		doc: "The trusted certificates in PEM, inline."},
	{name: "ssl.truststore.password", spec: passwordValue, null: true, listener: true,
		doc: "Password of a JKS or PKCS12 trust store.", note: "Not used: PEM trust stores have none."},
	{name: "ssl.client.auth", spec: clientAuthEnum, def: "none", listener: true,
		doc: "Whether SSL clients must present a certificate: none, requested (verified when presented) or required. A verified certificate names the principal (ssl.principal.mapping.rules)."},
	{name: "ssl.principal.mapping.rules", spec: anything, def: "DEFAULT", listener: true,
		doc: "Rules mapping a client certificate's subject (RFC 2253, e.g. CN=alice,OU=eng) to a user name: RULE:pattern/replacement/[LU] entries, then DEFAULT (the whole subject)."},
	{name: "ssl.enabled.protocols", spec: tlsVersions, def: "TLSv1.2,TLSv1.3", listener: true,
		doc: "TLS versions accepted."},
	{name: "ssl.protocol", spec: enum{values: []string{"TLS", "TLSv1.2", "TLSv1.3"}}, def: "TLSv1.3", listener: true,
		doc: "Kafka's SSLContext protocol.", note: "Not used: ssl.enabled.protocols decides."},
	{name: "ssl.cipher.suites", spec: cipherSuites, null: true, listener: true,
		doc:  "TLS 1.2 cipher suites accepted, by IANA name (as Java names them); unset, Go's secure defaults.",
		note: "TLS 1.3 suites are not configurable in Go."},
	{name: "ssl.endpoint.identification.algorithm", spec: enum{values: []string{"https", ""}}, def: "https", listener: true,
		doc: "When https, a broker connecting to another node's SSL listener checks that the certificate names the host it dialled."},

	property{name: "authorizer.class.name", spec: authorizerClasses, def: "",
		doc:  "The authorizer: org.apache.kafka.metadata.authorizer.StandardAuthorizer checks every request against the ACLs in the metadata log; empty allows everything.",
		note: "kafka.security.authorizer.AclAuthorizer is accepted as the same authorizer."}.
		bind(str(func(b *Broker) *string { return &b.Security.Authorizer })),
	property{name: "super.users", spec: superUsersSpec, null: true,
		doc: "Principals allowed everything, separated by semicolons: User:admin;User:CN=broker1."}.
		bind(binding{set: func(b *Broker, v string) { b.Security.SuperUsers, _ = parseSuperUsers(v) },
			get: func(b *Broker) string { return strings.Join(b.Security.SuperUsers, ";") }}),
	property{name: "allow.everyone.if.no.acl.found", spec: boolean{}, def: "false",
		doc: "Allow an operation on a resource that no ACL matches at all."}.
		bind(boolField(func(b *Broker) *bool { return &b.Security.AllowEveryoneIfNoACLFound })),
	property{name: "authorizer.logger.level", spec: logLevels, def: "INFO",
		doc:  "The authorization log (Kafka's kafka.authorizer.logger: principal, operation, resource, result): INFO logs denials, DEBUG allowed operations too, OFF nothing.",
		note: "Samsa only; written to the broker log with logger=kafka.authorizer.logger whatever --log-level says."}.
		bind(str(func(b *Broker) *string { return &b.Security.AuthorizerLogLevel })),

	property{name: "max.connections", spec: atLeast(TypeInt, 0), def: "2147483647", listener: true,
		doc:  "Most client connections open at once; beyond it a listener stops accepting until one closes. Also per listener.",
		note: "Connections on the inter-broker listener, when there are other listeners, do not count towards the broker-wide limit (Kafka also closes another listener's oldest connection for them)."}.
		bind(i32(func(b *Broker) *int32 { return &b.Security.MaxConnections })),
	property{name: "max.connection.creation.rate", spec: atLeast(TypeInt, 1), def: "2147483647", listener: true,
		doc:  "Most new connections accepted per second (KIP-612), measured as client quotas are (quota.window.num samples of quota.window.size.seconds); beyond it the listener waits before it accepts the next one. Also per listener.",
		note: "The inter-broker listener, when there are other listeners, counts only towards its own listener's limit; the per-listener form is not dynamic. Kafka also accepts 0 (every connection waits a whole window); Samsa asks for at least 1."}.
		bind(i32(func(b *Broker) *int32 { return &b.Security.MaxConnectionCreationRate })),
	property{name: "max.connections.per.ip", spec: atLeast(TypeInt, 0), def: "2147483647",
		doc: "Most connections open at once from one IP address; a connection beyond it is closed at once."}.
		bind(i32(func(b *Broker) *int32 { return &b.Security.MaxConnectionsPerIP })),
	property{name: "max.connections.per.ip.overrides", spec: ipOverrides, def: "",
		doc: "Per-address exceptions to max.connections.per.ip, as host:count pairs."}.
		bind(binding{set: func(b *Broker, v string) { b.Security.MaxConnectionsPerIPOverrides, _ = parseIPOverrides(v) },
			get: func(b *Broker) string { return formatIPOverrides(b.Security.MaxConnectionsPerIPOverrides) }}),
	property{name: "connections.max.setup.ms", spec: atLeast(TypeLong, 1), def: "10000",
		doc:  "How long a new connection may take to finish its TLS handshake and send its first request — on a SASL listener, to authenticate — before it is closed.",
		note: "Samsa only, not a Kafka property."}.
		bind(i64(func(b *Broker) *int64 { return &b.Security.ConnectionsMaxSetupMs })),
	property{name: "quota.window.num", spec: atLeast(TypeInt, 1), def: "11",
		doc: "Number of samples client quotas are measured over."}.
		bind(i32(func(b *Broker) *int32 { return &b.Security.QuotaWindowNum })),
	property{name: "quota.window.size.seconds", spec: atLeast(TypeInt, 1), def: "1",
		doc: "Length of one client-quota sample."}.
		bind(i32(func(b *Broker) *int32 { return &b.Security.QuotaWindowSizeSeconds })),
	property{name: "controller.quota.window.num", spec: atLeast(TypeInt, 1), def: "11",
		doc: "Number of samples controller_mutation_rate quotas are measured over."}.
		bind(i32(func(b *Broker) *int32 { return &b.Security.ControllerQuotaWindowNum })),
	property{name: "controller.quota.window.size.seconds", spec: atLeast(TypeInt, 1), def: "1",
		doc:  "Length of one controller_mutation_rate sample.",
		note: "Kafka measures controller_mutation_rate with a token bucket; Samsa with the sampled rate of the other quotas, over controller.quota.window.num samples of this length."}.
		bind(i32(func(b *Broker) *int32 { return &b.Security.ControllerQuotaWindowSizeSeconds })),
	{name: "principal.builder.class", spec: anything, null: true, ignored: true,
		doc: "Kafka's pluggable principal builder.", note: "Principals are User:<name> from SASL or the mapped certificate subject, User:ANONYMOUS otherwise."},
}

// ParseProtocolMap parses listener.security.protocol.map: "NAME:PROTOCOL,...".
// Names are upper-cased.
func ParseProtocolMap(s string) (map[string]string, error) {
	m := map[string]string{}
	for _, item := range splitList(s) {
		name, proto, ok := strings.Cut(item, ":")
		name, proto = strings.ToUpper(strings.TrimSpace(name)), strings.ToUpper(strings.TrimSpace(proto))
		if !ok || name == "" {
			return nil, fmt.Errorf("%q is not NAME:PROTOCOL", item)
		}
		if !slices.Contains(protocols, proto) {
			return nil, fmt.Errorf("%q: the protocol must be one of %s", item, strings.Join(protocols, ", "))
		}
		if _, dup := m[name]; dup {
			return nil, fmt.Errorf("listener %s appears twice", name)
		}
		m[name] = proto
	}
	return m, nil
}

func formatProtocolMap(m map[string]string) string {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	slices.Sort(names)
	for i, n := range names {
		names[i] = n + ":" + m[n]
	}
	return strings.Join(names, ",")
}

func parseSuperUsers(s string) ([]string, error) {
	var out []string
	for p := range strings.SplitSeq(s, ";") {
		if p = strings.TrimSpace(p); p == "" {
			continue
		}
		typ, name, ok := strings.Cut(p, ":")
		if !ok || typ == "" || name == "" {
			return nil, fmt.Errorf("%q is not a principal Type:Name", p)
		}
		out = append(out, p)
	}
	return out, nil
}

func parseIPOverrides(s string) (map[string]int32, error) {
	m := map[string]int32{}
	for _, item := range splitList(s) {
		i := strings.LastIndex(item, ":")
		if i <= 0 {
			return nil, fmt.Errorf("%q is not host:count", item)
		}
		n, err := strconv.ParseInt(strings.TrimSpace(item[i+1:]), 10, 32)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("%q: %q is not a connection count", item, item[i+1:])
		}
		m[strings.TrimSpace(item[:i])] = int32(n)
	}
	return m, nil
}

func formatIPOverrides(m map[string]int32) string {
	hosts := make([]string, 0, len(m))
	for h := range m {
		hosts = append(hosts, h)
	}
	slices.Sort(hosts)
	for i, h := range hosts {
		hosts[i] = h + ":" + strconv.Itoa(int(m[h]))
	}
	return strings.Join(hosts, ",")
}

func cipherSuiteID(name string) (uint16, bool) {
	for _, s := range tls.CipherSuites() {
		if s.Name == name {
			return s.ID, true
		}
	}
	return 0, false
}

// CipherSuiteIDs maps ssl.cipher.suites names to Go's ids (names already checked).
func CipherSuiteIDs(names []string) []uint16 {
	var ids []uint16
	for _, n := range names {
		if id, ok := cipherSuiteID(n); ok {
			ids = append(ids, id)
		}
	}
	return ids
}

// listenerPrefix is the prefix of per-listener properties.
const listenerPrefix = "listener.name."

// splitListenerProperty splits listener.name.<listener>.<property> into the
// listener name (upper case) and the property. ok is false when name does not
// have the prefix; err says what is wrong with a prefixed name Samsa does not know.
func splitListenerProperty(name string) (listener, prop string, ok bool, err error) {
	rest, found := strings.CutPrefix(name, listenerPrefix)
	if !found {
		return "", "", false, nil
	}
	listener, prop, found = strings.Cut(rest, ".")
	if !found || listener == "" || prop == "" {
		return "", "", true, fmt.Errorf("%w: %s is not listener.name.<listener>.<property>", ErrUnknownProperty, name)
	}
	listener = strings.ToUpper(listener)
	if p, known := brokerIndex[prop]; known && p.listener {
		return listener, prop, true, nil
	}
	if mech, mprop, hasMech := strings.Cut(prop, "."); hasMech &&
		slices.Contains(mechanisms, strings.ToUpper(mech)) && slices.Contains(mechanismProperties, mprop) {
		return listener, strings.ToLower(mech) + "." + mprop, true, nil
	}
	return "", "", true, fmt.Errorf("%w: %s: %s cannot be set per listener", ErrUnknownProperty, name, prop)
}

// checkListenerProperty checks the value of a per-listener property.
func checkListenerProperty(prop, value string) error {
	if p, ok := brokerIndex[prop]; ok {
		return p.spec.check(value)
	}
	_, mprop, _ := strings.Cut(prop, ".")
	if mprop == "connections.max.reauth.ms" {
		return atLeast(TypeLong, 0).check(value)
	}
	return nil
}

// SecurityProtocol returns the security protocol of a listener name: from
// listener.security.protocol.map, where a controller listener that it does not
// name is PLAINTEXT when the map was not set. ok is false when the name has none.
func (b *Broker) SecurityProtocol(listener string) (string, bool) {
	if p, ok := b.Security.ProtocolMap[listener]; ok {
		return p, true
	}
	if !has(b.Raw, "listener.security.protocol.map") && contains(b.ControllerListenerNames, listener) {
		return ProtocolPlaintext, true
	}
	return "", false
}

// Setting is a value and the property it came from (listener-prefixed or not),
// so that messages name what to fix.
type Setting struct {
	Value    string
	Property string
}

// Set reports whether the setting has a value.
func (s Setting) Set() bool { return s.Value != "" }

// listenerSetting resolves a listener-prefixable property for one listener: its
// listener.name.<listener>. value, else the broker-wide value, else the default.
func (b *Broker) listenerSetting(listener, prop string) Setting {
	if v, ok := b.Security.ListenerOverrides[listener][prop]; ok {
		return Setting{Value: v, Property: listenerPrefix + strings.ToLower(listener) + "." + prop}
	}
	if v, ok := b.Raw[prop]; ok {
		return Setting{Value: strings.TrimSpace(v), Property: prop}
	}
	if p, ok := brokerIndex[prop]; ok && !p.null {
		return Setting{Value: p.def, Property: prop}
	}
	return Setting{Property: prop}
}

// ListenerSecurity is the security of one listener, resolved from its
// listener.name.<listener>. properties and the broker-wide ones.
type ListenerSecurity struct {
	Name     string
	Protocol string
	// TLS is set for SSL and SASL_SSL listeners.
	TLS *TLSSettings
	// SASL is set for SASL_PLAINTEXT and SASL_SSL listeners.
	SASL *SASLSettings
	// MaxConnections is max.connections for this listener.
	MaxConnections int32
	// MaxConnectionCreationRate is max.connection.creation.rate for this listener.
	MaxConnectionCreationRate int32
}

// TLSSettings are a listener's ssl.* properties.
type TLSSettings struct {
	KeystoreLocation, KeystoreKey, KeystoreCertificateChain, KeyPassword Setting
	TruststoreLocation, TruststoreCertificates                           Setting
	ClientAuth                                                           Setting // none, requested, required
	EnabledProtocols                                                     []string
	CipherSuites                                                         []string
	PrincipalMappingRules                                                Setting
	EndpointIdentification                                               bool
}

// SASLSettings are a listener's SASL properties.
type SASLSettings struct {
	// Mechanisms are the enabled mechanisms, upper case, in the order given.
	Mechanisms         []string
	MechanismsProperty string
	// JAAS maps a mechanism (upper case) to its sasl.jaas.config.
	JAAS map[string]Setting
	// CallbackHandler maps a mechanism to its sasl.server.callback.handler.class.
	CallbackHandler map[string]Setting
	// ReauthMs maps a mechanism to its connections.max.reauth.ms.
	ReauthMs map[string]int64
	OAuth    OAuthSettings
}

// OAuthSettings are the sasl.oauthbearer.* properties of a listener.
type OAuthSettings struct {
	JWKSURL          Setting
	JWKSRefreshMs    int64
	ExpectedAudience []string
	ExpectedIssuer   string
	SubClaim         string
	ScopeClaim       string
	ClockSkewSeconds int64
}

// ListenerSecurity resolves the security of listener name (upper case). ok is
// false when the name has no security protocol.
func (b *Broker) ListenerSecurity(name string) (ListenerSecurity, bool) {
	proto, ok := b.SecurityProtocol(name)
	if !ok {
		return ListenerSecurity{}, false
	}
	s := func(prop string) Setting { return b.listenerSetting(name, prop) }
	ls := ListenerSecurity{Name: name, Protocol: proto, MaxConnections: int32(mustInt(s("max.connections").Value)),
		MaxConnectionCreationRate: int32(mustInt(s("max.connection.creation.rate").Value))}
	if proto == ProtocolSSL || proto == ProtocolSASLSSL {
		ls.TLS = &TLSSettings{
			KeystoreLocation:         s("ssl.keystore.location"),
			KeystoreKey:              s("ssl.keystore.key"),
			KeystoreCertificateChain: s("ssl.keystore.certificate.chain"),
			KeyPassword:              s("ssl.key.password"),
			TruststoreLocation:       s("ssl.truststore.location"),
			TruststoreCertificates:   s("ssl.truststore.certificates"),
			ClientAuth:               s("ssl.client.auth"),
			EnabledProtocols:         splitList(s("ssl.enabled.protocols").Value),
			CipherSuites:             splitList(s("ssl.cipher.suites").Value),
			PrincipalMappingRules:    s("ssl.principal.mapping.rules"),
			EndpointIdentification:   s("ssl.endpoint.identification.algorithm").Value == "https",
		}
	}
	if proto == ProtocolSASLPlaintext || proto == ProtocolSASLSSL {
		mechs := s("sasl.enabled.mechanisms")
		sasl := &SASLSettings{
			Mechanisms:         splitList(strings.ToUpper(mechs.Value)),
			MechanismsProperty: mechs.Property,
			JAAS:               map[string]Setting{},
			CallbackHandler:    map[string]Setting{},
			ReauthMs:           map[string]int64{},
			OAuth: OAuthSettings{
				JWKSURL:          s("sasl.oauthbearer.jwks.endpoint.url"),
				JWKSRefreshMs:    mustInt(s("sasl.oauthbearer.jwks.endpoint.refresh.ms").Value),
				ExpectedAudience: splitList(s("sasl.oauthbearer.expected.audience").Value),
				ExpectedIssuer:   s("sasl.oauthbearer.expected.issuer").Value,
				SubClaim:         s("sasl.oauthbearer.sub.claim.name").Value,
				ScopeClaim:       s("sasl.oauthbearer.scope.claim.name").Value,
				ClockSkewSeconds: mustInt(s("sasl.oauthbearer.clock.skew.seconds").Value),
			},
		}
		reauth := mustInt(s("connections.max.reauth.ms").Value)
		for _, m := range sasl.Mechanisms {
			lower := strings.ToLower(m)
			if v := s(lower + ".sasl.jaas.config"); v.Set() {
				sasl.JAAS[m] = v
			}
			if v := s(lower + ".sasl.server.callback.handler.class"); v.Set() {
				sasl.CallbackHandler[m] = v
			}
			sasl.ReauthMs[m] = reauth
			if v := s(lower + ".connections.max.reauth.ms"); v.Set() {
				sasl.ReauthMs[m] = mustInt(v.Value)
			}
		}
		ls.SASL = sasl
	}
	return ls, true
}

// UsesJWKS reports whether OAUTHBEARER tokens are validated against the JWKS
// endpoint (rather than accepted unsecured).
func (s *SASLSettings) UsesJWKS() bool {
	return s.CallbackHandler[MechanismOAuthBearer].Value == jwksValidator || s.OAuth.JWKSURL.Set()
}

// InterBrokerListener returns the security of inter.broker.listener.name.
func (b *Broker) InterBrokerListener() (ListenerSecurity, bool) {
	return b.ListenerSecurity(b.InterBrokerListenerName)
}

// ControllerListenerSecurity returns the security of the first controller listener
// name, which nodes use to reach the controllers.
func (b *Broker) ControllerListenerSecurity() (ListenerSecurity, bool) {
	if len(b.ControllerListenerNames) == 0 {
		return ListenerSecurity{}, false
	}
	return b.ListenerSecurity(b.ControllerListenerNames[0])
}

// JAAS is a parsed sasl.jaas.config: one login module with its options.
type JAAS struct {
	LoginModule string
	Flag        string
	Options     map[string]string
}

// ParseJAAS parses a JAAS configuration entry as Kafka's sasl.jaas.config holds it:
//
//	org.apache.kafka.common.security.plain.PlainLoginModule required user_admin="secret" username="admin";
//
// Option values may be quoted (with \" and \\ escapes) or bare.
func ParseJAAS(s string) (JAAS, error) {
	j := JAAS{Options: map[string]string{}}
	p := jaasParser{s: strings.TrimSpace(s)}
	options := 0 // options read
	j.LoginModule = p.word()
	j.Flag = p.word()
	if j.LoginModule == "" {
		return j, fmt.Errorf("no login module")
	}
	switch j.Flag {
	case "required", "requisite", "sufficient", "optional":
	default:
		return j, fmt.Errorf("login module %s: control flag %q is not required, requisite, sufficient or optional", j.LoginModule, j.Flag)
	}
	// The entry holds passwords: an error quotes no text of it past the control flag
	// (not even an option name, which a value with an unquoted space can make of a
	// password's end); it says after how many options the mistake is.
	after := func() string {
		if options == 0 {
			return "after the control flag"
		}
		return fmt.Sprintf("after option %d", options)
	}
	for {
		p.skipSpace()
		if p.done() {
			return j, fmt.Errorf("the entry does not end with ';'")
		}
		if p.peek() == ';' {
			p.i++
			p.skipSpace()
			if !p.done() {
				return j, fmt.Errorf("text follows the ';' that ends the entry %s: only one login module is read, and a value holding ';' must be quoted", after())
			}
			return j, nil
		}
		key := p.until('=')
		if key == "" || p.done() || p.peek() != '=' {
			return j, fmt.Errorf("%s: text that is not name=value (a value holding spaces or ';' must be quoted)", after())
		}
		p.i++
		value, err := p.value()
		if err != nil {
			return j, fmt.Errorf("option %d: %v", options+1, err)
		}
		j.Options[key] = value
		options++
	}
}

type jaasParser struct {
	s string
	i int
}

func (p *jaasParser) done() bool { return p.i >= len(p.s) }
func (p *jaasParser) peek() byte { return p.s[p.i] }

func (p *jaasParser) skipSpace() {
	for !p.done() && strings.IndexByte(" \t\r\n", p.peek()) >= 0 {
		p.i++
	}
}

func (p *jaasParser) word() string {
	p.skipSpace()
	start := p.i
	for !p.done() && strings.IndexByte(" \t\r\n;", p.peek()) < 0 {
		p.i++
	}
	return p.s[start:p.i]
}

func (p *jaasParser) until(stop byte) string {
	start := p.i
	for !p.done() && p.peek() != stop && strings.IndexByte(" \t\r\n;", p.peek()) < 0 {
		p.i++
	}
	return p.s[start:p.i]
}

func (p *jaasParser) value() (string, error) {
	if p.done() {
		return "", fmt.Errorf("missing value")
	}
	if p.peek() != '"' {
		return p.word(), nil
	}
	p.i++
	var sb strings.Builder
	for !p.done() {
		c := p.peek()
		p.i++
		switch c {
		case '\\':
			if p.done() {
				return "", fmt.Errorf("unterminated quote")
			}
			sb.WriteByte(p.peek())
			p.i++
		case '"':
			return sb.String(), nil
		default:
			sb.WriteByte(c)
		}
	}
	return "", fmt.Errorf("unterminated quote")
}

// securityChecks are the cross-property checks of the security properties.
func (b *Broker) securityChecks() []error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, conflict(format, args...)) }
	for _, l := range b.Listeners {
		ls, ok := b.ListenerSecurity(l.Name)
		if !ok {
			add("listener %s has no security protocol: add %s:<PLAINTEXT|SSL|SASL_PLAINTEXT|SASL_SSL> to listener.security.protocol.map", l.Name, l.Name)
			continue
		}
		errs = append(errs, b.checkListener(ls)...)
	}
	for name := range b.Security.ListenerOverrides {
		if !slices.ContainsFunc(b.Listeners, func(l Listener) bool { return l.Name == name }) &&
			!contains(b.ControllerListenerNames, name) {
			add("%s%s.* is set but listeners has no listener %s", listenerPrefix, strings.ToLower(name), name)
		}
	}
	if has(b.Raw, "sasl.jaas.config") {
		add("sasl.jaas.config must be set per listener and mechanism: listener.name.<listener>.<mechanism>.sasl.jaas.config")
	}
	// The console in samsa serve has no credentials: it connects as a PLAINTEXT client.
	if b.ConsoleListener != "" && b.HasRole("broker") && !slices.ContainsFunc(b.ClientListeners(), func(l Listener) bool {
		p, _ := b.SecurityProtocol(l.Name)
		return p == ProtocolPlaintext
	}) {
		add("console.listener=%s needs a PLAINTEXT client listener to connect to; against SSL and SASL listeners run `samsa console` with its --tls-* and --sasl-* flags", b.ConsoleListener)
	}
	if b.Security.InterBrokerProtocol != "" && has(b.Raw, "inter.broker.listener.name") {
		add("security.inter.broker.protocol and inter.broker.listener.name are both set: set only one")
	}
	// A node that is the whole cluster (no controller.quorum.voters) has no other
	// broker to connect to.
	if voters, err := b.QuorumVoters(); err == nil && len(voters) > 0 && b.HasRole("broker") {
		errs = append(errs, b.checkNodeClient("inter-broker", b.InterBrokerListenerName, b.Security.SaslMechanismInterBroker, "sasl.mechanism.inter.broker.protocol")...)
	}
	if voters, err := b.QuorumVoters(); err == nil && len(voters) > 1 && len(b.ControllerListenerNames) > 0 {
		errs = append(errs, b.checkNodeClient("controller", b.ControllerListenerNames[0], b.Security.SaslMechanismController, "sasl.mechanism.controller.protocol")...)
	}
	return errs
}

// checkListener checks one listener's TLS and SASL settings.
func (b *Broker) checkListener(ls ListenerSecurity) []error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, conflict(format, args...)) }
	if t := ls.TLS; t != nil {
		inline := t.KeystoreKey.Set() || t.KeystoreCertificateChain.Set()
		switch {
		case t.KeystoreLocation.Set() && inline:
			add("listener %s: set either %s or %s with %s, not both", ls.Name, t.KeystoreLocation.Property, t.KeystoreKey.Property, t.KeystoreCertificateChain.Property)
		case inline && !(t.KeystoreKey.Set() && t.KeystoreCertificateChain.Set()):
			add("listener %s (%s) needs both %s and %s", ls.Name, ls.Protocol, t.KeystoreKey.Property, t.KeystoreCertificateChain.Property)
		case !t.KeystoreLocation.Set() && !inline:
			add("listener %s is %s but has no certificate: set %s (a PEM file with the key and certificate chain)", ls.Name, ls.Protocol, t.KeystoreLocation.Property)
		}
		if t.ClientAuth.Value != "none" && !t.TruststoreLocation.Set() && !t.TruststoreCertificates.Set() {
			add("listener %s: %s=%s needs a trust store to verify client certificates: set %s", ls.Name, t.ClientAuth.Property, t.ClientAuth.Value, t.TruststoreLocation.Property)
		}
	}
	if s := ls.SASL; s != nil {
		if len(s.Mechanisms) == 0 {
			add("listener %s is %s but %s is empty", ls.Name, ls.Protocol, s.MechanismsProperty)
		}
		for _, m := range s.Mechanisms {
			lower := strings.ToLower(m)
			jaasProp := listenerPrefix + strings.ToLower(ls.Name) + "." + lower + ".sasl.jaas.config"
			switch m {
			case MechanismGSSAPI:
				add("listener %s: %s=%s: GSSAPI (Kerberos) is not implemented; enable PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER", ls.Name, s.MechanismsProperty, strings.Join(s.Mechanisms, ","))
			case MechanismPlain:
				j, ok := s.JAAS[m]
				if !ok {
					add("listener %s enables PLAIN but has no users: set %s with PlainLoginModule's user_<name>=\"<password>\" options", ls.Name, jaasProp)
					break
				}
				errs = append(errs, checkJAAS(j, "PlainLoginModule")...)
			case MechanismOAuthBearer:
				if _, ok := s.JAAS[m]; !ok && !s.UsesJWKS() {
					add("listener %s enables OAUTHBEARER with neither a JWKS nor a JAAS config: set %s (production) or %s with OAuthBearerLoginModule (unsecured tokens, development)",
						ls.Name, s.OAuth.JWKSURL.Property, jaasProp)
				}
				if h, ok := s.CallbackHandler[m]; ok && h.Value == jwksValidator && !s.OAuth.JWKSURL.Set() {
					add("listener %s: %s is the JWKS validator but %s is not set", ls.Name, h.Property, s.OAuth.JWKSURL.Property)
				}
				if j, ok := s.JAAS[m]; ok {
					errs = append(errs, checkJAAS(j, "")...)
				}
			default: // SCRAM: credentials live in the metadata log.
				if j, ok := s.JAAS[m]; ok {
					errs = append(errs, checkJAAS(j, "")...)
				}
			}
		}
		for m, h := range s.CallbackHandler {
			if m != MechanismOAuthBearer || h.Value != jwksValidator {
				add("%s=%s: Samsa loads no classes; only %s for OAUTHBEARER is understood", h.Property, h.Value, jwksValidator)
			}
		}
	}
	return errs
}

func checkJAAS(j Setting, module string) []error {
	parsed, err := ParseJAAS(j.Value)
	if err != nil {
		return []error{fmt.Errorf("%w: %s: %v", ErrInvalidValue, j.Property, err)}
	}
	if module != "" && !strings.HasSuffix(parsed.LoginModule, module) {
		return []error{fmt.Errorf("%w: %s: login module %s, expected org.apache.kafka.common.security.plain.%s", ErrInvalidValue, j.Property, parsed.LoginModule, module)}
	}
	return nil
}

// checkNodeClient checks that this node can connect to its peers' listener name
// (inter-broker or controller): a SASL listener needs a mechanism it enables and
// this node's username and password in that mechanism's JAAS config.
func (b *Broker) checkNodeClient(what, listener, mechanism, mechanismProperty string) []error {
	ls, ok := b.ListenerSecurity(listener)
	if !ok || ls.SASL == nil {
		return nil
	}
	if !slices.Contains(ls.SASL.Mechanisms, mechanism) {
		return []error{conflict("the %s listener %s is %s: %s=%s must be one of its mechanisms (%s)",
			what, listener, ls.Protocol, mechanismProperty, mechanism, strings.Join(ls.SASL.Mechanisms, ","))}
	}
	if _, _, err := b.NodeCredentials(ls, mechanism); err != nil {
		return []error{conflict("%s", err.Error())}
	}
	return nil
}

// NodeCredentials returns the username and password this node authenticates with
// to a SASL listener of its peers, from that listener's JAAS config of mechanism.
func (b *Broker) NodeCredentials(ls ListenerSecurity, mechanism string) (user, password string, err error) {
	j, ok := ls.SASL.JAAS[mechanism]
	prop := listenerPrefix + strings.ToLower(ls.Name) + "." + strings.ToLower(mechanism) + ".sasl.jaas.config"
	if !ok {
		return "", "", fmt.Errorf("%s needs username and password options for this node to log in to listener %s with %s", prop, ls.Name, mechanism)
	}
	parsed, err := ParseJAAS(j.Value)
	if err != nil {
		return "", "", err
	}
	user, password = parsed.Options["username"], parsed.Options["password"]
	if user == "" {
		return "", "", fmt.Errorf("%s needs username and password options for this node to log in to listener %s with %s", j.Property, ls.Name, mechanism)
	}
	return user, password, nil
}

// DelegationTokenKey is the secret delegation tokens' HMACs are derived from:
// delegation.token.secret.key, else the deprecated delegation.token.master.key; ""
// when delegation tokens are disabled.
func (b *Broker) DelegationTokenKey() string {
	if b.Security.DelegationTokenSecret != "" {
		return b.Security.DelegationTokenSecret
	}
	return b.Security.DelegationTokenMasterKey
}
