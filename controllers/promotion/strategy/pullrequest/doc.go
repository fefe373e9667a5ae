// Package pullrequest implements the pullRequest promotion strategy: it sets
// the promoted chart version at the fields of a git repository marked for the
// Pipeline and destination environment, commits the change on a branch of its
// own, pushes it, and opens (or updates) a pull request on GitHub, GitLab or
// Gitea.
//
// A field is marked with a YAML line comment on the line of its scalar value:
//
//	spec:
//	  chart:
//	    spec:
//	      version: 1.3.0 # tugboat: {"pipeline": "apps/web", "environment": "production"}
//
// Only the scalar is replaced; every other byte of the file (indentation,
// quoting style, the comment, line endings) is kept, because files are
// rewritten line by line rather than re-serialized.
//
// The strategy is idempotent, as the strategy package requires: the branch
// is named after the pipeline, environment and version
// (tugboat/<pipeline>/<env>/<version>); a branch already holding the same
// content is not pushed again; an open pull request from that branch is
// reused and updated, never duplicated; and a repository already at the
// version is a success with nothing pushed and no pull request.
//
// A rollback request (strategy.Request.RollbackFrom, after a rollout that
// spent its failure budget with onFailure Rollback) is a revert pull
// request: the fields are set back to the version the targets ran, on a
// branch of its own (tugboat/<pipeline>/<env>/rollback-<from>-to-<version>),
// with a title and body that say it is a rollback.
//
// Git is spoken over HTTP(S) only, with go-git; ssh:// URLs are refused as a
// configuration error. The package does not merge pull requests, watch them,
// or verify that targets run the version: the Promotion reconciler does that.
package pullrequest
