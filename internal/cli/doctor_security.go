package cli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/samsa-streaming/samsa/internal/config"
)

// Security finding codes.
const (
	CodePlaintextWithAuthorizer = "plaintext_listener_with_authorizer"
	CodeAllowEveryoneNoACL      = "allow_everyone_if_no_acl"
)

// diagnoseBroker flags the security settings that leave a broker open: a PLAINTEXT
// listener reachable from other hosts while an authorizer is on (its clients are
// all User:ANONYMOUS, and their traffic is readable on the network), and
// allow.everyone.if.no.acl.found=true (every resource without an ACL is open).
func diagnoseBroker(b BrokerSnapshot) []Finding {
	if b.Configs == nil {
		return nil
	}
	var out []Finding
	authorizer := b.Configs["authorizer.class.name"]
	if authorizer != "" {
		protocols, _ := config.ParseProtocolMap(b.Configs["listener.security.protocol.map"])
		listeners, _ := config.ParseListeners(b.Configs["listeners"])
		controllers := splitNames(b.Configs["controller.listener.names"])
		for _, l := range listeners {
			proto, ok := protocols[l.Name]
			if !ok && controllers[l.Name] {
				proto = config.ProtocolPlaintext
			}
			if proto != config.ProtocolPlaintext || isLoopback(l.Host) {
				continue
			}
			out = append(out, Finding{
				Code: CodePlaintextWithAuthorizer, Severity: severityWarning,
				Message: fmt.Sprintf("broker %d: listener %s is PLAINTEXT on an address other hosts can reach, while an authorizer is on: its clients are all User:ANONYMOUS and their traffic (passwords included, for SASL_PLAINTEXT) is readable on the network",
					b.ID, l),
				Numbers: map[string]int64{"broker": int64(b.ID), "port": int64(l.Port)},
				Fix:     fmt.Sprintf("map %s to SSL or SASL_SSL in listener.security.protocol.map, or bind it to 127.0.0.1", l.Name),
			})
		}
	}
	if strings.EqualFold(b.Configs["allow.everyone.if.no.acl.found"], "true") {
		out = append(out, Finding{
			Code: CodeAllowEveryoneNoACL, Severity: severityWarning,
			Message: fmt.Sprintf("broker %d: allow.everyone.if.no.acl.found=true: every principal may do anything to a topic, group or transactional id that has no ACL", b.ID),
			Numbers: map[string]int64{"broker": int64(b.ID)},
			Fix:     "set allow.everyone.if.no.acl.found=false and grant what each client needs with `samsa acl create`",
		})
	}
	return out
}

func splitNames(s string) map[string]bool {
	out := map[string]bool{}
	for n := range strings.SplitSeq(s, ",") {
		if n = strings.ToUpper(strings.TrimSpace(n)); n != "" {
			out[n] = true
		}
	}
	return out
}

// isLoopback reports whether a listener host only accepts local connections.
func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// brokers lists the live brokers with their racks and, withConfigs (the whole
// cluster in scope), their configurations for the security checks and their offline
// log directories.
func (c *collector) brokers(ctx context.Context, md kadm.Metadata, withConfigs bool) []BrokerSnapshot {
	var out []BrokerSnapshot
	var dirs kadm.DescribedAllLogDirs
	var versions kadm.BrokersApiVersions
	if withConfigs {
		var err error
		if dirs, err = c.adm.DescribeAllLogDirs(ctx, nil); err != nil {
			c.skip("log directory check: cannot describe log directories: %v", err)
		}
		if versions, err = c.adm.ApiVersions(ctx); err != nil && len(versions) == 0 {
			c.skip("build check: cannot ask the brokers' API versions: %v", err)
		}
	}
	for _, b := range md.Brokers {
		bs := BrokerSnapshot{ID: b.NodeID}
		if b.Rack != nil {
			bs.Rack = *b.Rack
		}
		for _, d := range dirs[b.NodeID] {
			if errors.Is(d.Err, kerr.KafkaStorageError) {
				bs.OfflineLogDirs = append(bs.OfflineLogDirs, d.Dir)
			}
		}
		slices.Sort(bs.OfflineLogDirs)
		if v, ok := versions[b.NodeID]; ok && v.Err == nil {
			bs.APIVersions = map[int16]int16{}
			v.EachKeySorted(func(key, _, max int16) { bs.APIVersions[key] = max })
		}
		if !withConfigs {
			out = append(out, bs)
			continue
		}
		rcs, err := c.adm.DescribeBrokerConfigs(ctx, b.NodeID)
		switch {
		case err != nil && len(rcs) == 0:
			c.skip("broker security checks: cannot describe broker configs: %v", err)
		case len(rcs) == 1 && rcs[0].Err != nil:
			c.skip("broker security checks for broker %d: %v", b.NodeID, rcs[0].Err)
		case len(rcs) == 1:
			bs.Configs = map[string]string{}
			for _, cfg := range rcs[0].Configs {
				bs.Configs[cfg.Key] = cfg.MaybeValue()
			}
		}
		out = append(out, bs)
	}
	return out
}
