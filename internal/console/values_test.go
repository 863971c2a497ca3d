package console

import (
	"strings"
	"testing"
)

func TestShowBytes(t *testing.T) {
	for _, tc := range []struct {
		name      string
		in        []byte
		null      bool
		preview   int
		kind      string
		text      string
		truncated bool
	}{
		{name: "null", in: nil, null: true, preview: 16, kind: kindNull},
		{name: "empty", in: []byte{}, preview: 16, kind: kindEmpty},
		{name: "json pretty", in: []byte(`{"a":[1,2]}`), preview: 64, kind: kindJSON, text: "{\n  \"a\": [\n    1,\n    2\n  ]\n}"},
		{name: "json-looking text", in: []byte(`{not json`), preview: 64, kind: kindText, text: `{not json`},
		{name: "markup stays text", in: []byte(`<img src=x onerror=alert(1)>`), preview: 64, kind: kindText, text: `<img src=x onerror=alert(1)>`},
		{name: "utf-8", in: []byte("héllo\twörld\n"), preview: 64, kind: kindText, text: "héllo\twörld\n"},
		{name: "control bytes are binary", in: []byte("a\x00b"), preview: 64, kind: kindHex, text: "00000000  61 00 62" + strings.Repeat(" ", 3*13) + "  |a.b|\n"},
		{name: "invalid utf-8", in: []byte{0xff, 0xfe}, preview: 64, kind: kindHex},
		{name: "cut at preview", in: []byte("abcdefgh"), preview: 4, kind: kindText, text: "abcd", truncated: true},
		{name: "cut never splits a character", in: []byte("aé"), preview: 2, kind: kindText, text: "a", truncated: true},
		{name: "truncated json is text", in: []byte(`{"a":"bcdefgh"}`), preview: 6, kind: kindText, text: `{"a":"`, truncated: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := showBytes(tc.in, tc.null, tc.preview)
			if got.Kind != tc.kind || got.Truncated != tc.truncated || (tc.text != "" && got.Text != tc.text) {
				t.Errorf("showBytes(%q) = %+v, want kind %s text %q truncated %v", tc.in, got, tc.kind, tc.text, tc.truncated)
			}
			if !tc.null && got.Size != len(tc.in) {
				t.Errorf("size %d, want %d", got.Size, len(tc.in))
			}
		})
	}
}
