package console

import (
	"strings"
	"testing"
	"time"
)

func TestConfigValidate(t *testing.T) {
	if err := (Config{Brokers: []string{"127.0.0.1:9092"}}).Validate(); err != nil {
		t.Errorf("defaults: %v", err)
	}
	err := Config{Brokers: []string{"nohost"}, Listen: "8080", Timeout: -time.Second, LagInterval: time.Millisecond,
		PageSize: -1, MessageLimit: 600, MaxMessageLimit: 500}.Validate()
	if err == nil {
		t.Fatal("a bad config validated")
	}
	for _, want := range []string{`brokers: "nohost"`, `listen: "8080"`, "timeout", "lag interval", "page size", "message limit 600"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not name %q:\n%v", want, err)
		}
	}
	if err := (Config{}).Validate(); err == nil || !strings.Contains(err.Error(), "brokers") {
		t.Errorf("no brokers: %v", err)
	}
}
