package pullrequest

import (
	"context"
	"net/http"

	"github.com/google/go-github/v89/github"
)

// githubProvider opens pull requests on GitHub or GitHub Enterprise.
type githubProvider struct {
	client      *github.Client
	owner, repo string
}

func newGitHub(cfg ProviderConfig) (*githubProvider, error) {
	owner, repo, api, err := githubRepo(cfg.RepoURL, cfg.APIURL)
	if err != nil {
		return nil, err
	}
	opts := []github.ClientOptionsFunc{
		github.WithHTTPClient(cfg.HTTPClient),
		github.WithURLs(&api, &api),
		github.WithUserAgent("tugboat"),
	}
	if cfg.Credentials.Token != "" {
		opts = append(opts, github.WithAuthToken(cfg.Credentials.Token))
	} else {
		opts = append(opts, github.WithTransport(&github.BasicAuthTransport{
			Username:  cfg.Credentials.Username,
			Password:  cfg.Credentials.Password,
			Transport: cfg.HTTPClient.Transport,
		}))
	}
	c, err := github.NewClient(opts...)
	if err != nil {
		return nil, err
	}
	return &githubProvider{client: c, owner: owner, repo: repo}, nil
}

// EnsurePullRequest implements Provider.
func (p *githubProvider) EnsurePullRequest(ctx context.Context, pr PullRequest) (PullRequestStatus, error) {
	existing, err := p.find(ctx, pr.Head)
	if err != nil {
		return PullRequestStatus{}, err
	}
	if existing == nil {
		created, resp, err := p.client.PullRequests.Create(ctx, p.owner, p.repo, &github.NewPullRequest{
			Title: &pr.Title,
			Head:  &pr.Head,
			Base:  &pr.Base,
			Body:  &pr.Body,
		})
		if err == nil {
			return PullRequestStatus{URL: created.GetHTMLURL(), Number: int64(created.GetNumber()), Created: true}, nil
		}
		if resp == nil || resp.StatusCode != http.StatusUnprocessableEntity {
			return PullRequestStatus{}, wrapAPIError(statusOfGitHub(resp), err)
		}
		// 422 also answers "a pull request already exists" when another
		// attempt won a race; look again before giving up.
		if existing, _ = p.find(ctx, pr.Head); existing == nil {
			return PullRequestStatus{}, wrapAPIError(statusOfGitHub(resp), err)
		}
	}
	st := PullRequestStatus{URL: existing.GetHTMLURL(), Number: int64(existing.GetNumber())}
	edit := &github.PullRequest{}
	if existing.GetTitle() != pr.Title {
		edit.Title = &pr.Title
	}
	if existing.GetBody() != pr.Body {
		edit.Body = &pr.Body
	}
	if existing.GetBase().GetRef() != pr.Base {
		edit.Base = &github.PullRequestBranch{Ref: &pr.Base}
	}
	if edit.Title == nil && edit.Body == nil && edit.Base == nil {
		return st, nil
	}
	updated, resp, err := p.client.PullRequests.Edit(ctx, p.owner, p.repo, existing.GetNumber(), edit)
	if err != nil {
		return PullRequestStatus{}, wrapAPIError(statusOfGitHub(resp), err)
	}
	if u := updated.GetHTMLURL(); u != "" {
		st.URL = u
	}
	st.Updated = true
	return st, nil
}

// find returns the open pull request from head in the repository, or nil.
func (p *githubProvider) find(ctx context.Context, head string) (*github.PullRequest, error) {
	opts := &github.PullRequestListOptions{
		State:       "open",
		Head:        p.owner + ":" + head,
		ListOptions: github.ListOptions{PerPage: 100},
	}
	for {
		pulls, resp, err := p.client.PullRequests.List(ctx, p.owner, p.repo, opts)
		if err != nil {
			return nil, wrapAPIError(statusOfGitHub(resp), err)
		}
		for _, pr := range pulls {
			if pr.GetHead().GetRef() == head && pr.GetState() == "open" {
				return pr, nil
			}
		}
		if resp.NextPage == 0 {
			return nil, nil
		}
		opts.Page = resp.NextPage
	}
}

func statusOfGitHub(resp *github.Response) int {
	if resp == nil || resp.Response == nil {
		return 0
	}
	return resp.StatusCode
}
