package config

import (
	"errors"
	"fmt"
	"math"
	"net"
	"strconv"
	"strings"
)

// Kafka's ConfigType, as carried in DescribeConfigs responses (v3+).
const (
	TypeUnknown  int8 = 0
	TypeBoolean  int8 = 1
	TypeString   int8 = 2
	TypeInt      int8 = 3
	TypeShort    int8 = 4
	TypeLong     int8 = 5
	TypeDouble   int8 = 6
	TypeList     int8 = 7
	TypeClass    int8 = 8
	TypePassword int8 = 9
)

// Kafka's ConfigSource, as carried in DescribeConfigs responses (v1+).
const (
	SourceUnknown              int8 = 0
	SourceDynamicTopic         int8 = 1
	SourceDynamicBroker        int8 = 2
	SourceDynamicDefaultBroker int8 = 3
	SourceStaticBroker         int8 = 4
	SourceDefault              int8 = 5
)

// valueSpec is the type and the valid range of one property. check returns a
// description of what is wrong with s (without the property name), or nil.
type valueSpec interface {
	kafkaType() int8
	check(s string) error
	validValues() string // for the docs, "" when anything of the type goes
}

// integer is an INT, SHORT or LONG with inclusive bounds.
type integer struct {
	typ      int8
	min, max int64
}

func (v integer) kafkaType() int8 { return v.typ }

func (v integer) bits() int {
	switch v.typ {
	case TypeShort:
		return 16
	case TypeInt:
		return 32
	}
	return 64
}

func (v integer) parse(s string) (int64, error) {
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, v.bits())
	if err != nil {
		var ne *strconv.NumError
		if errors.As(err, &ne) && errors.Is(ne.Err, strconv.ErrRange) {
			return 0, fmt.Errorf("out of range for a %s", typeName(v.typ))
		}
		return 0, fmt.Errorf("not a %s", typeName(v.typ))
	}
	if n < v.min || n > v.max {
		return 0, fmt.Errorf("must be in %s", v.validValues())
	}
	return n, nil
}

func (v integer) check(s string) error { _, err := v.parse(s); return err }

func (v integer) validValues() string {
	lo, hi := typeBounds(v.typ)
	switch {
	case v.min == lo && v.max == hi:
		return ""
	case v.max == hi:
		return fmt.Sprintf("[%d,...]", v.min)
	case v.min == lo:
		return fmt.Sprintf("[...,%d]", v.max)
	}
	return fmt.Sprintf("[%d,...,%d]", v.min, v.max)
}

func typeBounds(typ int8) (int64, int64) {
	switch typ {
	case TypeShort:
		return math.MinInt16, math.MaxInt16
	case TypeInt:
		return math.MinInt32, math.MaxInt32
	}
	return math.MinInt64, math.MaxInt64
}

func typeName(typ int8) string {
	switch typ {
	case TypeBoolean:
		return "boolean"
	case TypeString:
		return "string"
	case TypeInt:
		return "32-bit integer"
	case TypeShort:
		return "16-bit integer"
	case TypeLong:
		return "64-bit integer"
	case TypeDouble:
		return "number"
	case TypeList:
		return "list"
	}
	return "value"
}

func atLeast(typ int8, min int64) integer {
	_, hi := typeBounds(typ)
	return integer{typ: typ, min: min, max: hi}
}

func between(typ int8, min, max int64) integer { return integer{typ: typ, min: min, max: max} }

func anyOf(typ int8) integer {
	lo, hi := typeBounds(typ)
	return integer{typ: typ, min: lo, max: hi}
}

// double is a DOUBLE with inclusive bounds.
type double struct{ min, max float64 }

func (v double) kafkaType() int8 { return TypeDouble }

func (v double) parse(s string) (float64, error) {
	f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil || math.IsNaN(f) {
		return 0, errors.New("not a number")
	}
	if f < v.min || f > v.max {
		return 0, fmt.Errorf("must be in %s", v.validValues())
	}
	return f, nil
}

func (v double) check(s string) error { _, err := v.parse(s); return err }

func (v double) validValues() string {
	if v.max == math.MaxFloat64 {
		return fmt.Sprintf("[%s,...]", formatFloat(v.min))
	}
	return fmt.Sprintf("[%s,...,%s]", formatFloat(v.min), formatFloat(v.max))
}

func formatFloat(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

// boolean is "true" or "false", case-insensitive as in Kafka.
type boolean struct{}

func (boolean) kafkaType() int8 { return TypeBoolean }

func (boolean) parse(s string) (bool, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, errors.New("must be true or false")
}

func (v boolean) check(s string) error { _, err := v.parse(s); return err }
func (boolean) validValues() string    { return "true, false" }

// enum is a STRING out of a fixed, case-sensitive set.
type enum struct{ values []string }

func (enum) kafkaType() int8 { return TypeString }

func (v enum) check(s string) error {
	s = strings.TrimSpace(s)
	for _, ok := range v.values {
		if s == ok {
			return nil
		}
	}
	return fmt.Errorf("must be one of %s", strings.Join(v.values, ", "))
}

func (v enum) validValues() string { return strings.Join(v.values, ", ") }

// text is a free STRING with an optional extra check.
type text struct {
	typ   int8 // TypeString unless set
	valid string
	fn    func(string) error
}

func (v text) kafkaType() int8 {
	if v.typ == 0 {
		return TypeString
	}
	return v.typ
}

func (v text) check(s string) error {
	if v.fn == nil {
		return nil
	}
	return v.fn(strings.TrimSpace(s))
}

func (v text) validValues() string { return v.valid }

// list is a comma-separated LIST. Empty items are dropped, items are trimmed.
type list struct {
	values   []string // allowed items; nil = any
	nonEmpty bool
	item     func(string) error // extra per-item check
	valid    string
}

func (list) kafkaType() int8 { return TypeList }

func (v list) check(s string) error {
	items := splitList(s)
	if v.nonEmpty && len(items) == 0 {
		return errors.New("must not be empty")
	}
	for _, it := range items {
		if v.values != nil && !contains(v.values, it) {
			if len(items) == 1 { // the message names the value already
				return fmt.Errorf("must be one of %s", strings.Join(v.values, ", "))
			}
			return fmt.Errorf("%q is not one of %s", it, strings.Join(v.values, ", "))
		}
		if v.item != nil {
			if err := v.item(it); err != nil {
				return err
			}
		}
	}
	return nil
}

func (v list) validValues() string {
	if v.values != nil {
		return strings.Join(v.values, ", ")
	}
	return v.valid
}

func splitList(s string) []string {
	var out []string
	for _, it := range strings.Split(s, ",") {
		if it = strings.TrimSpace(it); it != "" {
			out = append(out, it)
		}
	}
	return out
}

func contains(xs []string, s string) bool {
	for _, x := range xs {
		if x == s {
			return true
		}
	}
	return false
}

// Setters used after check has accepted s; they cannot fail.

func mustInt(s string) int64 {
	n, _ := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	return n
}

func mustFloat(s string) float64 {
	f, _ := strconv.ParseFloat(strings.TrimSpace(s), 64)
	return f
}

func mustBool(s string) bool { return strings.EqualFold(strings.TrimSpace(s), "true") }

func fmtInt[T ~int16 | ~int32 | ~int64](n T) string { return strconv.FormatInt(int64(n), 10) }

// checkHostPort accepts "host:port" with a numeric port in [0, 65535]; the host may
// be empty (all interfaces) or a bracketed IPv6 address.
func checkHostPort(s string) error {
	_, _, err := splitHostPort(s)
	return err
}

func splitHostPort(s string) (string, int, error) {
	host, portText, err := net.SplitHostPort(s)
	if err != nil {
		return "", 0, fmt.Errorf("%q is not host:port", s)
	}
	port, err := strconv.Atoi(portText)
	if err != nil || port < 0 || port > 65535 {
		return "", 0, fmt.Errorf("%q has a bad port (0..65535)", s)
	}
	return host, port, nil
}
