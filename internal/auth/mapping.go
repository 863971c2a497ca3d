package auth

import (
	"crypto/x509"
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// PrincipalMapper turns a client certificate's subject into a user name with the
// rules of ssl.principal.mapping.rules, as Kafka's SslPrincipalMapper does:
//
//	RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L, RULE:^CN=(.*?),.*$/$1/, DEFAULT
//
// Rules are tried in order; the first whose pattern matches the whole subject
// (RFC 2253, most specific first: "CN=alice,OU=eng,O=acme") gives the name — the
// replacement with $1… filled in, lower- (L) or upper-cased (U) — and DEFAULT gives
// the subject unchanged. A subject no rule matches is refused.
type PrincipalMapper struct {
	rules []mappingRule
}

type mappingRule struct {
	isDefault   bool
	pattern     *regexp.Regexp
	replacement string
	caseChange  byte // 0, 'L' or 'U'
}

// ErrNoMappingRule: no rule of ssl.principal.mapping.rules matches a subject.
var ErrNoMappingRule = errors.New("no ssl.principal.mapping.rules rule matches the certificate's subject")

var javaGroup = regexp.MustCompile(`\$(\d+)`)

// ParsePrincipalMappingRules parses ssl.principal.mapping.rules.
func ParsePrincipalMappingRules(s string) (*PrincipalMapper, error) {
	m := &PrincipalMapper{}
	rest := strings.TrimSpace(s)
	if rest == "" {
		rest = "DEFAULT"
	}
	for rest != "" {
		var r mappingRule
		switch {
		case strings.HasPrefix(rest, "DEFAULT"):
			r.isDefault = true
			rest = rest[len("DEFAULT"):]
		case strings.HasPrefix(rest, "RULE:"):
			rest = rest[len("RULE:"):]
			pattern, after, ok := cutUnescaped(rest, '/')
			if !ok {
				return nil, fmt.Errorf("rule %q: no '/' after the pattern", "RULE:"+rest)
			}
			replacement, after, ok := cutUnescaped(after, '/')
			if !ok {
				return nil, fmt.Errorf("rule %q: no '/' after the replacement", "RULE:"+rest)
			}
			re, err := regexp.Compile("^(?:" + pattern + ")$")
			if err != nil {
				return nil, fmt.Errorf("rule pattern %q: %v", pattern, err)
			}
			r.pattern, r.replacement = re, javaGroup.ReplaceAllString(replacement, "$${$1}")
			if after != "" && (after[0] == 'L' || after[0] == 'U') {
				r.caseChange, after = after[0], after[1:]
			}
			rest = after
		default:
			return nil, fmt.Errorf("%q is neither DEFAULT nor RULE:pattern/replacement/[LU]", rest)
		}
		m.rules = append(m.rules, r)
		rest = strings.TrimLeft(rest, " \t")
		if rest != "" {
			if rest[0] != ',' {
				return nil, fmt.Errorf("expected ',' between rules at %q", rest)
			}
			rest = strings.TrimLeft(rest[1:], " \t")
		}
	}
	return m, nil
}

// cutUnescaped splits s at the first sep not preceded by a backslash.
func cutUnescaped(s string, sep byte) (before, after string, ok bool) {
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case sep:
			return s[:i], s[i+1:], true
		}
	}
	return s, "", false
}

// Name maps a certificate subject (RFC 2253) to a user name.
func (m *PrincipalMapper) Name(subject string) (string, error) {
	for _, r := range m.rules {
		if r.isDefault {
			return subject, nil
		}
		if !r.pattern.MatchString(subject) {
			continue
		}
		name := r.pattern.ReplaceAllString(subject, r.replacement)
		switch r.caseChange {
		case 'L':
			name = strings.ToLower(name)
		case 'U':
			name = strings.ToUpper(name)
		}
		return name, nil
	}
	return "", fmt.Errorf("%w: %s", ErrNoMappingRule, subject)
}

// CertificatePrincipal is the principal of a verified client certificate.
func (m *PrincipalMapper) CertificatePrincipal(cert *x509.Certificate) (Principal, error) {
	name, err := m.Name(cert.Subject.String())
	if err != nil {
		return Principal{}, err
	}
	return User(name), nil
}
