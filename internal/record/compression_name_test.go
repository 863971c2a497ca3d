package record

import "testing"

// ParseCompression reads back every codec's name and refuses any other, "producer"
// (a topic's compression.type that keeps the producer's codec) included.
func TestParseCompression(t *testing.T) {
	for c := CompressionNone; c <= CompressionZstd; c++ {
		if got, ok := ParseCompression(c.String()); !ok || got != c {
			t.Errorf("ParseCompression(%q) = %v, %v; want %v", c.String(), got, ok, c)
		}
	}
	for _, name := range []string{"producer", "", "brotli", "GZIP"} {
		if got, ok := ParseCompression(name); ok {
			t.Errorf("ParseCompression(%q) = %v, want refused", name, got)
		}
	}
}
