package dashboard

import (
	"bytes"
	"fmt"
	"html/template"
	"net/http"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
)

// pageTemplate is one page: the layout plus the page's content.
type pageTemplate struct{ t *template.Template }

// pageNames are the templates of templates/ besides the layout.
var pageNames = []string{"pipelines", "promotion", "release", "fleet", "error"}

func parsePages() (map[string]*pageTemplate, error) {
	out := map[string]*pageTemplate{}
	for _, name := range pageNames {
		t, err := template.New("layout.html").Funcs(funcs).ParseFS(assets, "templates/layout.html", "templates/"+name+".html")
		if err != nil {
			return nil, fmt.Errorf("dashboard: parsing template %s: %w", name, err)
		}
		out[name] = &pageTemplate{t: t}
	}
	return out, nil
}

// page is what every page's layout needs.
type page struct {
	// Title is the page's title.
	Title string
	// Nav is the navigation entry to mark current: pipelines or fleet.
	Nav string
	// Base is Options.BasePath, for links.
	Base string
	// Namespace is the namespace shown.
	Namespace string
	// ReadOnly is Options.ReadOnly.
	ReadOnly bool
	// Now is when the page was rendered.
	Now time.Time
	// Warnings are what could not be read (e.g. forbidden by RBAC).
	Warnings []string
	// Watch lists the kinds whose changes update the page (see
	// watched), comma-separated; empty for a page that does not update.
	Watch string
}

// page returns what the layout needs for a page that updates when an
// object of one of kinds changes.
func (s *Server) page(title, nav string, kinds ...string) page {
	return page{Title: title, Nav: nav, Base: s.opts.BasePath, Namespace: s.opts.Namespace, ReadOnly: s.opts.ReadOnly, Now: s.opts.Clock(), Watch: strings.Join(kinds, ",")}
}

// render writes page name with data, status 200, and the CSRF cookie.
func (s *Server) render(w http.ResponseWriter, name string, status int, data any) {
	var buf bytes.Buffer
	if err := s.pages[name].t.Execute(&buf, data); err != nil {
		s.opts.Log.Error(err, "rendering page", "page", name)
		http.Error(w, "rendering the page failed", http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	// Not Secure: tugboat ui serves plain HTTP on loopback, where a Secure
	// cookie would never come back.
	http.SetCookie(w, &http.Cookie{Name: s.cookieName, Value: s.token, Path: s.opts.BasePath, HttpOnly: true, SameSite: http.SameSiteStrictMode}) //nolint:gosec // plain HTTP on loopback
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// errorPage is the page of a refused or failed request.
type errorPage struct {
	page
	Status  int
	Message string
	Back    string
}

// fail answers status with message, as a page a person can read and
// leave.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, status int, message string) {
	back := s.opts.BasePath
	if name := r.PathValue("name"); name != "" && strings.HasPrefix(r.URL.Path, "/promotions/") {
		back = s.opts.BasePath + "promotions/" + name
	}
	p := errorPage{page: s.page(http.StatusText(status), ""), Status: status, Message: message, Back: back}
	s.render(w, "error", status, p)
}

var funcs = template.FuncMap{
	"age":       age,
	"ts":        ts,
	"rfc3339":   rfc3339,
	"short":     shortDigest,
	"lower":     strings.ToLower,
	"healthCls": healthClass,
	"phaseCls":  phaseClass,
	"join":      strings.Join,
	"tsv":       func(t metav1.Time) string { return ts(&t) },
	"rfc3339v":  func(t metav1.Time) string { return rfc3339(&t) },
	"int32":     func(i int) int32 { return int32(i) }, // a wave index, at most 22
	"diffLines": diffLines,
	"changeCls": changeClass,
	"pvCls":     previewPhaseClass,
}

// age renders how long ago t was, e.g. 3m12s, 5h, 2d.
func age(now time.Time, t *metav1.Time) string {
	if t == nil || t.IsZero() {
		return ""
	}
	return duration(now.Sub(t.Time))
}

// duration renders d coarsely, as kubectl's ages do.
func duration(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < 10*time.Minute:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	case d < 3*time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}

// ts renders t in UTC for people; "" when unset.
func ts(t *metav1.Time) string {
	if t == nil || t.IsZero() {
		return ""
	}
	return t.UTC().Format("2006-01-02 15:04:05 UTC")
}

// rfc3339 renders t for a <time datetime> attribute.
func rfc3339(t *metav1.Time) string {
	if t == nil || t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}

// shortDigest shortens "sha256:<hex>" to its first 12 hex digits.
func shortDigest(d string) string {
	d = strings.TrimPrefix(d, "sha256:")
	if len(d) > 12 {
		return d[:12]
	}
	return d
}

func healthClass(h tugboatv1alpha1.Health) string {
	switch h {
	case tugboatv1alpha1.HealthCurrent:
		return "ok"
	case tugboatv1alpha1.HealthFailed:
		return "bad"
	case tugboatv1alpha1.HealthInProgress:
		return "busy"
	}
	return "unknown"
}

func phaseClass(p tugboatv1alpha1.PromotionPhase) string {
	switch p {
	case tugboatv1alpha1.PromotionSucceeded:
		return "ok"
	case tugboatv1alpha1.PromotionFailed, tugboatv1alpha1.PromotionAborted, tugboatv1alpha1.PromotionRollingBack:
		return "bad"
	case tugboatv1alpha1.PromotionWaitingApproval, tugboatv1alpha1.PromotionPaused:
		return "wait"
	case tugboatv1alpha1.PromotionRunning, tugboatv1alpha1.PromotionVerifying:
		return "busy"
	}
	return "unknown"
}
