package console

import (
	"fmt"
	"strings"
	"time"
)

// lagPoint is one sample of a group's total lag.
type lagPoint struct {
	At  time.Time
	Lag int64
}

// lagChart is what the template draws as an inline SVG: a line of total lag over
// time with the axis labels; coordinates are in the SVG's own units.
type lagChart struct {
	Width, Height int
	Left, Bottom  int    // the plot area starts at x=Left and ends at y=Bottom
	Line          string // polyline points "x,y x,y …"
	Area          string // the same closed down to the x axis, for the fill
	MaxLabel      string // the y axis' top value
	FromLabel     string // the time of the first sample
	ToLabel       string // the time of the last sample
	Samples       int
	LastLag       int64
}

// Chart geometry, in SVG units.
const (
	chartWidth  = 640
	chartHeight = 180
	chartLeft   = 56
	chartTop    = 10
	chartBottom = 150
	chartRight  = 630
)

// buildLagChart lays out points (in time order) in a fixed-size chart. It is pure.
func buildLagChart(points []lagPoint) lagChart {
	c := lagChart{Width: chartWidth, Height: chartHeight, Left: chartLeft, Bottom: chartBottom, Samples: len(points)}
	if len(points) == 0 {
		return c
	}
	var top int64 = 1
	for _, p := range points {
		top = max(top, p.Lag)
	}
	top = niceCeiling(top)
	first, last := points[0].At, points[len(points)-1].At
	span := last.Sub(first)
	x := func(t time.Time) float64 {
		if span <= 0 {
			return chartRight
		}
		return chartLeft + float64(t.Sub(first))/float64(span)*(chartRight-chartLeft)
	}
	y := func(lag int64) float64 {
		return chartBottom - float64(lag)/float64(top)*(chartBottom-chartTop)
	}
	var line strings.Builder
	for i, p := range points {
		if i > 0 {
			line.WriteByte(' ')
		}
		fmt.Fprintf(&line, "%.1f,%.1f", x(p.At), y(p.Lag))
	}
	if len(points) == 1 {
		// One sample draws a flat line across the plot.
		fmt.Fprintf(&line, " %d,%.1f", chartLeft, y(points[0].Lag))
	}
	c.Line = line.String()
	// The area runs along the line, down to the x axis under its last point and back
	// under its first (a single sample's line runs from the right edge to the left).
	lastX, firstX := x(last), x(first)
	if len(points) == 1 {
		lastX, firstX = chartLeft, chartRight
	}
	c.Area = fmt.Sprintf("%s %.1f,%d %.1f,%d", c.Line, lastX, chartBottom, firstX, chartBottom)
	c.MaxLabel = fmt.Sprint(top)
	c.FromLabel = first.UTC().Format("15:04:05")
	c.ToLabel = last.UTC().Format("15:04:05") + " UTC"
	c.LastLag = points[len(points)-1].Lag
	return c
}

// niceCeiling rounds n up to 1, 2 or 5 times a power of ten.
func niceCeiling(n int64) int64 {
	for pow := int64(1); ; pow *= 10 {
		for _, m := range []int64{1, 2, 5} {
			if m*pow >= n {
				return m * pow
			}
		}
		if pow > 1e17 {
			return n
		}
	}
}
