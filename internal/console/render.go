package console

import (
	"bytes"
	"embed"
	"html/template"
	"io/fs"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// page is what the layout template renders around a page's content.
type page struct {
	Title   string // the page's own title; the document title adds "Samsa"
	Nav     string // which navigation link is current
	Brokers string // the bootstrap brokers, shown in the header
	Refresh int    // seconds before the browser reloads the page; 0 never
	Down    *downInfo
	Data    any
}

// downInfo is what the layout says when the cluster could not be reached.
type downInfo struct {
	Error      string
	RetrySecs  int
	RetryAfter string
}

// templates holds one parsed template set per page, each the layout plus the page.
type templates map[string]*template.Template

var funcs = template.FuncMap{
	"topicURL": topicURL,
	"groupURL": groupURL,
	"join":     joinInt32s,
	"until": func(n int) []int32 {
		out := make([]int32, n)
		for i := range out {
			out[i] = int32(i)
		}
		return out
	},
}

func parseTemplates() (templates, error) {
	base, err := template.New("layout.html").Funcs(funcs).ParseFS(templateFS, "templates/layout.html")
	if err != nil {
		return nil, err
	}
	names, err := fs.Glob(templateFS, "templates/*.html")
	if err != nil {
		return nil, err
	}
	out := templates{}
	for _, name := range names {
		short := strings.TrimSuffix(strings.TrimPrefix(name, "templates/"), ".html")
		if short == "layout" {
			continue
		}
		t, err := template.Must(base.Clone()).ParseFS(templateFS, name)
		if err != nil {
			return nil, err
		}
		out[short] = t
	}
	return out, nil
}

// render writes a page with the given status. The page is rendered into a buffer
// first so that a template error becomes a 500, not half a page.
func (s *Server) render(w http.ResponseWriter, status int, name string, p page) {
	p.Brokers = strings.Join(s.cfg.Brokers, ",")
	if p.Down != nil && p.Refresh == 0 {
		p.Refresh = p.Down.RetrySecs
	}
	var buf bytes.Buffer
	t, ok := s.templates[name]
	if !ok {
		http.Error(w, "no template "+name, http.StatusInternalServerError)
		return
	}
	if err := t.ExecuteTemplate(&buf, "layout.html", p); err != nil {
		s.cfg.Logger.Error("render", "page", name, "err", err)
		http.Error(w, "internal error rendering the page", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// renderFragment writes one named template of a page alone (for app.js refreshes).
func (s *Server) renderFragment(w http.ResponseWriter, name, fragment string, data any) {
	var buf bytes.Buffer
	if err := s.templates[name].ExecuteTemplate(&buf, fragment, data); err != nil {
		s.cfg.Logger.Error("render", "page", name, "fragment", fragment, "err", err)
		http.Error(w, "internal error rendering the page", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, _ = w.Write(buf.Bytes())
}

// fail renders the page for err: "cluster down" (503, reloading itself) when the
// cluster could not be reached, otherwise the error's text (status as given).
func (s *Server) fail(w http.ResponseWriter, status int, title string, err error) {
	err = classify(err)
	if isUnreachable(err) {
		secs := int(s.cfg.RetryInterval.Seconds() + 0.5)
		w.Header().Set("Retry-After", strconv.Itoa(secs))
		s.render(w, http.StatusServiceUnavailable, "message", page{Title: "Cluster unreachable",
			Down: &downInfo{Error: err.Error(), RetrySecs: max(secs, 1)}})
		return
	}
	s.render(w, status, "message", page{Title: title, Data: messageData{Error: err.Error()}})
}

// messageData is the body of the message page: an outcome or an error, and a link on.
type messageData struct {
	Error    string
	Message  string
	Next     string
	NextText string
}

// pager is one page of a list of n rows, 1-based.
type pager struct {
	Page, Pages, Size, Total int
	From, To                 int // the rows shown, 1-based, inclusive (0, 0 when empty)
	PrevURL, NextURL         string
}

// paginate picks the page asked for by ?page= (clamped) of n rows; link builds the
// URL of another page.
func paginate(r *http.Request, n, size int) pager {
	p := pager{Size: size, Total: n, Pages: max(1, (n+size-1)/size)}
	p.Page, _ = strconv.Atoi(r.URL.Query().Get("page"))
	p.Page = min(max(p.Page, 1), p.Pages)
	if n > 0 {
		p.From, p.To = (p.Page-1)*size+1, min(p.Page*size, n)
	}
	link := func(page int) string {
		q := r.URL.Query()
		q.Set("page", strconv.Itoa(page))
		return r.URL.Path + "?" + q.Encode()
	}
	if p.Page > 1 {
		p.PrevURL = link(p.Page - 1)
	}
	if p.Page < p.Pages {
		p.NextURL = link(p.Page + 1)
	}
	return p
}

// bounds returns the slice bounds of the page's rows.
func (p pager) bounds() (int, int) {
	if p.Total == 0 {
		return 0, 0
	}
	return p.From - 1, p.To
}

func topicURL(topic string) string { return "/topics/" + url.PathEscape(topic) }
func groupURL(group string) string { return "/groups/" + url.PathEscape(group) }

func joinInt32s(ids []int32) string {
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = strconv.Itoa(int(id))
	}
	return strings.Join(parts, ", ")
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
