package console

import (
	"strings"
	"testing"
	"time"
)

func TestNiceCeiling(t *testing.T) {
	for in, want := range map[int64]int64{0: 1, 1: 1, 3: 5, 7: 10, 10: 10, 11: 20, 250: 500, 999: 1000, 1001: 2000} {
		if got := niceCeiling(in); got != want {
			t.Errorf("niceCeiling(%d) = %d, want %d", in, got, want)
		}
	}
}

func TestBuildLagChart(t *testing.T) {
	if c := buildLagChart(nil); c.Samples != 0 || c.Line != "" {
		t.Errorf("no samples: %+v", c)
	}
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	c := buildLagChart([]lagPoint{{t0, 0}, {t0.Add(5 * time.Second), 40}, {t0.Add(10 * time.Second), 80}})
	// x runs from the left edge to the right one; y from the bottom (lag 0) to the
	// top (lag 100, the ceiling above 80).
	if want := "56.0,150.0 343.0,94.0 630.0,38.0"; c.Line != want {
		t.Errorf("line %q, want %q", c.Line, want)
	}
	if want := c.Line + " 630.0,150 56.0,150"; c.Area != want {
		t.Errorf("area %q, want %q", c.Area, want)
	}
	if c.MaxLabel != "100" || c.FromLabel != "12:00:00" || c.ToLabel != "12:00:10 UTC" || c.LastLag != 80 {
		t.Errorf("labels %+v", c)
	}
	one := buildLagChart([]lagPoint{{t0, 5}})
	if strings.Count(one.Line, ",") != 2 {
		t.Errorf("one sample draws a flat line of two points, got %q", one.Line)
	}
}
