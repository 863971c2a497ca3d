package console

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"
)

// A console that listens on every address (as it must inside a container whose port
// is published on the host's 127.0.0.1 only) is as open to DNS rebinding as one on
// 127.0.0.1: a page of evil.example whose name was re-pointed at the console's address
// is same-origin with it, so its requests carry Host: evil.example and pass the
// cross-origin check. The console answers only IP literals, localhost, its own listen
// name and the hosts it is told to allow.
func TestHostCheckOnEveryListenAddress(t *testing.T) {
	newHandler := func(t *testing.T, listen string, allowed ...string) http.Handler {
		t.Helper()
		s, err := New(Config{Brokers: []string{"127.0.0.1:1"}, Listen: listen, Timeout: time.Second, AllowedHosts: allowed})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s.Handler()
	}
	status := func(h http.Handler, method, host string) int {
		var body *strings.Reader
		if method == http.MethodPost {
			body = strings.NewReader(url.Values{"name": {"rebound"}, "partitions": {"1"}}.Encode())
		} else {
			body = strings.NewReader("")
		}
		r := httptest.NewRequest(method, "/topics", body)
		r.Host = host
		if method == http.MethodPost {
			r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			r.Header.Set("Origin", "http://"+host) // same-origin, as a rebound page is
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Code
	}
	for _, tc := range []struct {
		listen  string
		allowed []string
		host    string
		refused bool
	}{
		{"0.0.0.0:8080", nil, "evil.example:8080", true},
		{":8080", nil, "evil.example:8080", true},
		{"[::]:8080", nil, "evil.example", true},
		{"10.1.2.3:8080", nil, "evil.example:8080", true},
		{"0.0.0.0:8080", nil, "localhost:8080", false},
		{"0.0.0.0:8080", nil, "127.0.0.1:8080", false},
		{"0.0.0.0:8080", nil, "10.1.2.3:8080", false},
		{"0.0.0.0:8080", nil, "[fd00::1]:8080", false},
		{"console.internal:8080", nil, "console.internal:8080", false},
		{"0.0.0.0:8080", []string{"console.internal"}, "Console.Internal:8080", false},
		{"0.0.0.0:8080", []string{"console.internal"}, "evil.example:8080", true},
		{"0.0.0.0:8080", []string{"*"}, "anything.example:8080", false},
		{"127.0.0.1:8080", nil, "evil.example:8080", true},
		{"127.0.0.1:8080", []string{"console.internal"}, "console.internal:8080", false},
	} {
		h := newHandler(t, tc.listen, tc.allowed...)
		for _, method := range []string{http.MethodGet, http.MethodPost} {
			got := status(h, method, tc.host)
			if refused := got == http.StatusMisdirectedRequest; refused != tc.refused {
				t.Errorf("listen %s, allowed %q: %s /topics with Host %s: status %d, want refused (421) = %v",
					tc.listen, tc.allowed, method, tc.host, got, tc.refused)
			}
		}
	}
}

func TestAllowedHostsValidated(t *testing.T) {
	for _, h := range []string{"", "evil.example:8080", "http://evil.example"} {
		err := Config{Brokers: []string{"127.0.0.1:9092"}, AllowedHosts: []string{h}}.Validate()
		if err == nil || !strings.Contains(err.Error(), "allowed hosts") {
			t.Errorf("allowed host %q: %v, want an error naming allowed hosts", h, err)
		}
	}
}
