package dashboard

import (
	"fmt"
	"net/http"
	"sort"
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"tugboat.dev/tugboat/api/clip"
	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
)

// releasePage is one ReleaseHistory, and how its values compare with the
// other environments of the Pipelines it belongs to.
type releasePage struct {
	page
	H *tugboatv1alpha1.ReleaseHistory
	// Current is the current revision's number, 0 before any report.
	Current int32
	// Values compares the current values digest with the targets of every
	// Pipeline that includes this release.
	Values []valuesRow
}

// valuesRow is one target of a Pipeline that includes the release.
type valuesRow struct {
	Pipeline, Environment string
	Spoke, Namespace      string
	History               string
	Version, Digest       string
	This, Same, NoReport  bool
}

func (s *Server) serveRelease(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := readContext(r.Context())
	defer cancel()
	name := r.PathValue("name")
	if !validName(name) {
		s.fail(w, r, http.StatusBadRequest, "release: not a valid ReleaseHistory name: "+clip.String(name, 64))
		return
	}
	h := &tugboatv1alpha1.ReleaseHistory{}
	if err := s.reader.Get(ctx, client.ObjectKey{Namespace: s.opts.Namespace, Name: name}, h); err != nil {
		s.failRead(w, r, "release history "+name, err)
		return
	}
	p := releasePage{page: s.page("Release "+h.Spec.Release+" on "+h.Spec.Spoke, "fleet", "releasehistory", "pipeline"), H: h}
	if h.Status.Current != nil {
		p.Current = h.Status.Current.Revision
	}
	var pipelines tugboatv1alpha1.PipelineList
	if err := s.reader.List(ctx, &pipelines, client.InNamespace(s.opts.Namespace)); err != nil {
		p.Warnings = append(p.Warnings, readWarning("pipelines", s.opts.Namespace, err))
	}
	var histories tugboatv1alpha1.ReleaseHistoryList
	if err := s.reader.List(ctx, &histories, client.InNamespace(s.opts.Namespace)); err != nil {
		p.Warnings = append(p.Warnings, readWarning("release histories", s.opts.Namespace, err))
	}
	byName := map[string]*tugboatv1alpha1.ReleaseHistory{}
	for i := range histories.Items {
		byName[histories.Items[i].Name] = &histories.Items[i]
	}
	p.Values = valuesAcross(h, pipelines.Items, byName)
	s.render(w, "release", http.StatusOK, p)
}

// valuesAcross lists, for every Pipeline with a target that is h's release,
// each target's current chart version and values digest, marking those
// whose values equal h's.
func valuesAcross(h *tugboatv1alpha1.ReleaseHistory, pipelines []tugboatv1alpha1.Pipeline, histories map[string]*tugboatv1alpha1.ReleaseHistory) []valuesRow {
	digest := ""
	if h.Status.Current != nil {
		digest = h.Status.Current.ValuesDigest
	}
	sort.Slice(pipelines, func(i, j int) bool { return pipelines[i].Name < pipelines[j].Name })
	var out []valuesRow
	for i := range pipelines {
		pl := &pipelines[i]
		var rows []valuesRow
		member := false
		for i := range pl.Spec.Environments {
			env := &pl.Spec.Environments[i]
			var st *tugboatv1alpha1.EnvironmentStatus
			for j := range pl.Status.Environments {
				if pl.Status.Environments[j].Name == env.Name {
					st = &pl.Status.Environments[j]
				}
			}
			for _, t := range envTargets(pl, env, st) {
				name := t.History
				row := valuesRow{Pipeline: pl.Name, Environment: env.Name, Spoke: t.Spoke, Namespace: t.Namespace, History: name, This: name == h.Name}
				member = member || row.This
				if o := histories[name]; o != nil && o.Status.Current != nil {
					row.Version, row.Digest = o.Status.Current.ChartVersion, o.Status.Current.ValuesDigest
					row.Same = digest != "" && row.Digest == digest
				} else {
					row.NoReport = true
				}
				rows = append(rows, row)
			}
		}
		if member {
			out = append(out, rows...)
		}
	}
	return out
}

// fleetPage lists the Spokes and searches releases by chart and version.
type fleetPage struct {
	page
	Spokes   []spokeView
	Chart    string
	Version  string
	Searched bool
	Releases []*tugboatv1alpha1.ReleaseHistory
}

type spokeView struct {
	*tugboatv1alpha1.Spoke
	Ready, Reason string
}

// maxQueryLength bounds the search fields.
const maxQueryLength = 64

func (s *Server) serveFleet(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := readContext(r.Context())
	defer cancel()
	q := r.URL.Query()
	p := fleetPage{page: s.page("Fleet", "fleet", "spoke", "releasehistory"), Chart: strings.TrimSpace(q.Get("chart")), Version: strings.TrimSpace(q.Get("version"))}
	for field, v := range map[string]string{"chart": p.Chart, "version": p.Version} {
		if len(v) > maxQueryLength {
			s.fail(w, r, http.StatusBadRequest, fmt.Sprintf("%s: at most %d characters, got %d", field, maxQueryLength, len(v)))
			return
		}
	}
	var spokes tugboatv1alpha1.SpokeList
	if err := s.reader.List(ctx, &spokes, client.InNamespace(s.opts.Namespace)); err != nil {
		p.Warnings = append(p.Warnings, readWarning("spokes", s.opts.Namespace, err))
	}
	sort.Slice(spokes.Items, func(i, j int) bool { return spokes.Items[i].Name < spokes.Items[j].Name })
	for i := range spokes.Items {
		sp := &spokes.Items[i]
		v := spokeView{Spoke: sp, Ready: "Unknown"}
		for _, c := range sp.Status.Conditions {
			if c.Type == "Ready" {
				v.Ready, v.Reason = string(c.Status), c.Message
			}
		}
		p.Spokes = append(p.Spokes, v)
	}
	var histories tugboatv1alpha1.ReleaseHistoryList
	if err := s.reader.List(ctx, &histories, client.InNamespace(s.opts.Namespace)); err != nil {
		p.Warnings = append(p.Warnings, readWarning("release histories", s.opts.Namespace, err))
	}
	p.Searched = p.Chart != "" || p.Version != ""
	for i := range histories.Items {
		h := &histories.Items[i]
		if matches(h, p.Chart, p.Version) {
			p.Releases = append(p.Releases, h)
		}
	}
	sort.Slice(p.Releases, func(i, j int) bool { return p.Releases[i].Name < p.Releases[j].Name })
	s.render(w, "fleet", http.StatusOK, p)
}

// matches reports whether h's current revision is of a chart whose name
// contains chart (any case) at a version that starts with version; empty
// fields match everything.
func matches(h *tugboatv1alpha1.ReleaseHistory, chart, version string) bool {
	c := h.Status.Current
	if c == nil {
		return chart == "" && version == ""
	}
	return lowerContains(c.Chart, chart) && strings.HasPrefix(c.ChartVersion, version)
}
