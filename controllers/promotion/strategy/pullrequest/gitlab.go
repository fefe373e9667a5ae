package pullrequest

import (
	"context"

	gitlab "gitlab.com/gitlab-org/api/client-go"
)

// gitlabProvider opens merge requests on GitLab.
type gitlabProvider struct {
	client  *gitlab.Client
	project string
}

func newGitLab(cfg ProviderConfig) (*gitlabProvider, error) {
	project, api, err := gitlabProject(cfg.RepoURL, cfg.APIURL)
	if err != nil {
		return nil, err
	}
	// The API takes a token (PRIVATE-TOKEN header). With username and
	// password, the password is used as the token: GitLab accepts a
	// personal access token as the password of git's basic auth, and has
	// no basic auth for its API.
	token := cfg.Credentials.Token
	if token == "" {
		token = cfg.Credentials.Password
	}
	c, err := gitlab.NewClient(token,
		gitlab.WithBaseURL(api),
		gitlab.WithHTTPClient(cfg.HTTPClient),
		// The Promotion reconciler retries with backoff; do not retry here too.
		gitlab.WithoutRetries(),
	)
	if err != nil {
		return nil, err
	}
	c.UserAgent = "tugboat"
	return &gitlabProvider{client: c, project: project}, nil
}

// EnsurePullRequest implements Provider.
func (p *gitlabProvider) EnsurePullRequest(ctx context.Context, pr PullRequest) (PullRequestStatus, error) {
	existing, err := p.find(ctx, pr.Head)
	if err != nil {
		return PullRequestStatus{}, err
	}
	if existing == nil {
		mr, resp, err := p.client.MergeRequests.CreateMergeRequest(p.project, &gitlab.CreateMergeRequestOptions{
			Title:        &pr.Title,
			Description:  &pr.Body,
			SourceBranch: &pr.Head,
			TargetBranch: &pr.Base,
		}, gitlab.WithContext(ctx))
		if err != nil {
			return PullRequestStatus{}, wrapAPIError(statusOfGitLab(resp), err)
		}
		return PullRequestStatus{URL: mr.WebURL, Number: mr.IID, Created: true}, nil
	}
	st := PullRequestStatus{URL: existing.WebURL, Number: existing.IID}
	opts := &gitlab.UpdateMergeRequestOptions{}
	if existing.Title != pr.Title {
		opts.Title = &pr.Title
	}
	if existing.Description != pr.Body {
		opts.Description = &pr.Body
	}
	if existing.TargetBranch != pr.Base {
		opts.TargetBranch = &pr.Base
	}
	if opts.Title == nil && opts.Description == nil && opts.TargetBranch == nil {
		return st, nil
	}
	mr, resp, err := p.client.MergeRequests.UpdateMergeRequest(p.project, existing.IID, opts, gitlab.WithContext(ctx))
	if err != nil {
		return PullRequestStatus{}, wrapAPIError(statusOfGitLab(resp), err)
	}
	if mr.WebURL != "" {
		st.URL = mr.WebURL
	}
	st.Updated = true
	return st, nil
}

// find returns the open merge request from head, or nil.
func (p *gitlabProvider) find(ctx context.Context, head string) (*gitlab.BasicMergeRequest, error) {
	opts := &gitlab.ListProjectMergeRequestsOptions{
		State:        new("opened"),
		SourceBranch: &head,
		ListOptions:  gitlab.ListOptions{PerPage: 100},
	}
	for {
		mrs, resp, err := p.client.MergeRequests.ListProjectMergeRequests(p.project, opts, gitlab.WithContext(ctx))
		if err != nil {
			return nil, wrapAPIError(statusOfGitLab(resp), err)
		}
		for _, mr := range mrs {
			if mr.SourceBranch == head && mr.State == "opened" {
				return mr, nil
			}
		}
		if resp.NextPage == 0 {
			return nil, nil
		}
		opts.Page = resp.NextPage
	}
}

func statusOfGitLab(resp *gitlab.Response) int {
	if resp == nil || resp.Response == nil {
		return 0
	}
	return resp.StatusCode
}
