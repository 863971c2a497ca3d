package bench

import (
	"fmt"
	"strconv"
	"strings"
)

// byteSize is a pflag value for sizes written as 1048576, 64KiB, 1MiB, 1GiB (or
// KB/MB/GB, which mean the same powers of 1024 here, as Kafka's tools do).
type byteSize int64

func (s *byteSize) String() string { return formatBytes(int64(*s)) }
func (s *byteSize) Type() string   { return "size" }

func (s *byteSize) Set(v string) error {
	n, err := parseBytes(v)
	if err != nil {
		return err
	}
	*s = byteSize(n)
	return nil
}

var sizeUnits = []struct {
	suffix string
	mult   int64
}{
	{"kib", 1 << 10}, {"mib", 1 << 20}, {"gib", 1 << 30},
	{"kb", 1 << 10}, {"mb", 1 << 20}, {"gb", 1 << 30},
	{"k", 1 << 10}, {"m", 1 << 20}, {"g", 1 << 30},
	{"b", 1},
}

func parseBytes(v string) (int64, error) {
	s := strings.ToLower(strings.TrimSpace(v))
	mult := int64(1)
	for _, u := range sizeUnits {
		if strings.HasSuffix(s, u.suffix) {
			s, mult = strings.TrimSpace(strings.TrimSuffix(s, u.suffix)), u.mult
			break
		}
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f < 0 {
		return 0, fmt.Errorf("%w: %q is not a size (like 1024, 64KiB, 1MiB, 1GiB)", ErrBadFlag, v)
	}
	return int64(f * float64(mult)), nil
}

func formatBytes(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%dGiB", n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%dMiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%dKiB", n>>10)
	}
	return strconv.FormatInt(n, 10)
}
