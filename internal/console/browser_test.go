package console

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// Environment variables for debugging browser tests: a directory where they also
// save their screenshots (they always save them under the test's temporary
// directory), and a file that receives a goroutine dump when a browser step fails.
const (
	screenshotsEnv = "SAMSA_CONSOLE_SCREENSHOTS"
	dumpEnv        = "SAMSA_CONSOLE_TEST_DUMP"
)

// browser is a headless Chromium driven with chromedp for one test. It records every
// uncaught JavaScript exception and every Content-Security-Policy violation of every
// page it loads; the test fails if there were any.
type browser struct {
	t     testing.TB
	ctx   context.Context
	shots string

	mu       sync.Mutex
	problems []string
}

// chromiumPath finds Debian's chromium (installed by scripts/install-test-deps.sh).
func chromiumPath(t testing.TB) string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatal("no chromium on PATH: install it with scripts/install-test-deps.sh (Debian package chromium)")
	return ""
}

func newBrowser(t testing.TB) *browser {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromiumPath(t)),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 900),
	)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelCtx := chromedp.NewContext(allocCtx)
	b := &browser{t: t, ctx: ctx, shots: t.TempDir()}
	// The first action starts the browser; it must not run under a timeout.
	if err := chromedp.Do(ctx); err != nil {
		cancelCtx()
		cancelAlloc()
		t.Fatalf("start chromium: %v", err)
	}
	err := chromedp.Listen(ctx, func(ev any) {
		switch e := ev.(type) {
		case *runtime.EventExceptionThrown:
			d := e.ExceptionDetails
			desc := d.Text
			if d.Exception != nil {
				desc += " " + d.Exception.Description
			}
			b.problem("uncaught exception: %s (%s:%d)", desc, d.URL, d.LineNumber+1)
		case *log.EventEntryAdded:
			if e.Entry.Source == log.EntrySourceSecurity || (e.Entry.Source == log.EntrySourceJavascript && e.Entry.Level == log.EntryLevelError) {
				b.problem("%s %s: %s (%s)", e.Entry.Source, e.Entry.Level, e.Entry.Text, e.Entry.URL)
			}
		}
	})
	if err != nil {
		cancelCtx()
		cancelAlloc()
		t.Fatalf("listen to chromium: %v", err)
	}
	t.Cleanup(func() {
		cancelCtx()
		cancelAlloc()
		b.checkProblems(t)
	})
	return b
}

func (b *browser) problem(format string, args ...any) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.problems = append(b.problems, fmt.Sprintf(format, args...))
}

// checkProblems fails t for every exception or CSP violation seen so far, once.
func (b *browser) checkProblems(t testing.TB) {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, p := range b.problems {
		t.Errorf("browser: %s", p)
	}
	b.problems = nil
}

// run runs chromedp actions with a deadline, failing the test on error.
func (b *browser) run(t testing.TB, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		if path := os.Getenv(dumpEnv); path != "" {
			if f, err := os.Create(path); err == nil {
				pprof.Lookup("goroutine").WriteTo(f, 1)
				f.Close()
			}
		}
		b.screenshot(t, "failed")
		t.Fatalf("browser: %s: %v\nthe page: %s", what, err, b.describe())
	}
}

// describe says where the browser is and what the page says, for failure messages.
func (b *browser) describe() string {
	ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Evaluate[string](
		`location.href + " (" + document.title + "): " + (document.querySelector("main") || document.body).innerText.slice(0, 600)`))
	if err != nil {
		return "unknown: " + err.Error()
	}
	return s
}

// open loads url and waits for sel.
func (b *browser) open(t testing.TB, url, sel string) {
	t.Helper()
	b.run(t, "open "+url, chromedp.Navigate(url), chromedp.WaitVisible(chromedp.CSS(sel)))
}

// clickLink clicks the first link whose text is text and waits for sel.
func (b *browser) clickLink(t testing.TB, text, sel string) {
	t.Helper()
	xpath := fmt.Sprintf(`//a[normalize-space(.)=%s]`, xpathString(text))
	b.run(t, "click link "+text, chromedp.Click(chromedp.Search(xpath), chromedp.NodeVisible), chromedp.WaitVisible(chromedp.CSS(sel)))
}

// clickButton clicks the button whose text is text and waits for sel.
func (b *browser) clickButton(t testing.TB, text, sel string) {
	t.Helper()
	xpath := fmt.Sprintf(`//button[normalize-space(.)=%s]`, xpathString(text))
	b.run(t, "click button "+text, chromedp.Click(chromedp.Search(xpath), chromedp.NodeVisible), chromedp.WaitVisible(chromedp.CSS(sel)))
}

// fill types value into the form control labelled label (replacing what was there).
func (b *browser) fill(t testing.TB, label, value string) {
	t.Helper()
	id := b.controlFor(t, label)
	b.run(t, "fill "+label, chromedp.SetValue(chromedp.ID(id), value))
}

// controlFor returns the id of the control whose <label> says label (for= or nested).
func (b *browser) controlFor(t testing.TB, label string) string {
	t.Helper()
	js := fmt.Sprintf(`(() => {
		const own = l => Array.from(l.childNodes).filter(n => n.nodeType === Node.TEXT_NODE).map(n => n.textContent).join("").trim();
		const l = Array.from(document.querySelectorAll("label")).find(l => own(l) === %q);
		if (!l) return "";
		const c = l.control;
		if (!c) return "";
		if (!c.id) c.id = "ctl-" + Math.random().toString(36).slice(2);
		return c.id;
	})()`, label)
	id := evaluate[string](t, b, js)
	if id == "" {
		b.screenshot(t, "no-label")
		t.Fatalf("no form control labelled %q", label)
	}
	return id
}

// text returns the text of the first element matching sel.
func (b *browser) text(t testing.TB, sel string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel), chromedp.NodeVisible))
	if err != nil {
		b.screenshot(t, "failed")
		t.Fatalf("browser: text of %s: %v", sel, err)
	}
	return strings.TrimSpace(s)
}

// evaluate evaluates a JavaScript expression in the page and decodes its value.
func evaluate[T any](t testing.TB, b *browser, js string) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](js))
	if err != nil {
		b.screenshot(t, "failed")
		t.Fatalf("browser: evaluate %s: %v", js, err)
	}
	return v
}

// texts returns the trimmed text of every element matching sel.
func (b *browser) texts(t testing.TB, sel string) []string {
	t.Helper()
	return evaluate[[]string](t, b, fmt.Sprintf(`Array.from(document.querySelectorAll(%q)).map(e => e.textContent.trim())`, sel))
}

// waitText polls until the text of sel satisfies ok (which may reload the page).
func (b *browser) waitText(t testing.TB, sel string, timeout time.Duration, ok func(string) bool, what string) string {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ctx, cancel := context.WithTimeout(b.ctx, 2*time.Second)
		s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
		cancel()
		if err == nil && ok(strings.TrimSpace(s)) {
			return strings.TrimSpace(s)
		}
		if time.Now().After(deadline) {
			b.screenshot(t, "wait")
			t.Fatalf("timed out after %v waiting for %s (text of %s: %q, err %v)", timeout, what, sel, s, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// screenshot saves a full-page PNG under the test's temporary directory (and
// $SAMSA_CONSOLE_SCREENSHOTS when set) and returns its path.
func (b *browser) screenshot(t testing.TB, name string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 20*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Logf("screenshot %s: %v", name, err)
		return ""
	}
	file := strings.NewReplacer("/", "-", " ", "-").Replace(t.Name()+"-"+name) + ".png"
	path := filepath.Join(b.shots, file)
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Logf("screenshot %s: %v", name, err)
	}
	if dir := os.Getenv(screenshotsEnv); dir != "" {
		_ = os.MkdirAll(dir, 0o755)
		_ = os.WriteFile(filepath.Join(dir, file), png, 0o644)
	}
	return path
}

// xpathString quotes s for XPath 1.0 (which has no escapes).
func xpathString(s string) string {
	if !strings.Contains(s, `"`) {
		return `"` + s + `"`
	}
	parts := strings.Split(s, `"`)
	return `concat("` + strings.Join(parts, `", '"', "`) + `")`
}
