package config

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the generated tables in docs/config.md")

const docsPath = "../../docs/config.md"

// TestDocs keeps the generated tables of docs/config.md equal to the property
// tables. After changing a property: go test ./internal/config -run TestDocs -update
func TestDocs(t *testing.T) {
	data, err := os.ReadFile(docsPath)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(data)
	for _, section := range []struct{ name, body string }{
		{"broker", brokerTable()},
		{"topic", topicTable()},
		{"group", groupTable()},
		{"ignored", ignoredTable()},
	} {
		re := regexp.MustCompile(`(?s)(<!-- BEGIN GENERATED ` + section.name + ` -->\n).*?(<!-- END GENERATED ` + section.name + ` -->)`)
		if !re.MatchString(doc) {
			t.Fatalf("docs/config.md has no generated %s section", section.name)
		}
		doc = re.ReplaceAllLiteralString(doc, "<!-- BEGIN GENERATED "+section.name+" -->\n"+section.body+"<!-- END GENERATED "+section.name+" -->")
	}
	if doc != string(data) {
		if *update {
			if err := os.WriteFile(filepath.Clean(docsPath), []byte(doc), 0o644); err != nil {
				t.Fatal(err)
			}
			return
		}
		t.Fatal("docs/config.md tables are out of date: go test ./internal/config -run TestDocs -update")
	}
	for _, p := range brokerProperties {
		if !strings.Contains(doc, "`"+p.name+"`") {
			t.Errorf("docs/config.md does not mention broker property %s", p.name)
		}
	}
	for _, c := range groupConfigs {
		if !strings.Contains(doc, "`"+c.name+"`") {
			t.Errorf("docs/config.md does not mention group config %s", c.name)
		}
	}
	for _, p := range topicProperties {
		if !strings.Contains(doc, "`"+p.name+"`") {
			t.Errorf("docs/config.md does not mention topic config %s", p.name)
		}
	}
}

func cell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

func valid(v valueSpec) string {
	if s := v.validValues(); s != "" {
		return cell(s)
	}
	return "any"
}

func code(s string) string {
	if s == "" {
		return ""
	}
	return "`" + s + "`"
}

func docDefault(p *property) string {
	switch {
	case p.null:
		return "(unset)"
	case p.def == "":
		return `""`
	case p.def == maxLong:
		return code(p.def) + " (Long.MaxValue)"
	case p.def == "2147483647":
		return code(p.def) + " (Integer.MaxValue)"
	case p.def == "1.7976931348623157e+308":
		return code(p.def) + " (Double.MaxValue)"
	}
	return code(p.def)
}

func brokerTable() string {
	var sb strings.Builder
	sb.WriteString("| Property | Default | Valid values | Meaning | Samsa notes |\n|---|---|---|---|---|\n")
	for i := range brokerProperties {
		p := &brokerProperties[i]
		if p.ignored {
			continue
		}
		note := p.note
		if p.listener {
			note = strings.TrimSpace(note + " Per listener: `" + listenerPrefix + "<listener>." + p.name + "`.")
		}
		if IsDynamicBrokerProperty(p.name) {
			note = strings.TrimSpace("Dynamic: may be altered at run time, cluster-wide or per broker. " + note)
		}
		fmt.Fprintf(&sb, "| `%s` | %s | %s | %s | %s |\n", p.name, docDefault(p),
			valid(p.spec), cell(p.doc), cell(note))
	}
	return sb.String()
}

func topicTable() string {
	var sb strings.Builder
	sb.WriteString("| Topic config | Default from broker property | Valid values | Meaning |\n|---|---|---|---|\n")
	for i := range topicProperties {
		p := &topicProperties[i]
		if p.ignored {
			continue
		}
		from := make([]string, len(p.broker))
		for j, bk := range p.broker {
			from[j] = code(bk)
		}
		fmt.Fprintf(&sb, "| `%s` | %s | %s | %s |\n", p.name, strings.Join(from, " > "),
			valid(p.spec), cell(p.doc))
	}
	return sb.String()
}

func groupTable() string {
	var sb strings.Builder
	sb.WriteString("| Group config | Default from broker property | Valid values | Meaning |\n|---|---|---|---|\n")
	for _, c := range groupConfigs {
		from := code(c.broker)
		if from == "" {
			from = code(c.def(Default()))
		}
		fmt.Fprintf(&sb, "| `%s` | %s | %s | %s |\n", c.name, from, cell(c.valid), cell(c.doc))
	}
	return sb.String()
}

func ignoredTable() string {
	var sb strings.Builder
	sb.WriteString("| Property | Level | Kafka default | What it does in Kafka | In Samsa |\n|---|---|---|---|---|\n")
	for i := range brokerProperties {
		p := &brokerProperties[i]
		if p.ignored {
			fmt.Fprintf(&sb, "| `%s` | broker | %s | %s | %s |\n", p.name, docDefault(p), cell(p.doc), cell(p.note))
		}
	}
	for i := range topicProperties {
		p := &topicProperties[i]
		if p.ignored {
			fmt.Fprintf(&sb, "| `%s` | topic | | %s | no effect |\n", p.name, cell(p.doc))
		}
	}
	return sb.String()
}
