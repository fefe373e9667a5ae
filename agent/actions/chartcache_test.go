package actions

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/repo"

	"tugboat.dev/tugboat/api/wire"
)

func TestChartCache_boundVerificationAndDigests(t *testing.T) {
	g := NewWithT(t)
	c := newChartCache(10)
	k := func(version, digest string) chartKey {
		return chartKey{repository: "https://charts.example", name: "web", version: version, digest: digest}
	}

	c.put(k("1.0.0", ""), []byte("abc"))
	g.Expect(c.len()).To(BeZero(), "a package without a digest is not kept")
	c.put(k("1.0.0", "d1"), []byte("0123456789a"))
	g.Expect(c.len()).To(BeZero(), "a package larger than the cache is not kept")

	c.put(k("1.0.0", "d1"), []byte("aaaa"))
	c.put(k("1.1.0", "d2"), []byte("bbbb"))
	_, ok := c.get(k("1.0.0", "d1")) // 1.0.0 is now the most recently used
	g.Expect(ok).To(BeTrue())
	c.put(k("1.2.0", "d3"), []byte("cccc"))
	n, size := c.len()
	g.Expect(n).To(Equal(2))
	g.Expect(size).To(BeNumerically("<=", 10), "the bound holds")
	_, ok = c.get(k("1.1.0", "d2"))
	g.Expect(ok).To(BeFalse(), "the least recently used went first")

	_, ok = c.get(k("1.0.0", "other-digest"))
	g.Expect(ok).To(BeFalse(), "the same version under another digest is another chart")

	// An entry whose bytes no longer match what was stored is dropped.
	data, ok := c.get(k("1.2.0", "d3"))
	g.Expect(ok).To(BeTrue())
	data[0] = 'X'
	_, ok = c.get(k("1.2.0", "d3"))
	g.Expect(ok).To(BeFalse())
	n, _ = c.len()
	g.Expect(n).To(Equal(1))
}

// testRepo is an HTTP chart repository a test publishes to (net/http's
// file server: Last-Modified, If-Modified-Since, no ETag), counting the
// downloads of each package and the answers to index reads by status.
type testRepo struct {
	dir string
	srv *httptest.Server
	// published is the index's modification time as of the last publish:
	// an hour ago plus a second per publish, so that each publish has a
	// Last-Modified of its own, older than any answer's Date by more than
	// a second (a strong validator).
	published time.Time
	// etags makes the repository send an ETag for the index (the first 16
	// hex digits of its SHA-256), which net/http's file server then checks
	// against If-None-Match.
	etags bool

	mu        sync.Mutex
	downloads map[string]int
	indexes   map[int]int // index.yaml answers by status code
}

func newTestRepo(t *testing.T) *testRepo {
	t.Helper()
	r := &testRepo{dir: t.TempDir(), downloads: map[string]int{}, indexes: map[int]int{},
		published: time.Now().Add(-time.Hour).Truncate(time.Second)}
	files := http.FileServer(http.Dir(r.dir))
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if strings.HasSuffix(req.URL.Path, ".tgz") {
			r.mu.Lock()
			r.downloads[strings.TrimPrefix(req.URL.Path, "/")]++
			r.mu.Unlock()
		}
		if strings.HasSuffix(req.URL.Path, "/index.yaml") {
			if r.etags {
				data, err := os.ReadFile(filepath.Join(r.dir, "index.yaml"))
				if err == nil {
					w.Header().Set("ETag", `"`+hexDigest(data)[:16]+`"`)
				}
			}
			rec := &statusRecorder{ResponseWriter: w}
			files.ServeHTTP(rec, req)
			r.mu.Lock()
			r.indexes[rec.status]++
			r.mu.Unlock()
			return
		}
		files.ServeHTTP(w, req)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

// statusRecorder notes the status code a handler answers.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (s *statusRecorder) WriteHeader(code int) {
	s.status = code
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusRecorder) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}

// indexAnswers returns how many reads of the index were answered 200 and
// how many 304.
func (r *testRepo) indexAnswers() (full, notModified int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.indexes[http.StatusOK], r.indexes[http.StatusNotModified]
}

// backdate sets the index's modification time to at, as a repository
// whose Last-Modified does not change when its index does.
func (r *testRepo) backdate(t *testing.T, at time.Time) {
	t.Helper()
	if err := os.Chtimes(filepath.Join(r.dir, "index.yaml"), at, at); err != nil {
		t.Fatal(err)
	}
}

// publish packages ch into the repository (replacing a package of the
// same name and version) and writes the index again.
func (r *testRepo) publish(t *testing.T, ch *chart.Chart) {
	t.Helper()
	if _, err := chartutil.Save(ch, r.dir); err != nil {
		t.Fatalf("packaging %s: %v", ch.Name(), err)
	}
	_ = os.Remove(filepath.Join(r.dir, "index.yaml"))
	index, err := repo.IndexDirectory(r.dir, "")
	if err != nil {
		t.Fatalf("indexing: %v", err)
	}
	if err := index.WriteFile(filepath.Join(r.dir, "index.yaml"), 0o600); err != nil {
		t.Fatalf("writing the index: %v", err)
	}
	r.published = r.published.Add(time.Second)
	r.backdate(t, r.published)
}

func (r *testRepo) downloadsOf(pkg string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.downloads[pkg]
}

// configChart is a chart holding one ConfigMap whose data says version and
// note, and, with extra, the templates extra.
func configChart(name, version, note string, extra ...*chart.File) *chart.Chart {
	return &chart.Chart{
		Metadata: &chart.Metadata{APIVersion: chart.APIVersionV2, Name: name, Version: version},
		Templates: append([]*chart.File{{Name: "templates/config.yaml", Data: []byte(
			"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}\ndata:\n  version: " + version + "\n  note: " + note + "\n")}}, extra...),
	}
}

// installChart installs ch as release name into ns.
func installChart(t *testing.T, ns, name string, ch *chart.Chart) {
	t.Helper()
	in := action.NewInstall(helmConfig(t, ns))
	in.ReleaseName, in.Namespace, in.Timeout = name, ns, 30*time.Second
	if _, err := in.RunWithContext(context.Background(), ch, nil); err != nil {
		t.Fatalf("helm install %s: %v", name, err)
	}
}

// Issue 28, item 4: a chart promoted into several releases of a spoke is
// downloaded once; republished under the same version (a new digest in
// the index), it is downloaded again and the new package is the one
// installed.
func TestExecutor_keepsChartsByDigest(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	r := newTestRepo(t)
	r.publish(t, configChart("notes", "1.0.0", "first"))
	r.publish(t, configChart("notes", "1.1.0", "first"))
	for _, name := range []string{"a", "b", "c"} {
		installChart(t, ns, name, configChart("notes", "1.0.0", "first"))
	}
	limits := allowAll()
	limits.ChartSources = append(limits.ChartSources, r.srv.URL)
	e := newExecutor(t, testOptions(limits))
	upgrade := func(release string) {
		a := upgradeAction(ns, release, "1.1.0")
		a.Chart = wire.ChartSource{Repository: r.srv.URL, Name: "notes"}
		out := execute(t, e, a)
		g.Expect(out.Result).To(Equal(wire.ActionSucceeded), out.Message)
	}

	upgrade("a")
	upgrade("b")
	g.Expect(r.downloadsOf("notes-1.1.0.tgz")).To(Equal(1), "the second release's upgrade used the package kept")

	r.publish(t, configChart("notes", "1.1.0", "republished"))
	upgrade("c")
	g.Expect(r.downloadsOf("notes-1.1.0.tgz")).To(Equal(2), "a new digest under the same version is downloaded again")
	g.Expect(last(t, ns, "c").Manifest).To(ContainSubstring("note: republished"))
	g.Expect(last(t, ns, "b").Manifest).To(ContainSubstring("note: first"))
}

// Without a cache (--actions-chart-cache-size=0) every action downloads.
func TestExecutor_chartCacheCanBeTurnedOff(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	r := newTestRepo(t)
	r.publish(t, configChart("notes", "1.1.0", "first"))
	for _, name := range []string{"a", "b"} {
		installChart(t, ns, name, configChart("notes", "1.0.0", "first"))
	}
	limits := allowAll()
	limits.ChartSources = append(limits.ChartSources, r.srv.URL)
	opts := testOptions(limits)
	opts.ChartCacheSize = 0
	e := newExecutor(t, opts)
	for _, name := range []string{"a", "b"} {
		a := upgradeAction(ns, name, "1.1.0")
		a.Chart = wire.ChartSource{Repository: r.srv.URL, Name: "notes"}
		g.Expect(execute(t, e, a).Result).To(Equal(wire.ActionSucceeded))
	}
	g.Expect(r.downloadsOf("notes-1.1.0.tgz")).To(Equal(2))
}
