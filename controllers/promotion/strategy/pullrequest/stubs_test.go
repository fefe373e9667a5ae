package pullrequest_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// stubPR is a pull (merge) request held by a stub API.
type stubPR struct {
	Number             int
	Title, Body        string
	Head, Base         string
	Open               bool
	CreatedBy, Updated int
}

// apiStub is the state and counters shared by the GitHub and GitLab stubs.
// It stands in for the hosted API only; the git side of every test is the
// real Gitea server.
type apiStub struct {
	t     testing.TB
	token string
	// branchExists asks the real git server whether a branch exists, as
	// GitHub and GitLab check the head branch when a pull request is opened.
	branchExists func(branch string) bool

	mu       sync.Mutex
	prs      []*stubPR
	creates  int
	updates  int
	failures []string // requests the stub refused, for assertions
}

func (s *apiStub) refuse(w http.ResponseWriter, r *http.Request, status int, body any) {
	s.failures = append(s.failures, fmt.Sprintf("%s %s -> %d", r.Method, r.URL.String(), status))
	writeJSON(w, status, body)
}

func (s *apiStub) openFrom(head string) *stubPR {
	for _, p := range s.prs {
		if p.Open && p.Head == head {
			return p
		}
	}
	return nil
}

// Creates returns how many pull requests were created through the API.
func (s *apiStub) Creates() int { s.mu.Lock(); defer s.mu.Unlock(); return s.creates }

// Updates returns how many edits were made through the API.
func (s *apiStub) Updates() int { s.mu.Lock(); defer s.mu.Unlock(); return s.updates }

// Open returns the open pull requests.
func (s *apiStub) Open() []stubPR {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []stubPR
	for _, p := range s.prs {
		if p.Open {
			out = append(out, *p)
		}
	}
	return out
}

// Failures returns the requests the stub refused.
func (s *apiStub) Failures() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.failures...)
}

// Seed adds an open pull request, as if opened earlier.
func (s *apiStub) Seed(pr stubPR) {
	s.mu.Lock()
	defer s.mu.Unlock()
	pr.Number = len(s.prs) + 1
	pr.Open = true
	s.prs = append(s.prs, &pr)
}

func writeJSON(w http.ResponseWriter, status int, body any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(body)
}

// githubStub answers the GitHub REST endpoints the strategy uses, under
// /api/v3 as GitHub Enterprise serves them, checking what github.com checks.
type githubStub struct {
	apiStub
	owner, repo string
	server      *httptest.Server
}

var githubPulls = regexp.MustCompile(`^/api/v3/repos/([^/]+)/([^/]+)/pulls(?:/(\d+))?$`)

func newGitHubStub(t testing.TB, owner, repo, token string, branchExists func(string) bool) *githubStub {
	s := &githubStub{apiStub: apiStub{t: t, token: token, branchExists: branchExists}, owner: owner, repo: repo}
	s.server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.server.Close)
	return s
}

// APIURL is the base URL to put in the Secret's apiURL.
func (s *githubStub) APIURL() string { return s.server.URL + "/api/v3/" }

func (s *githubStub) json(p *stubPR) map[string]any {
	state := "open"
	if !p.Open {
		state = "closed"
	}
	repo := map[string]any{"name": s.repo, "full_name": s.owner + "/" + s.repo, "owner": map[string]any{"login": s.owner}}
	return map[string]any{
		"number":   p.Number,
		"state":    state,
		"title":    p.Title,
		"body":     p.Body,
		"html_url": fmt.Sprintf("https://github.example/%s/%s/pull/%d", s.owner, s.repo, p.Number),
		"url":      fmt.Sprintf("%s/api/v3/repos/%s/%s/pulls/%d", s.server.URL, s.owner, s.repo, p.Number),
		"head":     map[string]any{"ref": p.Head, "label": s.owner + ":" + p.Head, "repo": repo},
		"base":     map[string]any{"ref": p.Base, "label": s.owner + ":" + p.Base, "repo": repo},
	}
}

func (s *githubStub) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	auth := r.Header.Get("Authorization")
	if auth != "Bearer "+s.token && auth != "token "+s.token {
		s.refuse(w, r, http.StatusUnauthorized, map[string]any{"message": "Bad credentials", "documentation_url": "https://docs.github.com/rest", "status": "401"})
		return
	}
	if r.Header.Get("X-GitHub-Api-Version") == "" {
		s.refuse(w, r, http.StatusBadRequest, map[string]any{"message": "missing X-GitHub-Api-Version"})
		return
	}
	m := githubPulls.FindStringSubmatch(r.URL.Path)
	if m == nil || m[1] != s.owner || m[2] != s.repo {
		s.refuse(w, r, http.StatusNotFound, map[string]any{"message": "Not Found"})
		return
	}
	switch {
	case r.Method == http.MethodGet && m[3] == "":
		q := r.URL.Query()
		state := q.Get("state")
		if state == "" {
			state = "open"
		}
		head := q.Get("head")
		if head != "" && !strings.Contains(head, ":") {
			// GitHub wants user:ref-name (or organization:ref-name).
			writeJSON(w, http.StatusOK, []any{})
			return
		}
		out := []any{}
		for _, p := range s.prs {
			if (state == "open") != p.Open && state != "all" {
				continue
			}
			if head != "" && head != s.owner+":"+p.Head {
				continue
			}
			if b := q.Get("base"); b != "" && b != p.Base {
				continue
			}
			out = append(out, s.json(p))
		}
		writeJSON(w, http.StatusOK, out)
	case r.Method == http.MethodPost && m[3] == "":
		var body struct {
			Title *string `json:"title"`
			Head  *string `json:"head"`
			Base  *string `json:"base"`
			Body  *string `json:"body"`
		}
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			s.refuse(w, r, http.StatusBadRequest, map[string]any{"message": "Problems parsing JSON"})
			return
		}
		for field, v := range map[string]*string{"title": body.Title, "head": body.Head, "base": body.Base} {
			if v == nil || *v == "" {
				s.refuse(w, r, http.StatusUnprocessableEntity, map[string]any{"message": "Validation Failed",
					"errors": []any{map[string]any{"resource": "PullRequest", "code": "missing_field", "field": field}}})
				return
			}
		}
		if !s.branchExists(*body.Head) || !s.branchExists(*body.Base) {
			s.refuse(w, r, http.StatusUnprocessableEntity, map[string]any{"message": "Validation Failed",
				"errors": []any{map[string]any{"resource": "PullRequest", "code": "invalid", "field": "head"}}})
			return
		}
		if s.openFrom(*body.Head) != nil {
			s.refuse(w, r, http.StatusUnprocessableEntity, map[string]any{"message": "Validation Failed",
				"errors": []any{map[string]any{"resource": "PullRequest", "code": "custom",
					"message": "A pull request already exists for " + s.owner + ":" + *body.Head + "."}}})
			return
		}
		p := &stubPR{Number: len(s.prs) + 1, Title: *body.Title, Head: *body.Head, Base: *body.Base, Open: true}
		if body.Body != nil {
			p.Body = *body.Body
		}
		s.prs = append(s.prs, p)
		s.creates++
		writeJSON(w, http.StatusCreated, s.json(p))
	case r.Method == http.MethodPatch && m[3] != "":
		n, _ := strconv.Atoi(m[3])
		if n < 1 || n > len(s.prs) {
			s.refuse(w, r, http.StatusNotFound, map[string]any{"message": "Not Found"})
			return
		}
		var body map[string]any
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			s.refuse(w, r, http.StatusBadRequest, map[string]any{"message": "Problems parsing JSON"})
			return
		}
		p := s.prs[n-1]
		if v, ok := body["title"].(string); ok {
			p.Title = v
		}
		if v, ok := body["body"].(string); ok {
			p.Body = v
		}
		if v, ok := body["base"].(string); ok {
			p.Base = v
		}
		s.updates++
		writeJSON(w, http.StatusOK, s.json(p))
	default:
		s.refuse(w, r, http.StatusNotFound, map[string]any{"message": "Not Found"})
	}
}

// gitlabStub answers the GitLab v4 merge-request endpoints the strategy
// uses, checking what gitlab.com checks.
type gitlabStub struct {
	apiStub
	project string
	server  *httptest.Server
}

var gitlabMRs = regexp.MustCompile(`^/api/v4/projects/([^/]+)/merge_requests(?:/(\d+))?$`)

func newGitLabStub(t testing.TB, project, token string, branchExists func(string) bool) *gitlabStub {
	s := &gitlabStub{apiStub: apiStub{t: t, token: token, branchExists: branchExists}, project: project}
	s.server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.server.Close)
	return s
}

// APIURL is the base URL to put in the Secret's apiURL.
func (s *gitlabStub) APIURL() string { return s.server.URL + "/api/v4" }

func (s *gitlabStub) json(p *stubPR) map[string]any {
	state := "opened"
	if !p.Open {
		state = "closed"
	}
	return map[string]any{
		"id":            1000 + p.Number,
		"iid":           p.Number,
		"project_id":    42,
		"state":         state,
		"title":         p.Title,
		"description":   p.Body,
		"source_branch": p.Head,
		"target_branch": p.Base,
		"web_url":       fmt.Sprintf("https://gitlab.example/%s/-/merge_requests/%d", s.project, p.Number),
	}
}

func (s *gitlabStub) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r.Header.Get("PRIVATE-TOKEN") != s.token && r.Header.Get("Authorization") != "Bearer "+s.token {
		s.refuse(w, r, http.StatusUnauthorized, map[string]any{"message": "401 Unauthorized"})
		return
	}
	// The project path must be URL-encoded into one segment.
	m := gitlabMRs.FindStringSubmatch(r.URL.EscapedPath())
	if m == nil {
		s.refuse(w, r, http.StatusNotFound, map[string]any{"error": "404 Not Found"})
		return
	}
	if id, err := url.PathUnescape(m[1]); err != nil || id != s.project {
		s.refuse(w, r, http.StatusNotFound, map[string]any{"message": "404 Project Not Found"})
		return
	}
	switch {
	case r.Method == http.MethodGet && m[2] == "":
		q := r.URL.Query()
		out := []any{}
		for _, p := range s.prs {
			switch q.Get("state") {
			case "opened":
				if !p.Open {
					continue
				}
			case "closed", "merged":
				if p.Open {
					continue
				}
			}
			if sb := q.Get("source_branch"); sb != "" && sb != p.Head {
				continue
			}
			if tb := q.Get("target_branch"); tb != "" && tb != p.Base {
				continue
			}
			out = append(out, s.json(p))
		}
		writeJSON(w, http.StatusOK, out)
	case r.Method == http.MethodPost && m[2] == "":
		var body struct {
			SourceBranch string `json:"source_branch"`
			TargetBranch string `json:"target_branch"`
			Title        string `json:"title"`
			Description  string `json:"description"`
		}
		if !strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
			s.refuse(w, r, http.StatusBadRequest, map[string]any{"error": "expected JSON"})
			return
		}
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			s.refuse(w, r, http.StatusBadRequest, map[string]any{"error": "invalid JSON"})
			return
		}
		for field, v := range map[string]string{"source_branch": body.SourceBranch, "target_branch": body.TargetBranch, "title": body.Title} {
			if v == "" {
				s.refuse(w, r, http.StatusBadRequest, map[string]any{"error": field + " is missing"})
				return
			}
		}
		if !s.branchExists(body.SourceBranch) || !s.branchExists(body.TargetBranch) {
			s.refuse(w, r, http.StatusUnprocessableEntity, map[string]any{"message": []string{"Source branch does not exist"}})
			return
		}
		if p := s.openFrom(body.SourceBranch); p != nil {
			s.refuse(w, r, http.StatusConflict, map[string]any{"message": []string{
				fmt.Sprintf("Another open merge request already exists for this source branch: !%d", p.Number)}})
			return
		}
		p := &stubPR{Number: len(s.prs) + 1, Title: body.Title, Body: body.Description, Head: body.SourceBranch, Base: body.TargetBranch, Open: true}
		s.prs = append(s.prs, p)
		s.creates++
		writeJSON(w, http.StatusCreated, s.json(p))
	case r.Method == http.MethodPut && m[2] != "":
		n, _ := strconv.Atoi(m[2])
		if n < 1 || n > len(s.prs) {
			s.refuse(w, r, http.StatusNotFound, map[string]any{"message": "404 Not found"})
			return
		}
		var body map[string]any
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			s.refuse(w, r, http.StatusBadRequest, map[string]any{"error": "invalid JSON"})
			return
		}
		p := s.prs[n-1]
		if v, ok := body["title"].(string); ok {
			p.Title = v
		}
		if v, ok := body["description"].(string); ok {
			p.Body = v
		}
		if v, ok := body["target_branch"].(string); ok {
			p.Base = v
		}
		s.updates++
		writeJSON(w, http.StatusOK, s.json(p))
	default:
		s.refuse(w, r, http.StatusNotFound, map[string]any{"error": "404 Not Found"})
	}
}
