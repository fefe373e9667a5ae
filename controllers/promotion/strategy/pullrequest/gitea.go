package pullrequest

import (
	"context"

	"code.gitea.io/sdk/gitea"
)

// giteaProvider opens pull requests on Gitea (or Forgejo).
type giteaProvider struct {
	cfg         ProviderConfig
	root        string
	owner, repo string
}

func newGitea(cfg ProviderConfig) (*giteaProvider, error) {
	owner, repo, root, err := giteaRepo(cfg.RepoURL, cfg.APIURL)
	if err != nil {
		return nil, err
	}
	return &giteaProvider{cfg: cfg, root: root, owner: owner, repo: repo}, nil
}

// client connects lazily: the SDK asks the server for its version when it
// is created.
func (p *giteaProvider) client(ctx context.Context) (*gitea.Client, error) {
	opts := []gitea.ClientOption{
		gitea.SetHTTPClient(p.cfg.HTTPClient),
		gitea.SetContext(ctx),
		gitea.SetUserAgent("tugboat"),
	}
	if p.cfg.Credentials.Token != "" {
		opts = append(opts, gitea.SetToken(p.cfg.Credentials.Token))
	} else {
		opts = append(opts, gitea.SetBasicAuth(p.cfg.Credentials.Username, p.cfg.Credentials.Password))
	}
	return gitea.NewClient(p.root, opts...)
}

// EnsurePullRequest implements Provider.
func (p *giteaProvider) EnsurePullRequest(ctx context.Context, pr PullRequest) (PullRequestStatus, error) {
	c, err := p.client(ctx)
	if err != nil {
		return PullRequestStatus{}, err
	}
	existing, err := p.find(c, pr.Head)
	if err != nil {
		return PullRequestStatus{}, err
	}
	if existing == nil {
		created, resp, err := c.CreatePullRequest(p.owner, p.repo, gitea.CreatePullRequestOption{
			Head:  pr.Head,
			Base:  pr.Base,
			Title: pr.Title,
			Body:  pr.Body,
		})
		if err != nil {
			return PullRequestStatus{}, wrapAPIError(statusOfGitea(resp), err)
		}
		return PullRequestStatus{URL: created.HTMLURL, Number: created.Index, Created: true}, nil
	}
	st := PullRequestStatus{URL: existing.HTMLURL, Number: existing.Index}
	opts := gitea.EditPullRequestOption{}
	changed := false
	if existing.Title != pr.Title {
		opts.Title, changed = pr.Title, true
	}
	if existing.Body != pr.Body {
		opts.Body, changed = &pr.Body, true
	}
	if existing.Base == nil || existing.Base.Ref != pr.Base {
		opts.Base, changed = pr.Base, true
	}
	if !changed {
		return st, nil
	}
	updated, resp, err := c.EditPullRequest(p.owner, p.repo, existing.Index, opts)
	if err != nil {
		return PullRequestStatus{}, wrapAPIError(statusOfGitea(resp), err)
	}
	if updated.HTMLURL != "" {
		st.URL = updated.HTMLURL
	}
	st.Updated = true
	return st, nil
}

// find returns the open pull request from head in the repository itself
// (not a fork), or nil. Gitea's list API cannot filter by head, so every
// open pull request is read, a page at a time.
func (p *giteaProvider) find(c *gitea.Client, head string) (*gitea.PullRequest, error) {
	opts := gitea.ListPullRequestsOptions{State: gitea.StateOpen, ListOptions: gitea.ListOptions{Page: 1, PageSize: 50}}
	for {
		pulls, resp, err := c.ListRepoPullRequests(p.owner, p.repo, opts)
		if err != nil {
			return nil, wrapAPIError(statusOfGitea(resp), err)
		}
		for _, pr := range pulls {
			if pr.Head == nil || pr.Head.Ref != head || pr.State != gitea.StateOpen {
				continue
			}
			if pr.Head.Repository != nil && pr.Base != nil && pr.Base.Repository != nil &&
				pr.Head.Repository.ID != pr.Base.Repository.ID {
				continue
			}
			return pr, nil
		}
		if len(pulls) < opts.PageSize || resp == nil || resp.NextPage == 0 {
			return nil, nil
		}
		opts.Page = resp.NextPage
	}
}

func statusOfGitea(resp *gitea.Response) int {
	if resp == nil || resp.Response == nil {
		return 0
	}
	return resp.StatusCode
}
