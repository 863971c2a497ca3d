package auth

import (
	"errors"
	"fmt"
	"strings"
)

// Principal is who a connection authenticated as, Kafka's KafkaPrincipal: a type
// (always "User" for principals Samsa builds) and a name.
type Principal struct {
	Type string
	Name string
}

// UserType is the type of every principal a listener hands out.
const UserType = "User"

// Anonymous is the principal of a connection that did not authenticate
// (PLAINTEXT, or SSL without a client certificate).
var Anonymous = Principal{Type: UserType, Name: "ANONYMOUS"}

// User returns the principal User:name.
func User(name string) Principal { return Principal{Type: UserType, Name: name} }

// String is the principal as Kafka writes it: "User:alice".
func (p Principal) String() string { return p.Type + ":" + p.Name }

// IsZero reports whether p is the zero value (no principal set).
func (p Principal) IsZero() bool { return p == Principal{} }

// ErrInvalidPrincipal marks a principal string that is not Type:Name.
var ErrInvalidPrincipal = errors.New("invalid principal")

// ParsePrincipal parses "Type:Name" (the name may contain ':'; "User:*" is the
// wildcard principal of ACLs).
func ParsePrincipal(s string) (Principal, error) {
	typ, name, ok := strings.Cut(s, ":")
	if !ok || typ == "" || name == "" {
		return Principal{}, fmt.Errorf("%w: %q is not Type:Name (e.g. User:alice)", ErrInvalidPrincipal, s)
	}
	return Principal{Type: typ, Name: name}, nil
}
