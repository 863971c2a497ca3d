package bench

import (
	"errors"
	"testing"
)

func TestParseBytes(t *testing.T) {
	tests := []struct {
		in   string
		want int64
		err  bool
	}{
		{"1024", 1024, false},
		{"64KiB", 64 << 10, false},
		{"1MiB", 1 << 20, false},
		{"1GiB", 1 << 30, false},
		{"1.5MiB", 3 << 19, false},
		{"2mb", 2 << 20, false},
		{" 8 k ", 8 << 10, false},
		{"100b", 100, false},
		{"", 0, true},
		{"lots", 0, true},
		{"-1MiB", 0, true},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			got, err := parseBytes(tc.in)
			if tc.err {
				if !errors.Is(err, ErrBadFlag) {
					t.Fatalf("parseBytes(%q) error = %v, want ErrBadFlag", tc.in, err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("parseBytes(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
			}
		})
	}
	for _, n := range []int64{1 << 30, 1 << 20, 64 << 10, 1000} {
		if back, err := parseBytes(formatBytes(n)); err != nil || back != n {
			t.Fatalf("formatBytes(%d) = %q does not parse back: %d, %v", n, formatBytes(n), back, err)
		}
	}
}
