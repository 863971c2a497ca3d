package cli

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// CodeMixedBuilds flags brokers that serve different API versions.
const CodeMixedBuilds = "mixed_builds"

// diagnoseBuilds reports brokers that serve different highest versions of some API
// (ApiVersions): nodes of different builds, a rolling upgrade in progress or left
// half done. Until it is finished, requests a newer build raised go between nodes
// at the older version, and clients may see different versions per broker. The
// brokers "behind" are those below the highest version of an API another serves.
func diagnoseBuilds(brokers []BrokerSnapshot) []Finding {
	var known []BrokerSnapshot
	for _, b := range brokers {
		if b.APIVersions != nil {
			known = append(known, b)
		}
	}
	if len(known) < 2 {
		return nil
	}
	keys := map[int16]bool{}
	for _, b := range known {
		for k := range b.APIVersions {
			keys[k] = true
		}
	}
	behind := map[int32]bool{}
	var differing []string
	for _, k := range slices.Sorted(maps.Keys(keys)) {
		byVersion := map[int16][]int32{} // highest version served (-1: not served) → brokers
		for _, b := range known {
			v, ok := b.APIVersions[k]
			if !ok {
				v = -1
			}
			byVersion[v] = append(byVersion[v], b.ID)
		}
		if len(byVersion) == 1 {
			continue
		}
		versions := slices.SortedFunc(maps.Keys(byVersion), func(a, b int16) int { return cmp.Compare(b, a) })
		var parts []string
		for i, v := range versions {
			if i > 0 {
				for _, id := range byVersion[v] {
					behind[id] = true
				}
			}
			what := fmt.Sprintf("up to v%d", v)
			if v < 0 {
				what = "not served"
			}
			parts = append(parts, fmt.Sprintf("%s on %s", what, brokerList(byVersion[v])))
		}
		differing = append(differing, fmt.Sprintf("%s %s", kmsg.NameForKey(k), strings.Join(parts, ", ")))
	}
	if len(differing) == 0 {
		return nil
	}
	older := slices.Sorted(maps.Keys(behind))
	shown := differing[:min(len(differing), 3)]
	more := ""
	if len(differing) > len(shown) {
		more = fmt.Sprintf(" (and %d more)", len(differing)-len(shown))
	}
	return []Finding{{
		Code: CodeMixedBuilds, Severity: severityWarning,
		Message: fmt.Sprintf("the brokers serve different versions of %d APIs: they run different builds, a rolling upgrade in progress or left half done: %s%s",
			len(differing), strings.Join(shown, "; "), more),
		Numbers: map[string]int64{"apis_differing": int64(len(differing)), "brokers_behind": int64(len(older))},
		Fix: fmt.Sprintf("finish the upgrade: run the newest build on %s, one node at a time (docs/operations.md, \"Upgrading Samsa\"); until then the nodes send each other the older versions",
			brokerList(older)),
	}}
}

// brokerList names brokers in order: "broker 2", "brokers 1, 3".
func brokerList(ids []int32) string {
	ids = slices.Sorted(slices.Values(ids))
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = fmt.Sprint(id)
	}
	if len(ids) == 1 {
		return "broker " + s[0]
	}
	return "brokers " + strings.Join(s, ", ")
}
