package config

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

const plainJAAS = `org.apache.kafka.common.security.plain.PlainLoginModule required user_admin="admin-secret" user_bob="bob-secret";`

// issueExample is the configuration of issue 15: four listeners, PLAIN from JAAS on
// the SASL ones, PEM key and trust stores, the StandardAuthorizer.
func issueExample() []string {
	ls := "PLAINTEXT://127.0.0.1:9092,SASL_PLAINTEXT://127.0.0.1:9093,SSL://127.0.0.1:9094,SASL_SSL://127.0.0.1:9095"
	return []string{
		"node.id=1",
		"listeners=" + ls,
		"advertised.listeners=" + ls,
		"sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
		"listener.name.sasl_plaintext.plain.sasl.jaas.config=" + plainJAAS,
		"listener.name.sasl_ssl.plain.sasl.jaas.config=" + plainJAAS,
		"ssl.keystore.type=PEM", "ssl.keystore.location=server.pem",
		"ssl.truststore.type=PEM", "ssl.truststore.location=ca.pem",
		"authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
		"super.users=User:admin",
	}
}

func TestLoadIssueExample(t *testing.T) {
	b, err := Load("", issueExample())
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"PLAINTEXT": "PLAINTEXT", "SASL_PLAINTEXT": "SASL_PLAINTEXT", "SSL": "SSL", "SASL_SSL": "SASL_SSL"}
	for name, proto := range want {
		ls, ok := b.ListenerSecurity(name)
		if !ok || ls.Protocol != proto {
			t.Errorf("ListenerSecurity(%s) = %+v, %t; want protocol %s", name, ls, ok, proto)
		}
		if (ls.TLS != nil) != strings.HasSuffix(proto, "SSL") {
			t.Errorf("%s: TLS = %+v", name, ls.TLS)
		}
		if (ls.SASL != nil) != strings.HasPrefix(proto, "SASL") {
			t.Errorf("%s: SASL = %+v", name, ls.SASL)
		}
	}
	ls, _ := b.ListenerSecurity("SASL_SSL")
	if got := ls.SASL.Mechanisms; !reflect.DeepEqual(got, []string{"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"}) {
		t.Errorf("mechanisms = %v", got)
	}
	if j := ls.SASL.JAAS["PLAIN"]; j.Value != plainJAAS || j.Property != "listener.name.sasl_ssl.plain.sasl.jaas.config" {
		t.Errorf("JAAS = %+v", j)
	}
	if got := ls.TLS.KeystoreLocation; got.Value != "server.pem" || got.Property != "ssl.keystore.location" {
		t.Errorf("keystore = %+v", got)
	}
	if b.Security.Authorizer != StandardAuthorizer || !reflect.DeepEqual(b.Security.SuperUsers, []string{"User:admin"}) {
		t.Errorf("authorizer %q, super users %v", b.Security.Authorizer, b.Security.SuperUsers)
	}
	if b.InterBrokerListenerName != "PLAINTEXT" {
		t.Errorf("inter-broker listener %s", b.InterBrokerListenerName)
	}
}

func TestListenerPrefixWins(t *testing.T) {
	b, err := Load("", []string{
		"listeners=PLAINTEXT://127.0.0.1:9092,INTERNAL://127.0.0.1:9093",
		"listener.security.protocol.map=PLAINTEXT:PLAINTEXT,INTERNAL:SSL,CONTROLLER:PLAINTEXT",
		"ssl.keystore.location=/etc/a.pem",
		"listener.name.internal.ssl.keystore.location=/etc/internal.pem",
		"listener.name.internal.ssl.client.auth=required",
		"listener.name.internal.ssl.truststore.location=/etc/ca.pem",
		"listener.name.internal.max.connections=7",
	})
	if err != nil {
		t.Fatal(err)
	}
	ls, ok := b.ListenerSecurity("INTERNAL")
	if !ok || ls.TLS == nil {
		t.Fatalf("INTERNAL: %+v %t", ls, ok)
	}
	if ls.TLS.KeystoreLocation != (Setting{"/etc/internal.pem", "listener.name.internal.ssl.keystore.location"}) {
		t.Errorf("keystore = %+v", ls.TLS.KeystoreLocation)
	}
	if ls.TLS.ClientAuth.Value != "required" || ls.MaxConnections != 7 {
		t.Errorf("client auth %q, max connections %d", ls.TLS.ClientAuth.Value, ls.MaxConnections)
	}
	if plain, _ := b.ListenerSecurity("PLAINTEXT"); plain.MaxConnections != 1<<31-1 {
		t.Errorf("PLAINTEXT max connections %d", plain.MaxConnections)
	}
}

func TestSecurityProblemsNameTheProperty(t *testing.T) {
	tests := []struct {
		name      string
		overrides []string
		want      []string
	}{
		{"listener without protocol", []string{"listeners=PLAINTEXT://127.0.0.1:9092,EXTERNAL://127.0.0.1:9093"},
			[]string{"listener EXTERNAL has no security protocol", "listener.security.protocol.map"}},
		{"explicit map must name the controller", []string{
			"listeners=PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093",
			"listener.security.protocol.map=PLAINTEXT:PLAINTEXT"},
			[]string{"listener CONTROLLER has no security protocol"}},
		{"PLAIN without users", []string{"listeners=SASL_PLAINTEXT://127.0.0.1:9092", "sasl.enabled.mechanisms=PLAIN"},
			[]string{"listener.name.sasl_plaintext.plain.sasl.jaas.config"}},
		{"GSSAPI", []string{"listeners=SASL_PLAINTEXT://127.0.0.1:9092"},
			[]string{"sasl.enabled.mechanisms", "GSSAPI (Kerberos) is not implemented"}},
		{"SSL without certificate", []string{"listeners=SSL://127.0.0.1:9092"},
			[]string{"listener SSL is SSL but has no certificate", "ssl.keystore.location"}},
		{"JKS", []string{"listeners=SSL://127.0.0.1:9092", "ssl.keystore.location=k.jks", "ssl.keystore.type=JKS"},
			[]string{"ssl.keystore.type", "PEM"}},
		{"client auth without trust store", []string{"listeners=SSL://127.0.0.1:9092", "ssl.keystore.location=k.pem", "ssl.client.auth=required"},
			[]string{"ssl.client.auth=required needs a trust store", "ssl.truststore.location"}},
		{"prefix for an unknown listener", []string{"listener.name.nosuch.ssl.client.auth=none"},
			[]string{"listener.name.nosuch.*"}},
		{"unprefixable property", []string{"listener.name.plaintext.num.partitions=3"},
			[]string{"num.partitions cannot be set per listener"}},
		{"bad prefixed value", []string{"listener.name.plaintext.ssl.client.auth=maybe"},
			[]string{"listener.name.plaintext.ssl.client.auth"}},
		{"unprefixed JAAS", []string{"sasl.jaas.config=" + plainJAAS},
			[]string{"listener.name.<listener>.<mechanism>.sasl.jaas.config"}},
		{"bad JAAS", []string{"listeners=SASL_PLAINTEXT://127.0.0.1:9092", "sasl.enabled.mechanisms=PLAIN",
			`listener.name.sasl_plaintext.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_a="x"`},
			[]string{"listener.name.sasl_plaintext.plain.sasl.jaas.config", "does not end with ';'"}},
		{"both inter-broker settings", []string{"security.inter.broker.protocol=PLAINTEXT", "inter.broker.listener.name=PLAINTEXT"},
			[]string{"set only one"}},
		{"SASL inter-broker without credentials", []string{
			"listeners=SASL_PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093", "controller.quorum.voters=1@127.0.0.1:9093", "security.inter.broker.protocol=SASL_PLAINTEXT",
			"sasl.enabled.mechanisms=PLAIN", "sasl.mechanism.inter.broker.protocol=PLAIN",
			"listener.name.sasl_plaintext.plain.sasl.jaas.config=" + plainJAAS},
			[]string{"username and password"}},
		{"SASL inter-broker mechanism not enabled", []string{
			"listeners=SASL_PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093", "controller.quorum.voters=1@127.0.0.1:9093", "inter.broker.listener.name=SASL_PLAINTEXT",
			"sasl.enabled.mechanisms=SCRAM-SHA-256"},
			[]string{"sasl.mechanism.inter.broker.protocol=GSSAPI must be one of its mechanisms"}},
		{"OAUTHBEARER without a validator", []string{"listeners=SASL_PLAINTEXT://127.0.0.1:9092", "sasl.enabled.mechanisms=OAUTHBEARER"},
			[]string{"sasl.oauthbearer.jwks.endpoint.url"}},
		{"unknown authorizer", []string{"authorizer.class.name=com.example.Mine"}, []string{"authorizer.class.name"}},
		{"bad super users", []string{"super.users=admin"}, []string{"super.users"}},
		{"unknown cipher", []string{"ssl.cipher.suites=TLS_NOPE"}, []string{"ssl.cipher.suites"}},
		{"console without a PLAINTEXT listener", []string{"listeners=SASL_PLAINTEXT://127.0.0.1:9092", "sasl.enabled.mechanisms=SCRAM-SHA-256",
			"console.listener=127.0.0.1:8080"},
			[]string{"console.listener=127.0.0.1:8080 needs a PLAINTEXT client listener"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Load("", tt.overrides)
			if err == nil {
				t.Fatalf("Load = nil, want an error mentioning %q", tt.want)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Load = %v\nwant it to mention %q", err, w)
				}
			}
			if !errors.Is(err, ErrInvalidConfig) && !errors.Is(err, ErrInvalidValue) && !errors.Is(err, ErrUnknownProperty) {
				t.Errorf("Load = %v wraps no sentinel", err)
			}
		})
	}
}

// The console in samsa serve connects through a PLAINTEXT client listener, which
// may sit beside secured ones.
func TestConsoleListenerBesideSecuredListeners(t *testing.T) {
	b, err := Load("", []string{"listeners=SASL_SSL://127.0.0.1:9093,PLAINTEXT://127.0.0.1:9092",
		"sasl.enabled.mechanisms=SCRAM-SHA-256", "ssl.keystore.location=k.pem", "console.listener=127.0.0.1:8080"})
	if err != nil {
		t.Fatal(err)
	}
	if b.ConsoleListener != "127.0.0.1:8080" {
		t.Fatalf("console.listener = %q", b.ConsoleListener)
	}
}

func TestInterBrokerSASLCredentials(t *testing.T) {
	b, err := Load("", []string{
		"listeners=SASL_SSL://127.0.0.1:9092", "security.inter.broker.protocol=SASL_SSL",
		"ssl.keystore.location=k.pem",
		"sasl.enabled.mechanisms=SCRAM-SHA-512", "sasl.mechanism.inter.broker.protocol=SCRAM-SHA-512",
		`listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="broker" password="b\"s";`,
	})
	if err != nil {
		t.Fatal(err)
	}
	if b.InterBrokerListenerName != "SASL_SSL" {
		t.Fatalf("inter-broker listener %s", b.InterBrokerListenerName)
	}
	ls, _ := b.InterBrokerListener()
	user, pass, err := b.NodeCredentials(ls, "SCRAM-SHA-512")
	if err != nil || user != "broker" || pass != `b"s` {
		t.Fatalf("NodeCredentials = %q, %q, %v", user, pass, err)
	}
}

func TestParseJAAS(t *testing.T) {
	j, err := ParseJAAS(`org.apache.kafka.common.security.plain.PlainLoginModule required
		username="admin" password="a b;c" user_admin="admin-secret" bare=value;`)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"username": "admin", "password": "a b;c", "user_admin": "admin-secret", "bare": "value"}
	if j.LoginModule != "org.apache.kafka.common.security.plain.PlainLoginModule" || j.Flag != "required" || !reflect.DeepEqual(j.Options, want) {
		t.Fatalf("ParseJAAS = %+v", j)
	}
	for _, bad := range []string{"", "Module", "Module maybe;", `Module required a="x`, "Module required a;", "M required; N required;"} {
		if _, err := ParseJAAS(bad); err == nil {
			t.Errorf("ParseJAAS(%q) = nil error", bad)
		}
	}
}

// A JAAS entry holds passwords: the error for a malformed one (which ends up in a
// log line or on a client command's stderr) names no text of the entry but the
// login module, the control flag and the option names before the mistake.
func TestParseJAASErrorsEchoNoSecret(t *testing.T) {
	const module = "org.apache.kafka.common.security.plain.PlainLoginModule required "
	for _, bad := range []string{
		module + `username="alice" password=correct horse battery;`,    // unquoted spaces
		module + `username="alice" password=correct;horse-battery;`,    // unquoted ';'
		module + `username="alice" password="correct"; horse-battery;`, // text after the entry
		module + `username="alice" user_bob=correct horse-battery=x`,   // no final ';'
		module + `username="alice" password="correct\" horse-battery`,  // unterminated quote
	} {
		_, err := ParseJAAS(bad)
		if err == nil {
			t.Errorf("ParseJAAS(%q) = nil error", bad)
			continue
		}
		for _, secret := range []string{"correct", "horse", "battery", "staple"} {
			if strings.Contains(err.Error(), secret) {
				t.Errorf("ParseJAAS(%q) = %q, which shows part of a password (%q)", bad, err, secret)
			}
		}
	}
}
