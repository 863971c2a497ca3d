package console

import "testing"

func TestResetSpec(t *testing.T) {
	for _, tc := range []struct{ to, at, spec string }{
		{"earliest", "", "earliest"},
		{"latest", "ignored", "latest"},
		{"timestamp", "2024-05-01T12:00:00Z", "timestamp:1714564800000"},
		{"timestamp", "2024-05-01T12:00", "timestamp:1714564800000"},
	} {
		spec, label, err := resetSpec(tc.to, tc.at)
		if err != nil || spec != tc.spec || label == "" {
			t.Errorf("resetSpec(%q, %q) = %q, %q, %v; want %q", tc.to, tc.at, spec, label, err, tc.spec)
		}
	}
	for _, bad := range [][2]string{{"timestamp", "yesterday"}, {"shift:1", ""}, {"", ""}} {
		if _, _, err := resetSpec(bad[0], bad[1]); err == nil {
			t.Errorf("resetSpec(%q, %q) accepted", bad[0], bad[1])
		}
	}
}
