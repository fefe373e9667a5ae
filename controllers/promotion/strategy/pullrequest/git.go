package pullrequest

import (
	"context"
	"errors"
	"fmt"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/transport"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
)

// Commit identity.
const (
	authorName  = "tugboat"
	authorEmail = "tugboat@tugboat.dev"
)

// checkout is a shallow clone of the base branch in a temporary directory.
type checkout struct {
	repo *git.Repository
	dir  string
	url  string
	auth transport.AuthMethod
	base string
}

// cloneBase clones the base branch (depth 1, that branch only) into dir.
func cloneBase(ctx context.Context, dir, url, base string, auth *githttp.BasicAuth) (*checkout, error) {
	repo, err := git.PlainCloneContext(ctx, dir, false, &git.CloneOptions{
		URL:           url,
		Auth:          auth,
		ReferenceName: plumbing.NewBranchReferenceName(base),
		SingleBranch:  true,
		Depth:         1,
		Tags:          git.NoTags,
	})
	if err != nil {
		return nil, classifyGitError(fmt.Sprintf("cloning branch %s of %s", base, url), err)
	}
	return &checkout{repo: repo, dir: dir, url: url, auth: auth, base: base}, nil
}

// head returns the hash of the cloned base commit.
func (c *checkout) head() (plumbing.Hash, error) {
	ref, err := c.repo.Head()
	if err != nil {
		return plumbing.ZeroHash, err
	}
	return ref.Hash(), nil
}

// commit stages files and commits them, then points refs/heads/<branch> at
// the commit. It returns plumbing.ZeroHash when the tree did not change.
func (c *checkout) commit(branch, message string, files []string, when time.Time) (plumbing.Hash, error) {
	wt, err := c.repo.Worktree()
	if err != nil {
		return plumbing.ZeroHash, err
	}
	for _, f := range files {
		if _, err := wt.Add(f); err != nil {
			return plumbing.ZeroHash, fmt.Errorf("staging %s: %w", f, err)
		}
	}
	sig := &object.Signature{Name: authorName, Email: authorEmail, When: when}
	hash, err := wt.Commit(message, &git.CommitOptions{Author: sig, Committer: sig})
	if errors.Is(err, git.ErrEmptyCommit) {
		return plumbing.ZeroHash, nil
	}
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("committing: %w", err)
	}
	ref := plumbing.NewHashReference(plumbing.NewBranchReferenceName(branch), hash)
	if err := c.repo.Storer.SetReference(ref); err != nil {
		return plumbing.ZeroHash, err
	}
	return hash, nil
}

// remoteBranch returns the hash of refs/heads/<branch> on the remote, or
// plumbing.ZeroHash when the branch does not exist.
func (c *checkout) remoteBranch(ctx context.Context, branch string) (plumbing.Hash, error) {
	remote, err := c.repo.Remote(git.DefaultRemoteName)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	refs, err := remote.ListContext(ctx, &git.ListOptions{Auth: c.auth})
	if err != nil {
		return plumbing.ZeroHash, classifyGitError("listing branches of "+c.url, err)
	}
	name := plumbing.NewBranchReferenceName(branch)
	for _, r := range refs {
		if r.Name() == name {
			return r.Hash(), nil
		}
	}
	return plumbing.ZeroHash, nil
}

// sameTree reports whether the remote commit (fetched on demand) has the
// same tree as the local one: the branch already holds this change.
func (c *checkout) sameTree(ctx context.Context, branch string, remote, local plumbing.Hash) (bool, error) {
	if remote == local {
		return true, nil
	}
	if _, err := c.repo.CommitObject(remote); err != nil {
		spec := config.RefSpec(fmt.Sprintf("+%s:refs/remotes/%s/%s", plumbing.NewBranchReferenceName(branch), git.DefaultRemoteName, branch))
		err := c.repo.FetchContext(ctx, &git.FetchOptions{
			RemoteName: git.DefaultRemoteName,
			RefSpecs:   []config.RefSpec{spec},
			Depth:      1,
			Auth:       c.auth,
			Tags:       git.NoTags,
		})
		if err != nil && !errors.Is(err, git.NoErrAlreadyUpToDate) {
			return false, classifyGitError("fetching branch "+branch, err)
		}
	}
	rc, err := c.repo.CommitObject(remote)
	if err != nil {
		return false, fmt.Errorf("reading commit %s of branch %s: %w", remote, branch, err)
	}
	lc, err := c.repo.CommitObject(local)
	if err != nil {
		return false, err
	}
	return rc.TreeHash == lc.TreeHash, nil
}

// push force-pushes refs/heads/<branch>: the branch belongs to tugboat, and
// a branch left from an older base is replaced by one on the current base.
func (c *checkout) push(ctx context.Context, branch string) error {
	ref := plumbing.NewBranchReferenceName(branch)
	err := c.repo.PushContext(ctx, &git.PushOptions{
		RemoteName: git.DefaultRemoteName,
		RefSpecs:   []config.RefSpec{config.RefSpec("+" + ref + ":" + ref)},
		Auth:       c.auth,
	})
	if err != nil && !errors.Is(err, git.NoErrAlreadyUpToDate) {
		return classifyGitError("pushing branch "+branch+" to "+c.url, err)
	}
	return nil
}

// classifyGitError names what failed and makes errors that retrying cannot
// fix terminal: a base branch or repository content that does not exist.
// Authentication and authorization failures stay retryable (see Promote).
func classifyGitError(what string, err error) error {
	var noRef git.NoMatchingRefSpecError
	switch {
	case errors.As(err, &noRef), errors.Is(err, plumbing.ErrReferenceNotFound):
		return configErrorf("%s: branch not found", what)
	case errors.Is(err, transport.ErrEmptyRemoteRepository):
		return configErrorf("%s: the repository is empty", what)
	case errors.Is(err, transport.ErrAuthenticationRequired):
		return fmt.Errorf("%s: authentication failed (check the credentials secret): %w", what, err)
	case errors.Is(err, transport.ErrAuthorizationFailed):
		return fmt.Errorf("%s: permission denied (the credentials lack access): %w", what, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}
