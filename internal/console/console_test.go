package console

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-streaming/samsa/internal/testutil"
)

// startTestBroker starts a broker for console tests: data on tmpfs when the machine
// has one (creating 10,000 partitions on this machine's disk takes ~10 s, on tmpfs
// ~2 s), no initial rebalance delay.
func startTestBroker(t *testing.T) *testutil.Broker {
	t.Helper()
	dir := t.TempDir()
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		if d, err := os.MkdirTemp("/dev/shm", "samsa-console-test-"); err == nil {
			dir = d
			t.Cleanup(func() { os.RemoveAll(d) }) // after the broker stopped: cleanups run last-in first-out
		}
	}
	// A single node fences itself when its heartbeats to its own controller time out,
	// which a -race build on a loaded two-core machine can make happen: a long
	// session keeps every partition led.
	return testutil.StartBroker(t, "log.dirs="+dir, "group.initial.rebalance.delay.ms=0", "broker.session.timeout.ms=60000")
}

// startConsole runs a console in this process against brokers.
func startConsole(t *testing.T, brokers []string, timeout time.Duration) *Server {
	t.Helper()
	s, err := New(Config{
		Brokers: brokers, Listen: "127.0.0.1:0", Timeout: timeout,
		LagInterval: 250 * time.Millisecond, RetryInterval: time.Second,
		Logger: slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: testLogLevel()})),
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// testLogLevel is warn, or what $SAMSA_CONSOLE_TEST_LOG says (debug logs every request).
func testLogLevel() slog.Level {
	var level slog.Level = slog.LevelWarn
	if v := os.Getenv("SAMSA_CONSOLE_TEST_LOG"); v != "" {
		_ = level.UnmarshalText([]byte(v))
	}
	return level
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

func newKafkaClient(t *testing.T, b *testutil.Broker, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(b.Addr), kgo.MetadataMinAge(100 * time.Millisecond)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func ctxFor(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func createTopic(t *testing.T, adm *kadm.Client, name string, partitions int32, configs map[string]*string) {
	t.Helper()
	resp, err := adm.CreateTopic(ctxFor(t, 2*time.Minute), partitions, 1, configs, name)
	if err != nil {
		t.Fatalf("create %s: %v (%s)", name, err, resp.ErrMessage)
	}
}

func produce(t *testing.T, cl *kgo.Client, recs ...*kgo.Record) {
	t.Helper()
	if err := cl.ProduceSync(ctxFor(t, 30*time.Second), recs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
}

func topicExists(t *testing.T, adm *kadm.Client, name string) bool {
	t.Helper()
	topics, err := adm.ListTopics(ctxFor(t, 10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	return topics.Has(name)
}

func equalStrings(t *testing.T, what string, got, want []string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Fatalf("%s: got %q, want %q", what, got, want)
	}
}

// TestConsole walks the console in a real browser against a real broker, in the
// order a user would: the overview, topics (create, browse, produce, configs,
// delete), untrusted and odd data, consumer groups with lag and a reset, doctor, a
// 10,000-partition topic, a cross-site POST, and the cluster going down and back.
func TestConsole(t *testing.T) {
	broker := startTestBroker(t)
	t.Cleanup(broker.Kill) // before testutil's clean stop, which would flush 10,000 partitions for nothing
	srv := startConsole(t, []string{broker.Addr}, 5*time.Second)
	base := strings.TrimSuffix(srv.URL(), "/")
	br := newBrowser(t)
	cl := newKafkaClient(t, broker)
	adm := kadm.NewClient(cl)
	adm.SetTimeoutMillis(120_000) // creating 10,000 partitions under -race on a busy machine takes a while

	t.Run("overview", func(t *testing.T) {
		br.open(t, base+"/", `[data-testid="broker-count"]`)
		title, err := chromedp.Run(br.ctx, chromedp.Title())
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(title, "Samsa") {
			t.Errorf("title %q does not contain Samsa", title)
		}
		if got := br.text(t, `[data-testid="broker-count"]`); got != "1" {
			t.Errorf("broker-count = %q, want 1", got)
		}
		if got := br.text(t, `[data-testid="topic-count"]`); got != "0" {
			t.Errorf("topic-count = %q, want 0", got)
		}
		equalStrings(t, "broker table headers", br.texts(t, `[data-testid="brokers"] th`), []string{"Broker", "Host", "Port", "Rack", "Role"})
		br.screenshot(t, "overview")
		br.checkProblems(t)
	})

	t.Run("samsa console", func(t *testing.T) { testCommand(t, broker) })

	t.Run("create a topic with the form", func(t *testing.T) {
		br.open(t, base+"/", `[data-testid="broker-count"]`)
		br.clickLink(t, "Topics", `[data-testid="topics"]`)
		if headers := br.texts(t, `[data-testid="topics"] th`); !slices.Contains(headers, "Partitions") {
			t.Fatalf("topics table headers %q have no Partitions", headers)
		}
		br.fill(t, "Name", "orders")
		br.fill(t, "Partitions", "3")
		br.fill(t, "Replication factor", "1")
		br.fill(t, "Configs", "retention.ms=86400000")
		br.clickButton(t, "Create topic", `[data-testid="partitions-table"]`)
		equalStrings(t, "partition table headers", br.texts(t, `[data-testid="partitions-table"] th`),
			[]string{"Partition", "Leader", "Replicas", "ISR", "Start offset", "End offset", "Size"})
		if rows := br.texts(t, `[data-testid="partitions-table"] tbody tr`); len(rows) != 3 {
			t.Errorf("%d partition rows, want 3", len(rows))
		}
		if got := br.texts(t, `[data-testid="config-overrides"] tbody td:first-child`); !slices.Contains(got, "retention.ms") {
			t.Errorf("config overrides %q lack retention.ms", got)
		}
		br.clickLink(t, "Overview", `[data-testid="topic-count"]`)
		if got := br.text(t, `[data-testid="topic-count"]`); got != "1" {
			t.Errorf("topic-count = %q after creating one, want 1", got)
		}
		br.checkProblems(t)
	})

	t.Run("produce then see the record", func(t *testing.T) {
		br.open(t, base+"/topics", `[data-testid="topics"]`)
		br.clickLink(t, "orders", `[data-testid="produce"]`)
		br.fill(t, "Key", "customer-1")
		br.fill(t, "Value", `{"order":1,"items":["tea"]}`)
		br.clickButton(t, "Produce", `[data-testid="produced"]`)
		br.clickLink(t, "Messages", `[data-testid="records"]`)
		rows := br.texts(t, `[data-testid="record"]`)
		if len(rows) != 1 || !strings.Contains(rows[0], "customer-1") || !strings.Contains(rows[0], `"order": 1`) {
			t.Fatalf("records %q: want the produced record, its JSON pretty-printed", rows)
		}
		br.screenshot(t, "messages")
		br.checkProblems(t)
	})

	t.Run("refusals say what failed once", func(t *testing.T) {
		// Each page's error names the thing refused in the broker's (or the console's)
		// words, not followed by the Kafka code's generic description as well.
		once := func(t *testing.T, what, got, want, generic string) {
			t.Helper()
			if strings.Count(got, want) != 1 || strings.Contains(got, generic) {
				t.Errorf("%s: error %q, want %q once and not %q", what, got, want, generic)
			}
		}
		br.open(t, base+"/topics", `[data-testid="topics"]`)
		br.fill(t, "Name", "orders")
		br.fill(t, "Partitions", "1")
		br.fill(t, "Replication factor", "1")
		br.clickButton(t, "Create topic", `[data-testid="error"]`)
		once(t, "creating an existing topic", br.text(t, `[data-testid="error"]`), "already exists", kerr.TopicAlreadyExists.Description)
		br.screenshot(t, "topic-exists")

		br.open(t, base+"/topics/no-such-topic", `[data-testid="error"]`)
		once(t, "an unknown topic", br.text(t, `[data-testid="error"]`), `topic "no-such-topic" does not exist`, kerr.UnknownTopicOrPartition.Description)
		br.open(t, base+"/groups/no-such-group", `[data-testid="error"]`)
		once(t, "an unknown group", br.text(t, `[data-testid="error"]`), `group "no-such-group" does not exist`, kerr.GroupIDNotFound.Description)

		// An offset past the log end is a record that is not there (404), not a
		// failed read.
		br.open(t, base+"/topics/orders/messages/0/999999", `[data-testid="error"]`)
		once(t, "an offset past the end", br.text(t, `[data-testid="error"]`), "no record at offset 999999", kerr.OffsetOutOfRange.Description)
		resp, err := http.Get(base + "/topics/orders/messages/0/999999")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("GET a record past the log end: status %d, want 404", resp.StatusCode)
		}
		br.screenshot(t, "offset-past-end")

		// A reset asked for wrongly is the request's fault (400), not the group's (409).
		for _, q := range []string{"to=bogus&topic=orders", "to=timestamp&time=yesterday-ish&topic=orders"} {
			resp, err := http.Get(base + "/groups/any-group/reset?" + q)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), `data-testid="error"`) {
				t.Errorf("GET reset?%s: status %d, want 400 with the error shown", q, resp.StatusCode)
			}
		}
	})

	t.Run("untrusted data is shown as text", func(t *testing.T) {
		const (
			key    = `<script>window.__xss="key"</script>`
			value  = `<img src=x onerror="window.__xss='value'">`
			header = `<b onmouseover="window.__xss='header'">bold</b>`
			group  = `<img src=x onerror=window.__xss=1>/"'&`
		)
		br.open(t, base+"/topics/orders", `[data-testid="produce"]`)
		br.fill(t, "Key", key)
		br.fill(t, "Value", value)
		br.fill(t, "Headers", "trace="+header)
		br.clickButton(t, "Produce", `[data-testid="produced"]`)
		br.clickLink(t, "Messages", `[data-testid="records"]`)
		cells := strings.Join(br.texts(t, `[data-testid="record"] td`), "\n")
		for _, want := range []string{key, value, header} {
			if !strings.Contains(cells, want) {
				t.Errorf("the page does not show %q as text; cells:\n%s", want, cells)
			}
		}
		var offsets kadm.Offsets
		offsets.AddOffset("orders", 0, 0, -1)
		if _, err := adm.CommitOffsets(ctxFor(t, 10*time.Second), group, offsets); err != nil {
			t.Fatal(err)
		}
		br.open(t, base+"/groups", `[data-testid="groups"]`)
		br.clickLink(t, group, `[data-testid="group-name"]`)
		if got := br.text(t, `[data-testid="group-name"]`); got != group {
			t.Errorf("group page names %q, want %q", got, group)
		}
		const injectedJS = `document.querySelectorAll("main img, main script, main b").length + (window.__xss === undefined ? 0 : 100)`
		if injected := evaluate[int](t, br, injectedJS); injected != 0 {
			t.Errorf("markup from Kafka data reached the page (%d)", injected)
		}
		br.open(t, base+"/topics/orders/messages", `[data-testid="records"]`)
		if injected := evaluate[int](t, br, injectedJS); injected != 0 {
			t.Errorf("markup from Kafka data reached the messages page (%d)", injected)
		}
		br.checkProblems(t)
	})

	t.Run("binary and huge values", func(t *testing.T) {
		createTopic(t, adm, "blobs", 1, nil)
		huge := strings.Repeat("0123456789", 30_000)
		produce(t, cl,
			&kgo.Record{Topic: "blobs", Key: []byte{0xff, 0x00, 0x01}, Value: []byte{0x00, 0x01, 0x02, 0xfe, 0xff, 'a', 'b'}},
			&kgo.Record{Topic: "blobs", Key: []byte("big"), Value: []byte(huge)})
		br.open(t, base+"/topics/blobs/messages", `[data-testid="records"]`)
		if hex := evaluate[int](t, br, `document.querySelectorAll('[data-testid="record"] pre[data-kind="hex"]').length`); hex != 2 {
			t.Errorf("%d hex dumps, want 2 (the binary key and value)", hex)
		}
		br.screenshot(t, "binary-and-huge")
		br.clickLink(t, "show more", `[data-testid="full-value"]`)
		if got := br.text(t, `[data-testid="full-value"] pre`); got != huge {
			t.Errorf("the record's page shows %d bytes of the value, want all %d", len(got), len(huge))
		}
		br.checkProblems(t)
	})

	t.Run("key filter, offset and time", func(t *testing.T) {
		createTopic(t, adm, "events", 2, nil)
		at := func(year int) time.Time { return time.Date(year, 1, 1, 0, 0, 0, 0, time.UTC) }
		var recs []*kgo.Record
		for i, k := range []string{"alpha-1", "beta-1", "alpha-2", "beta-2", "alpha-3"} {
			recs = append(recs, &kgo.Record{Topic: "events", Partition: 0, Key: []byte(k), Value: []byte(fmt.Sprint(i)), Timestamp: at(2020 + i)})
		}
		for i := range 12 {
			recs = append(recs, &kgo.Record{Topic: "events", Partition: 1, Key: []byte(fmt.Sprintf("gamma-%d", i)), Value: []byte("g"), Timestamp: at(2030)})
		}
		pcl := newKafkaClient(t, broker, kgo.RecordPartitioner(kgo.ManualPartitioner()))
		produce(t, pcl, recs...)
		br.open(t, base+"/topics/events/messages", `[data-testid="records"]`)
		if n := len(br.texts(t, `[data-testid="record"]`)); n != 17 {
			t.Errorf("the newest records of all partitions: %d rows, want all 17", n)
		}
		br.run(t, "filter by key", chromedp.SendKeys(chromedp.CSS(`[data-testid="key-filter"]`), "alpha"+kb.Enter),
			chromedp.WaitVisible(chromedp.Search(`//p[@data-testid="read-summary"][contains(., "whose key contains")]`)))
		keys := br.texts(t, `[data-testid="record"] td:nth-child(4)`)
		equalStrings(t, "keys matching alpha, newest first", keys, []string{"alpha-3", "alpha-2", "alpha-1"})

		br.open(t, base+"/topics/events/messages", `[data-testid="records"]`)
		br.fill(t, "Partition", "0")
		br.fill(t, "From", "offset")
		br.fill(t, "Offset", "3")
		br.clickButton(t, "Show", `[data-testid="records"]`)
		br.waitText(t, `[data-testid="record"] td:nth-child(2)`, 10*time.Second, func(s string) bool { return s == "3" }, "the first record at offset 3")
		equalStrings(t, "offsets from 3 in partition 0", br.texts(t, `[data-testid="record"] td:nth-child(2)`), []string{"3", "4"})

		br.fill(t, "From", "time")
		br.fill(t, "Time (UTC)", "2022-01-01T00:00:00Z")
		br.clickButton(t, "Show", `[data-testid="records"]`)
		br.waitText(t, `[data-testid="record"] td:nth-child(4)`, 10*time.Second, func(s string) bool { return s == "alpha-2" }, "the first record of 2022")
		br.checkProblems(t)
	})

	t.Run("consumer group lag and reset", func(t *testing.T) {
		createTopic(t, adm, "payments", 2, nil)
		pcl := newKafkaClient(t, broker, kgo.RecordPartitioner(kgo.ManualPartitioner()))
		for i := range 10 {
			produce(t, pcl, &kgo.Record{Topic: "payments", Partition: int32(i % 2), Value: []byte("p")})
		}
		member := newKafkaClient(t, broker, kgo.ConsumerGroup("billing"), kgo.ConsumeTopics("payments"),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit())
		for ctx, n := ctxFor(t, 30*time.Second), 0; n < 10 && ctx.Err() == nil; {
			n += len(member.PollFetches(ctx).Records())
		}
		// Commit offset 2 of each partition's 5 records: lag 3 + 3.
		commit := map[string]map[int32]kgo.EpochOffset{"payments": {0: {Epoch: -1, Offset: 2}, 1: {Epoch: -1, Offset: 2}}}
		var commitErr error
		member.CommitOffsetsSync(ctxFor(t, 10*time.Second), commit, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, _ *kmsg.OffsetCommitResponse, err error) {
			commitErr = err
		})
		if commitErr != nil {
			t.Fatal(commitErr)
		}
		br.open(t, base+"/", `[data-testid="broker-count"]`)
		br.clickLink(t, "Consumer groups", `[data-testid="groups"]`)
		br.clickLink(t, "billing", `[data-testid="lag-table"]`)
		if got := br.text(t, `[data-testid="member-count"]`); got != "1" {
			t.Errorf("member-count = %q while a consumer is in the group, want 1", got)
		}
		if canReset := evaluate[int](t, br, `document.querySelectorAll('[data-testid="reset-form"]').length`); canReset != 0 {
			t.Error("the reset form is offered while the group has a member")
		}
		member.Close()
		br.open(t, base+"/groups", `[data-testid="groups"]`)
		row := br.waitText(t, `[data-testid="groups"] tbody tr:last-child`, 20*time.Second, func(s string) bool {
			br.run(t, "reload", chromedp.Reload())
			return strings.Contains(s, "Empty")
		}, "billing to be Empty")
		if !strings.Contains(row, "classic") {
			t.Errorf("groups row %q: want type classic", row)
		}
		br.clickLink(t, "billing", `[data-testid="lag-table"]`)
		equalStrings(t, "lag table headers", br.texts(t, `[data-testid="lag-table"] th`),
			[]string{"Topic", "Partition", "Committed offset", "End offset", "Lag", "Member"})
		if got := br.text(t, `[data-testid="lag-total"]`); got != "6" {
			t.Errorf("lag-total = %q, want 6", got)
		}
		// The chart fills in as the sampler runs; app.js swaps in the new section.
		br.run(t, "lag chart line", chromedp.WaitVisible(chromedp.CSS(`[data-testid="lag-chart"] polyline`)))
		br.screenshot(t, "group")

		br.fill(t, "To", "earliest")
		br.clickButton(t, "Review reset…", `[data-testid="reset-plan"]`)
		br.screenshot(t, "reset-plan")
		br.clickButton(t, "Reset offsets", `[data-testid="reset-done"]`)
		if got := br.text(t, `[data-testid="lag-total"]`); got != "10" {
			t.Errorf("lag-total = %q after resetting to earliest, want 10", got)
		}
		br.checkProblems(t)
	})

	t.Run("a KIP-848 group, reset to a time", func(t *testing.T) {
		createTopic(t, adm, "ledger", 1, nil)
		pcl := newKafkaClient(t, broker)
		noon := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
		for i := range 4 { // 12:00, 13:00, 14:00, 15:00
			produce(t, pcl, &kgo.Record{Topic: "ledger", Value: []byte("l"), Timestamp: noon.Add(time.Duration(i) * time.Hour)})
		}
		member := newKafkaClient(t, broker, kgo.ConsumerGroup("audit"), kgo.ConsumeTopics("ledger"),
			kgo.ServerSideBalancer(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		for ctx, n := ctxFor(t, 30*time.Second), 0; n < 4 && ctx.Err() == nil; {
			n += len(member.PollFetches(ctx).Records())
		}
		if err := member.CommitUncommittedOffsets(ctxFor(t, 10*time.Second)); err != nil {
			t.Fatal(err)
		}
		br.open(t, base+"/groups/audit", `[data-testid="lag-table"]`)
		if got := br.text(t, `[data-testid="group-type"]`); got != "consumer" {
			t.Errorf("group-type = %q for a KIP-848 group, want consumer", got)
		}
		if got := br.text(t, `[data-testid="member-count"]`); got != "1" {
			t.Errorf("member-count = %q while a KIP-848 member is in the group, want 1", got)
		}
		if got := br.text(t, `[data-testid="lag-total"]`); got != "0" {
			t.Errorf("lag-total = %q after the member committed everything, want 0", got)
		}
		member.Close() // leaves the group (member epoch -1)
		br.waitText(t, `[data-testid="member-count"]`, 20*time.Second, func(s string) bool {
			br.run(t, "reload", chromedp.Reload())
			return s == "0"
		}, "audit to have no members")
		br.fill(t, "To", "timestamp")
		br.fill(t, "Time (UTC)", "2024-05-01T13:30:00Z")
		br.clickButton(t, "Review reset…", `[data-testid="reset-plan"]`)
		br.clickButton(t, "Reset offsets", `[data-testid="reset-done"]`)
		// The first record at or after 13:30 is the 14:00 one, offset 2: two records to read again.
		if got := br.text(t, `[data-testid="lag-total"]`); got != "2" {
			t.Errorf("lag-total = %q after resetting to 13:30, want 2", got)
		}
		offsets, err := adm.FetchOffsets(ctxFor(t, 10*time.Second), "audit")
		if err != nil {
			t.Fatal(err)
		}
		if o, _ := offsets.Lookup("ledger", 0); o.At != 2 {
			t.Errorf("committed offset of ledger-0 = %d after the reset, want 2", o.At)
		}
		br.checkProblems(t)
	})

	t.Run("edit configs and delete a topic", func(t *testing.T) {
		br.open(t, base+"/topics/orders", `[data-testid="set-config"]`)
		br.fill(t, "Config name", "cleanup.policy")
		br.fill(t, "Config value", "compact")
		br.clickButton(t, "Set config", `[data-testid="config-overrides"]`)
		br.waitText(t, `[data-testid="config-overrides"] tbody`, 10*time.Second, func(s string) bool {
			return strings.Contains(s, "cleanup.policy") && strings.Contains(s, "compact")
		}, "the cleanup.policy override")
		br.run(t, "remove the override", chromedp.Click(chromedp.Search(`//tr[td[1][.="cleanup.policy"]]//button`)))
		br.waitText(t, `[data-testid="config-overrides"] tbody`, 10*time.Second, func(s string) bool {
			return !strings.Contains(s, "cleanup.policy")
		}, "the override removed")

		br.open(t, base+"/topics/blobs", `[data-testid="partitions-table"]`)
		br.clickLink(t, "Delete topic…", `form[action$="/delete"]`)
		br.clickButton(t, "Delete topic blobs", `[data-testid="result"]`)
		testutil.WaitFor(t, 20*time.Second, func() bool { return !topicExists(t, adm, "blobs") }, "topic blobs deleted")
		br.checkProblems(t)
	})

	t.Run("doctor", func(t *testing.T) {
		two := "2"
		createTopic(t, adm, "fragile", 1, map[string]*string{"min.insync.replicas": &two})
		br.open(t, base+"/", `[data-testid="broker-count"]`)
		br.clickLink(t, "Doctor", `[data-testid="findings"]`)
		finding := br.text(t, `[data-code="min_isr_above_replication_factor"]`)
		for _, want := range []string{`topic "fragile"`, "min_insync_replicas=2", "replication_factor=1", "Fix:"} {
			if !strings.Contains(finding, want) {
				t.Errorf("finding %q lacks %q", finding, want)
			}
		}
		br.screenshot(t, "doctor")
		br.checkProblems(t)
	})

	t.Run("cross-site changes are refused", func(t *testing.T) {
		// Another site's page that posts a form to the console as soon as it loads.
		evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprintf(w, `<!doctype html><title>evil</title><form id=f method=post action=%q>
<input name=name value=csrf-topic><input name=partitions value=1></form>
<script>document.getElementById("f").submit()</script>`, base+"/topics")
		}))
		defer evil.Close()
		br.open(t, evil.URL, `body`)
		br.run(t, "the refusal", chromedp.WaitVisible(chromedp.Search(`//p[@data-testid="error"][contains(., "refused")]`)))
		for _, path := range []string{"/topics", "/topics/orders/delete", "/topics/orders/produce", "/topics/orders/configs", "/groups/billing/reset"} {
			form := url.Values{"name": {"evil"}, "partitions": {"1"}, "confirm": {"orders"}, "value": {"x"},
				"op": {"set"}, "spec": {"latest"}, "topic": {"payments"}}
			req, _ := http.NewRequest(http.MethodPost, base+path, strings.NewReader(form.Encode()))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			req.Header.Set("Origin", "http://evil.example")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusForbidden {
				t.Errorf("cross-origin POST %s: status %d, want 403", path, resp.StatusCode)
			}
		}
		// A page of another site whose name was re-pointed at 127.0.0.1 (DNS rebinding).
		req, _ := http.NewRequest(http.MethodGet, base+"/", nil)
		req.Host = "rebound.example:80"
		if resp, err := http.DefaultClient.Do(req); err != nil {
			t.Fatal(err)
		} else if resp.Body.Close(); resp.StatusCode != http.StatusMisdirectedRequest {
			t.Errorf("GET with Host %s: status %d, want 421", req.Host, resp.StatusCode)
		}
		if topicExists(t, adm, "csrf-topic") || topicExists(t, adm, "evil") || !topicExists(t, adm, "orders") {
			t.Error("a cross-site request changed the topics")
		}
		ends, err := adm.ListEndOffsets(ctxFor(t, 10*time.Second), "orders")
		if err != nil {
			t.Fatal(err)
		}
		var records int64
		ends.Each(func(o kadm.ListedOffset) { records += o.Offset })
		if records != 2 {
			t.Errorf("orders holds %d records, want the 2 produced by the tests", records)
		}
		br.checkProblems(t)
	})

	t.Run("10,000 partitions are paginated", func(t *testing.T) {
		defer func() {
			if t.Failed() {
				for line := range strings.Lines(broker.Log()) {
					if strings.Contains(line, "level=ERROR") || strings.Contains(line, "level=WARN") {
						t.Logf("broker: %s", strings.TrimSpace(line))
					}
				}
			}
		}()
		// Under load the broker may answer REQUEST_TIMED_OUT while it goes on
		// creating the partitions: what counts is that they all get a leader.
		if resp, err := adm.CreateTopic(ctxFor(t, 2*time.Minute), 10_000, 1, nil, "wide"); err != nil && !errors.Is(err, kerr.RequestTimedOut) {
			t.Fatalf("create wide: %v (%s)", err, resp.ErrMessage)
		}
		testutil.WaitFor(t, 2*time.Minute, func() bool {
			ends, err := adm.ListEndOffsets(ctxFor(t, 10*time.Second), "wide")
			return err == nil && ends.Error() == nil && len(ends["wide"]) == 10_000
		}, "every partition of wide to have a leader")
		pcl := newKafkaClient(t, broker, kgo.RecordPartitioner(kgo.ManualPartitioner()))
		produce(t, pcl, &kgo.Record{Topic: "wide", Partition: 9_999, Value: []byte("at the end")})
		start := time.Now()
		br.open(t, base+"/topics/wide", `[data-testid="pagination"]`)
		t.Logf("topic page with 10,000 partitions loaded in %v", time.Since(start))
		if got := br.text(t, `[data-testid="pagination"] span`); !strings.Contains(got, "of 10000") {
			t.Errorf("pagination says %q", got)
		}
		if rows := br.texts(t, `[data-testid="partitions-table"] tbody tr`); len(rows) != 100 {
			t.Errorf("%d rows on the first page, want 100", len(rows))
		}
		br.clickLink(t, "Next →", `[data-testid="partitions-table"]`)
		br.waitText(t, `[data-testid="partitions-table"] tbody tr:first-child td:first-child`, 10*time.Second,
			func(s string) bool { return s == "100" }, "partition 100 first on page 2")
		br.screenshot(t, "wide")
		start = time.Now()
		br.open(t, base+"/topics/wide/messages", `[data-testid="records"]`)
		t.Logf("the newest records of 10,000 partitions loaded in %v", time.Since(start))
		if got := br.texts(t, `[data-testid="record"] td:nth-child(5)`); !slices.Equal(got, []string{"at the end"}) {
			t.Errorf("messages of wide: %q; the page says %q", got, br.texts(t, `main p`))
		}
		br.open(t, base+"/", `[data-testid="partition-count"]`)
		br.checkProblems(t)
	})

	t.Run("a stopped cluster is reported and retried", func(t *testing.T) {
		broker.Kill() // kill -9: a clean stop of 10,000 partitions under -race takes longer than the fault needs
		// Pages may answer from metadata up to MetadataMinAge (250 ms) old, so the
		// first page after the kill can still show the cluster up.
		testutil.WaitFor(t, 10*time.Second, func() bool {
			resp, err := http.Get(base + "/")
			if err != nil {
				return false
			}
			resp.Body.Close()
			return resp.StatusCode == http.StatusServiceUnavailable
		}, "the console to notice the cluster is down")
		br.open(t, base+"/", `[data-testid="cluster-down"]`)
		br.screenshot(t, "down")
		resp, err := http.Get(base + "/topics")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
			t.Errorf("with the cluster down: status %d, Retry-After %q; want 503 and a Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"))
		}
		broker.StartAgain(t)
		// The page reloads itself every RetryInterval until the cluster answers.
		br.waitText(t, `[data-testid="broker-count"]`, 30*time.Second, func(s string) bool { return s == "1" }, "the overview back")
		br.checkProblems(t)
	})
}
