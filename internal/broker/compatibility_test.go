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

	// Every key kmsg knows is served on a listener or listed as not served, by its name.
	served := map[int16]bool{}
	for _, k := range append(APIKeys(), ControllerAPIKeys()...) {
		served[k.ApiKey] = true
	}
	unserved := unservedAPIs(t, string(data))
	for key := int16(0); key <= kmsg.MaxKey; key++ {
		name := kmsg.NameForKey(key)
		switch listed, ok := unserved[key]; {
		case served[key] && ok:
			t.Errorf("docs/compatibility.md (## Not served yet) lists %s (key %d), which is served", listed, key)
		case !served[key] && kmsg.RequestForKey(key) != nil && listed != name:
			t.Errorf("docs/compatibility.md (## Not served yet) has %q for key %d, which is not served: want a row for %s", listed, key, name)
		}
		delete(unserved, key)
	}
	for key, name := range unserved {
		t.Errorf("docs/compatibility.md (## Not served yet) lists %s under key %d, which kmsg does not know", name, key)
	}
}

// unservedAPIs reads the table of the section "## Not served yet": key → name.
func unservedAPIs(t *testing.T, doc string) map[int16]string {
	start := strings.Index(doc, "\n## Not served yet\n")
	if start < 0 {
		t.Fatal(`docs/compatibility.md has no section "## Not served yet"`)
	}
	section := doc[start+1:]
	if end := strings.Index(section[1:], "\n## "); end >= 0 {
		section = section[:end+1]
	}
	row := regexp.MustCompile(`(?m)^\| (\w+) \| (\d+) \|`)
	listed := map[int16]string{}
	for _, m := range row.FindAllStringSubmatch(section, -1) {
		var key int16
		fmt.Sscan(m[2], &key)
		listed[key] = m[1]
	}
	return listed
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
	case protocol.DelegationTokenKey:
		return "SamsaDelegationToken"
	}
	return kmsg.NameForKey(key)
}
