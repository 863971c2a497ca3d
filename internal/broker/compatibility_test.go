package broker

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestCompatibilityDoc keeps docs/compatibility.md's table of served APIs equal to the
// registry that ApiVersions advertises.
func TestCompatibilityDoc(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "docs", "compatibility.md"))
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile(`(?m)^\| (\w+) \| (\d+) \| (\d+)–(\d+) \|`)
	documented := map[int16]string{}
	for _, m := range row.FindAllStringSubmatch(string(data), -1) {
		var key, min, max int16
		fmt.Sscan(m[2], &key)
		fmt.Sscan(m[3], &min)
		fmt.Sscan(m[4], &max)
		documented[key] = fmt.Sprintf("%s %d–%d", m[1], min, max)
	}
	served := APIKeys()
	for _, k := range served {
		want := fmt.Sprintf("%s %d–%d", kmsg.NameForKey(k.ApiKey), k.MinVersion, k.MaxVersion)
		if got := documented[k.ApiKey]; got != want {
			t.Errorf("docs/compatibility.md has %q for key %d, the broker serves %q", got, k.ApiKey, want)
		}
		delete(documented, k.ApiKey)
	}
	for key, doc := range documented {
		t.Errorf("docs/compatibility.md lists %q (key %d), which the broker does not serve", doc, key)
	}
}
