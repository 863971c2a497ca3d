package broker

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-streaming/samsa/internal/protocol"
)

// TestCompatibilityDoc keeps the tables of served APIs in docs/compatibility.md equal
// to the registries that ApiVersions advertises: the client listeners' table under
// "## APIs served", the controller listener's under "## Controller listener".
func TestCompatibilityDoc(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "docs", "compatibility.md"))
	if err != nil {
		t.Fatal(err)
	}
	check := func(heading string, served []kmsg.ApiVersionsResponseApiKey) {
		documented := documentedAPIs(t, string(data), heading)
		for _, k := range served {
			want := fmt.Sprintf("%s %d–%d", apiName(k.ApiKey), k.MinVersion, k.MaxVersion)
			if got := documented[k.ApiKey]; got != want {
				t.Errorf("docs/compatibility.md (%s) has %q for key %d, the node serves %q", heading, got, k.ApiKey, want)
			}
			delete(documented, k.ApiKey)
		}
		for key, doc := range documented {
			t.Errorf("docs/compatibility.md (%s) lists %q (key %d), which is not served there", heading, doc, key)
		}
	}
	check("## APIs served", APIKeys())
	check("## Controller listener", ControllerAPIKeys())
}

// documentedAPIs reads the API table of the section under heading.
func documentedAPIs(t *testing.T, doc, heading string) map[int16]string {
	start := strings.Index(doc, "\n"+heading+"\n")
	if start < 0 {
		t.Fatalf("docs/compatibility.md has no section %q", heading)
	}
	section := doc[start+len(heading)+2:]
	if end := strings.Index(section, "\n## "); end >= 0 {
		section = section[:end]
	}
	row := regexp.MustCompile(`(?m)^\| (\w+) \| (\d+) \| (\d+)–(\d+) \|`)
	documented := map[int16]string{}
	for _, m := range row.FindAllStringSubmatch(section, -1) {
		var key, min, max int16
		fmt.Sscan(m[2], &key)
		fmt.Sscan(m[3], &min)
		fmt.Sscan(m[4], &max)
		documented[key] = fmt.Sprintf("%s %d–%d", m[1], min, max)
	}
	return documented
}

func apiName(key int16) string {
	switch key {
	case protocol.RaftKey:
		return "SamsaRaft"
	case protocol.MetadataFetchKey:
		return "SamsaMetadataFetch"
	case protocol.ReplicasOfflineKey:
		return "SamsaReplicasOffline"
	}
	return kmsg.NameForKey(key)
}
