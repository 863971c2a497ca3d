package console

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestUntrustedDataNeverRuns puts markup wherever a producer or a client controls the
// bytes the console shows: a JSON value (pretty-printed), a binary value (hex dump),
// a value past the preview (its own record page), header names and values, a group id
// and a member's client id (the member id starts with it), and looks at every page
// that shows them, before and after app.js swaps the lag section in: no element from
// the data exists, no script from it ran (window.__pwned stays undefined) and the
// browser reported no CSP violation.
func TestUntrustedDataNeverRuns(t *testing.T) {
	broker := startTestBroker(t)
	srv := startConsole(t, []string{broker.Addr}, 5*time.Second)
	base := strings.TrimSuffix(srv.URL(), "/")
	br := newBrowser(t)
	cl := newKafkaClient(t, broker)
	adm := kadm.NewClient(cl)
	createTopic(t, adm, "xss", 1, nil)

	const (
		jsonValue = `{"a":"</script><script>window.__pwned='json'</script>","b":"<img src=x onerror=window.__pwned='jsonimg'>"}`
		key       = `"><svg onload=window.__pwned='key'>`
		hkey      = `<img src=x onerror=window.__pwned='hkey'>`
		hval      = `</pre><script>window.__pwned='hval'</script>`
		group     = `"><svg onload=window.__pwned='group'>`
		clientID  = `<img src=x onerror=window.__pwned='client'>`
	)
	binary := append([]byte{0, 1, 2}, `<img src=x onerror=window.__pwned='hex'>`...)
	long := append(bytes.Repeat([]byte("x"), 2000), `<script>window.__pwned='long'</script>`...)
	produce(t, cl,
		&kgo.Record{Topic: "xss", Key: []byte(key), Value: []byte(jsonValue),
			Headers: []kgo.RecordHeader{{Key: hkey, Value: []byte(hval)}}},
		&kgo.Record{Topic: "xss", Key: []byte("binary"), Value: binary},
		&kgo.Record{Topic: "xss", Key: []byte("long"), Value: long})

	// A member that stays in the group while its page is shown.
	member := newKafkaClient(t, broker, kgo.ClientID(clientID), kgo.ConsumerGroup(group), kgo.ConsumeTopics("xss"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	for ctx, n := ctxFor(t, 30*time.Second), 0; n < 3 && ctx.Err() == nil; {
		n += len(member.PollFetches(ctx).Records())
	}
	if err := member.CommitUncommittedOffsets(ctxFor(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}

	const injected = `document.querySelectorAll("main img, main script, main [onerror], main [onload]").length`
	check := func(t *testing.T, page string) {
		t.Helper()
		if n := evaluate[int](t, br, injected); n != 0 {
			t.Errorf("%s: %d elements from Kafka data are in the page", page, n)
		}
		if pwned := evaluate[string](t, br, `String(window.__pwned)`); pwned != "undefined" {
			t.Errorf("%s: a script from Kafka data ran (window.__pwned = %q)", page, pwned)
		}
		br.checkProblems(t)
	}

	br.open(t, base+"/topics/xss/messages", `[data-testid="records"]`)
	cells := strings.Join(br.texts(t, `[data-testid="record"] td`), "\n")
	for _, want := range []string{key, hkey, `"</script><script>window.__pwned='json'</script>"`, "|...<img src=x on|", "show more"} {
		if !strings.Contains(cells, want) {
			t.Errorf("the messages page does not show %q as text; cells:\n%s", want, cells)
		}
	}
	if n := evaluate[int](t, br, `document.querySelectorAll('pre[data-kind="json"], pre[data-kind="hex"]').length`); n < 2 {
		t.Errorf("%d JSON and hex views, want the JSON value and the binary value", n)
	}
	br.screenshot(t, "messages")
	check(t, "messages")

	br.clickLink(t, "show more", `[data-testid="full-value"]`)
	if got := br.text(t, `[data-testid="full-value"] pre`); got != string(long) {
		t.Errorf("the record page shows %d bytes, want the %d of the value as text", len(got), len(long))
	}
	check(t, "record")

	br.open(t, base+"/groups", `[data-testid="groups"]`)
	check(t, "groups")
	br.clickLink(t, group, `[data-testid="members"]`)
	if got := br.text(t, `[data-testid="group-name"]`); got != group {
		t.Errorf("group page names %q, want %q", got, group)
	}
	if members := strings.Join(br.texts(t, `[data-testid="members"] td`), "\n"); !strings.Contains(members, clientID) {
		t.Errorf("the members table does not show the client id %q as text:\n%s", clientID, members)
	}
	// app.js replaces the lag section with the server's fragment (innerHTML) every
	// LagInterval; wait for a swap, then look again.
	evaluate[bool](t, br, `document.querySelector('[data-testid="lag-total"]').setAttribute("data-old", "1") === undefined`)
	br.run(t, "a refreshed lag section", chromedp.WaitVisible(chromedp.Search(`//strong[@data-testid="lag-total"][not(@data-old)]`)))
	br.screenshot(t, "group")
	check(t, "group")
}
