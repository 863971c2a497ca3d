package console

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"strings"
	"unicode/utf8"
)

// Kinds of shown bytes.
const (
	kindNull  = "null"  // the record has no key (or value)
	kindEmpty = "empty" // zero bytes
	kindJSON  = "json"  // valid JSON, pretty-printed
	kindText  = "text"  // UTF-8 text without control characters other than \t \n \r
	kindHex   = "hex"   // anything else, as a hex dump
)

// shownBytes is a key, value or header value as a page shows it: Text is plain text
// for the template to escape, never markup.
type shownBytes struct {
	Kind      string
	Text      string
	Size      int  // the full size in bytes
	Truncated bool // Text shows only the first preview bytes
}

// showBytes decides how to show b: null, empty, pretty JSON, text or hex, cut to
// about preview bytes (a cut never splits a UTF-8 character). It is pure.
func showBytes(b []byte, isNull bool, preview int) shownBytes {
	switch {
	case isNull:
		return shownBytes{Kind: kindNull}
	case len(b) == 0:
		return shownBytes{Kind: kindEmpty}
	}
	s := shownBytes{Size: len(b)}
	head := b
	if len(head) > preview {
		head, s.Truncated = head[:preview], true
	}
	if !s.Truncated && (b[0] == '{' || b[0] == '[') && json.Valid(b) {
		var pretty bytes.Buffer
		if err := json.Indent(&pretty, b, "", "  "); err == nil && pretty.Len() <= 4*preview {
			s.Kind, s.Text = kindJSON, pretty.String()
			return s
		}
	}
	if s.Truncated {
		// Drop a character the cut split, so a text prefix stays text.
		for i := 0; i < utf8.UTFMax && len(head) > 0 && !utf8.Valid(head); i++ {
			head = head[:len(head)-1]
		}
	}
	if isText(head) {
		s.Kind, s.Text = kindText, string(head)
		return s
	}
	s.Kind, s.Text = kindHex, hexDump(head)
	return s
}

// isText reports whether b is valid UTF-8 without control characters other than
// tab, newline and carriage return.
func isText(b []byte) bool {
	if !utf8.Valid(b) {
		return false
	}
	for _, r := range string(b) {
		if (r < 0x20 && r != '\t' && r != '\n' && r != '\r') || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return false
		}
	}
	return true
}

// hexDump renders b as lines of 16 bytes: offset, hex, and the printable ASCII.
func hexDump(b []byte) string {
	var sb strings.Builder
	for off := 0; off < len(b); off += 16 {
		line := b[off:min(off+16, len(b))]
		sb.WriteString(hex.EncodeToString([]byte{byte(off >> 24), byte(off >> 16), byte(off >> 8), byte(off)}))
		sb.WriteString("  ")
		for i := range 16 {
			if i < len(line) {
				sb.WriteString(hex.EncodeToString(line[i : i+1]))
			} else {
				sb.WriteString("  ")
			}
			sb.WriteByte(' ')
		}
		sb.WriteString(" |")
		for _, c := range line {
			if c < 0x20 || c > 0x7e {
				c = '.'
			}
			sb.WriteByte(c)
		}
		sb.WriteString("|\n")
	}
	return sb.String()
}
