package actions

import (
	"net/http"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"helm.sh/helm/v3/pkg/repo"

	"tugboat.dev/tugboat/api/wire"
)

func TestIndexCache_keepsIndexesWithAValidatorWithinItsBound(t *testing.T) {
	g := NewWithT(t)
	c := newIndexCache(10)
	entry := func(base, etag, lm string, size int64) *indexEntry {
		return &indexEntry{base: base, etag: etag, lastModified: lm, index: &repo.IndexFile{}, size: size}
	}

	c.put(entry("https://a", "", "", 1))
	_, ok := c.get("https://a")
	g.Expect(ok).To(BeFalse(), "no validator: nothing to ask the server with")

	c.put(entry("https://a", `"1"`, "", 4))
	c.put(entry("https://b", "", "Mon, 02 Jan 2006 15:04:05 GMT", 4))
	n, size := c.len()
	g.Expect(n).To(Equal(2))
	g.Expect(size).To(Equal(int64(8)))

	_, ok = c.get("https://a") // a is now the most recently used
	g.Expect(ok).To(BeTrue())
	c.put(entry("https://c", `"1"`, "", 4))
	_, ok = c.get("https://b")
	g.Expect(ok).To(BeFalse(), "the least recently used goes first")
	_, ok = c.get("https://a")
	g.Expect(ok).To(BeTrue())

	c.put(entry("https://a", "", "", 2))
	_, ok = c.get("https://a")
	g.Expect(ok).To(BeFalse(), "an index read again without a validator replaces the kept one")
	c.put(entry("https://d", `"1"`, "", 11))
	_, ok = c.get("https://d")
	g.Expect(ok).To(BeFalse(), "larger than the whole cache")
	c.drop("https://c")
	n, size = c.len()
	g.Expect(n).To(BeZero())
	g.Expect(size).To(BeZero())

	var none *indexCache
	none.put(entry("https://a", `"1"`, "", 1))
	_, ok = none.get("https://a")
	g.Expect(ok).To(BeFalse(), "a nil cache keeps nothing")
}

func TestStrongLastModified(t *testing.T) {
	at := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	h := func(lm, date string) http.Header {
		hdr := http.Header{}
		if lm != "" {
			hdr.Set("Last-Modified", lm)
		}
		if date != "" {
			hdr.Set("Date", date)
		}
		return hdr
	}
	for _, tc := range []struct {
		name     string
		lm, date string
		want     bool
	}{
		{"a second older than the answer", at.Format(http.TimeFormat), at.Add(time.Second).Format(http.TimeFormat), true},
		{"an hour older", at.Format(http.TimeFormat), at.Add(time.Hour).Format(http.TimeFormat), true},
		{"within the second it was served", at.Format(http.TimeFormat), at.Format(http.TimeFormat), false},
		{"in the future", at.Add(time.Hour).Format(http.TimeFormat), at.Format(http.TimeFormat), false},
		{"no Date", at.Format(http.TimeFormat), "", false},
		{"no Last-Modified", "", at.Format(http.TimeFormat), false},
		{"not a date", "yesterday", at.Format(http.TimeFormat), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			NewWithT(t).Expect(strongLastModified(h(tc.lm, tc.date))).To(Equal(tc.want))
		})
	}
}

// indexFixture installs releases (at 1.0.0 of chart notes) into a new
// namespace and returns an executor allowed to upgrade them from r.
func indexFixture(t *testing.T, r *testRepo, opts func(*Options), releases ...string) (*Executor, string) {
	t.Helper()
	ns := newNamespace(t)
	for _, name := range releases {
		installChart(t, ns, name, configChart("notes", "1.0.0", "first"))
	}
	limits := allowAll()
	limits.ChartSources = append(limits.ChartSources, r.srv.URL)
	o := testOptions(limits)
	if opts != nil {
		opts(&o)
	}
	return newExecutor(t, o), ns
}

func upgradeFrom(t *testing.T, e *Executor, r *testRepo, ns, release, version string) wire.ActionOutcome {
	t.Helper()
	a := upgradeAction(ns, release, version)
	a.Chart = wire.ChartSource{Repository: r.srv.URL, Name: "notes"}
	return execute(t, e, a)
}

// Issue 28, item 4: the index of an unchanged repository is read once; the
// next actions ask with If-Modified-Since and reuse it on a 304; a new
// publish is read in full again.
func TestExecutor_readsAnUnchangedIndexThroughAConditionalGET(t *testing.T) {
	g := NewWithT(t)
	r := newTestRepo(t)
	r.publish(t, configChart("notes", "1.1.0", "first"))
	e, ns := indexFixture(t, r, nil, "a", "b", "c")

	g.Expect(upgradeFrom(t, e, r, ns, "a", "1.1.0").Result).To(Equal(wire.ActionSucceeded))
	g.Expect(upgradeFrom(t, e, r, ns, "b", "1.1.0").Result).To(Equal(wire.ActionSucceeded))
	full, notModified := r.indexAnswers()
	g.Expect(full).To(Equal(1), "read in full once")
	g.Expect(notModified).To(Equal(1), "then revalidated")

	r.publish(t, configChart("notes", "1.2.0", "second"))
	out := upgradeFrom(t, e, r, ns, "c", "1.2.0")
	g.Expect(out.Result).To(Equal(wire.ActionSucceeded), out.Message)
	full, notModified = r.indexAnswers()
	g.Expect(full).To(Equal(2), "a new index is read in full")
	g.Expect(notModified).To(Equal(1))
	g.Expect(last(t, ns, "c").Manifest).To(ContainSubstring("note: second"))
}

// With an ETag the agent asks with If-None-Match: an index that changed
// under the same Last-Modified is still read again.
func TestExecutor_asksWithTheIndexETag(t *testing.T) {
	g := NewWithT(t)
	r := newTestRepo(t)
	r.etags = true
	r.publish(t, configChart("notes", "1.1.0", "first"))
	e, ns := indexFixture(t, r, nil, "a", "b", "c")

	g.Expect(upgradeFrom(t, e, r, ns, "a", "1.1.0").Result).To(Equal(wire.ActionSucceeded))
	g.Expect(upgradeFrom(t, e, r, ns, "b", "1.1.0").Result).To(Equal(wire.ActionSucceeded))
	full, notModified := r.indexAnswers()
	g.Expect([]int{full, notModified}).To(Equal([]int{1, 1}))

	same := r.published
	r.publish(t, configChart("notes", "1.2.0", "second"))
	r.backdate(t, same)
	out := upgradeFrom(t, e, r, ns, "c", "1.2.0")
	g.Expect(out.Result).To(Equal(wire.ActionSucceeded), out.Message)
	full, notModified = r.indexAnswers()
	g.Expect([]int{full, notModified}).To(Equal([]int{2, 1}), "a new ETag: read in full, though Last-Modified did not change")
}

// A kept index can cost a second read but never a wrong or failed action:
// a repository whose Last-Modified stays the same when its index changes
// answers 304, and the agent reads the index in full again when the kept
// one lacks the version, or gives another digest than the package has.
func TestExecutor_readsTheIndexAgainWhenTheKeptOneIsOutOfDate(t *testing.T) {
	t.Run("a version the kept index lacks", func(t *testing.T) {
		g := NewWithT(t)
		r := newTestRepo(t)
		r.publish(t, configChart("notes", "1.1.0", "first"))
		e, ns := indexFixture(t, r, nil, "a", "b")
		g.Expect(upgradeFrom(t, e, r, ns, "a", "1.1.0").Result).To(Equal(wire.ActionSucceeded))

		same := r.published
		r.publish(t, configChart("notes", "1.2.0", "second"))
		r.backdate(t, same)
		out := upgradeFrom(t, e, r, ns, "b", "1.2.0")
		g.Expect(out.Result).To(Equal(wire.ActionSucceeded), out.Message)
		full, notModified := r.indexAnswers()
		g.Expect([]int{full, notModified}).To(Equal([]int{2, 1}), "revalidated, then read in full")
		g.Expect(last(t, ns, "b").Manifest).To(ContainSubstring("note: second"))
	})
	t.Run("a package republished under the same version", func(t *testing.T) {
		g := NewWithT(t)
		r := newTestRepo(t)
		r.publish(t, configChart("notes", "1.1.0", "first"))
		e, ns := indexFixture(t, r, func(o *Options) { o.ChartCacheSize = 0 }, "a", "b")
		g.Expect(upgradeFrom(t, e, r, ns, "a", "1.1.0").Result).To(Equal(wire.ActionSucceeded))

		same := r.published
		r.publish(t, configChart("notes", "1.1.0", "republished"))
		r.backdate(t, same)
		out := upgradeFrom(t, e, r, ns, "b", "1.1.0")
		g.Expect(out.Result).To(Equal(wire.ActionSucceeded), out.Message)
		full, notModified := r.indexAnswers()
		g.Expect([]int{full, notModified}).To(Equal([]int{2, 1}), "revalidated, the digest differed, then read in full")
		g.Expect(last(t, ns, "b").Manifest).To(ContainSubstring("note: republished"))
	})
}

// An index whose Last-Modified is not older than the answer (a weak
// validator), or with the cache off, is read in full every time.
func TestExecutor_keepsNoIndexWithoutAStrongValidator(t *testing.T) {
	for _, tc := range []struct {
		name   string
		future bool
		opts   func(*Options)
	}{
		{name: "Last-Modified not older than Date", future: true},
		{name: "--actions-index-cache-size=0", opts: func(o *Options) { o.IndexCacheSize = 0 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			r := newTestRepo(t)
			r.publish(t, configChart("notes", "1.1.0", "first"))
			if tc.future {
				r.backdate(t, time.Now().Add(time.Hour))
			}
			e, ns := indexFixture(t, r, tc.opts, "a", "b")
			g.Expect(upgradeFrom(t, e, r, ns, "a", "1.1.0").Result).To(Equal(wire.ActionSucceeded))
			g.Expect(upgradeFrom(t, e, r, ns, "b", "1.1.0").Result).To(Equal(wire.ActionSucceeded))
			full, notModified := r.indexAnswers()
			g.Expect([]int{full, notModified}).To(Equal([]int{2, 0}))
		})
	}
}
