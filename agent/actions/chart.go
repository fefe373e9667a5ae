package actions

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/registry"
	"helm.sh/helm/v3/pkg/repo"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"oras.land/oras-go/v2/registry/remote/auth"
	"sigs.k8s.io/yaml"

	"tugboat.dev/tugboat/api/wire"
)

const (
	// chartFetchTimeout bounds each download of an index or chart.
	chartFetchTimeout = 2 * time.Minute
	// maxIndexSize bounds a repository's index.yaml (large public
	// repositories are tens of MiB).
	maxIndexSize = 64 << 20
	// maxChartSize bounds a packaged chart.
	maxChartSize = 32 << 20
)

// credentials for chart sources, from the spoke's Secret.
type credentials struct {
	username, password string
	// host is the only host (host[:port]) they are sent to; required.
	host string
}

// forHost reports whether the credentials may be sent to host: only to the
// one they were configured for, never when none was (a chart URL in an
// index, or a redirect, may point anywhere).
func (c *credentials) forHost(host string) bool {
	return c != nil && c.username != "" && c.host != "" && strings.EqualFold(c.host, host)
}

// credentials reads the credentials Secret, when one is configured. It is
// read for every action, so a rotated password is used at once.
func (e *Executor) credentials(ctx context.Context) (*credentials, error) {
	if e.opts.CredentialsSecret == "" {
		return nil, nil
	}
	ns, name, _ := strings.Cut(e.opts.CredentialsSecret, "/")
	s := &corev1.Secret{}
	if err := e.client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, s); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("the chart credentials Secret %s (--actions-credentials-secret) does not exist", e.opts.CredentialsSecret)
		}
		return nil, fmt.Errorf("reading the chart credentials Secret %s: %w", e.opts.CredentialsSecret, err)
	}
	c := &credentials{
		username: string(s.Data["username"]),
		password: string(s.Data["password"]),
		host:     strings.TrimSpace(string(s.Data["host"])),
	}
	if c.username == "" || c.password == "" {
		return nil, fmt.Errorf("the chart credentials Secret %s must hold username and password", e.opts.CredentialsSecret)
	}
	if c.host == "" {
		// Sending them to whatever host an action names would hand them
		// to anyone who can queue an action.
		return nil, fmt.Errorf("the chart credentials Secret %s must name, in its key host, the host (host[:port]) the credentials are for; they are sent nowhere else", e.opts.CredentialsSecret)
	}
	return c, nil
}

// actionChart fetches the chart version action a moves to, with the
// agent's chart source credentials. A fetch that fails because ctx ended is
// the action abandoned.
func (e *Executor) actionChart(ctx context.Context, a wire.Action) (*chart.Chart, error) {
	creds, err := e.credentials(ctx)
	if err != nil {
		return nil, err
	}
	ch, err := e.fetchChart(ctx, a.Chart, a.Version, creds)
	if err != nil {
		if ctx.Err() != nil {
			return nil, abandoned(ctx)
		}
		return nil, err
	}
	return ch, nil
}

// fetchChart downloads and loads chart src.Name at version from an HTTP
// Helm repository or an OCI registry, and checks it is what was asked for.
func (e *Executor) fetchChart(ctx context.Context, src wire.ChartSource, version string, creds *credentials) (*chart.Chart, error) {
	var (
		ch  *chart.Chart
		err error
	)
	if strings.HasPrefix(strings.ToLower(src.Repository), registry.OCIScheme+"://") {
		ch, err = e.fetchOCI(ctx, src, version, creds)
	} else {
		ch, err = e.fetchHTTP(ctx, src, version, creds)
	}
	if err != nil {
		return nil, fmt.Errorf("fetching chart %s %s from %s: %w", src.Name, version, src.Repository, err)
	}
	if ch.Metadata == nil || ch.Metadata.Name != src.Name || ch.Metadata.Version != version {
		got := "no metadata"
		if ch.Metadata != nil {
			got = ch.Metadata.Name + " " + ch.Metadata.Version
		}
		return nil, fmt.Errorf("fetching chart %s %s from %s: the repository served %s", src.Name, version, src.Repository, got)
	}
	return ch, nil
}

// fetchHTTP reads the repository's index.yaml, resolves the chart's URL for
// the exact version, downloads it and checks its digest when the index has
// one. Credentials go only to their host (and never to another host a chart
// URL or a redirect points at).
//
// The index comes through a conditional GET when one is kept (see
// indexCache). A kept index can only cost a second read, never a wrong
// chart: when the version is missing from it, or the package's digest
// differs from the one it gives (an index republished within the second
// its Last-Modified names), the index is read again in full, once.
func (e *Executor) fetchHTTP(ctx context.Context, src wire.ChartSource, version string, creds *credentials) (*chart.Chart, error) {
	base := strings.TrimSuffix(src.Repository, "/")
	ch, revalidated, err := e.fetchHTTPWith(ctx, base, src.Name, version, creds, false)
	if err != nil && revalidated {
		e.indexes.drop(base)
		ch, _, err = e.fetchHTTPWith(ctx, base, src.Name, version, creds, true)
	}
	return ch, err
}

// fetchHTTPWith is fetchHTTP with the index read as readIndex does; it
// reports whether the index used was a kept one the server revalidated.
func (e *Executor) fetchHTTPWith(ctx context.Context, base, name, version string, creds *credentials, full bool) (*chart.Chart, bool, error) {
	index, revalidated, err := e.readIndex(ctx, base, creds, full)
	if err != nil {
		return nil, false, fmt.Errorf("reading the repository index: %w", err)
	}
	var cv *repo.ChartVersion
	for _, v := range index.Entries[name] {
		if v != nil && v.Metadata != nil && v.Version == version {
			cv = v
			break
		}
	}
	if cv == nil {
		return nil, revalidated, fmt.Errorf("the repository has no chart %s at version %s", name, version)
	}
	if len(cv.URLs) == 0 {
		return nil, revalidated, fmt.Errorf("the repository index lists no URL for %s %s", name, version)
	}
	chartURL, err := repo.ResolveReferenceURL(base+"/", cv.URLs[0])
	if err != nil {
		return nil, revalidated, fmt.Errorf("resolving the chart URL %q: %w", cv.URLs[0], err)
	}
	// Only a package the index gives a digest for is kept: the digest
	// tells a chart republished under the same version from the one kept.
	key := chartKey{repository: base, name: name, version: version, digest: strings.ToLower(strings.TrimPrefix(cv.Digest, "sha256:"))}
	if tgz, ok := e.charts.get(key); ok {
		ch, err := loader.LoadArchive(bytes.NewReader(tgz))
		return ch, false, err
	}
	tgz, _, _, err := e.get(ctx, chartURL, creds, maxChartSize, nil)
	if err != nil {
		return nil, false, fmt.Errorf("downloading %s: %w", chartURL, err)
	}
	if cv.Digest != "" {
		if got := hexDigest(tgz); !strings.EqualFold(got, key.digest) {
			return nil, revalidated, fmt.Errorf("%s has digest %s, the index says %s", chartURL, got, cv.Digest)
		}
	}
	ch, err := loader.LoadArchive(bytes.NewReader(tgz))
	if err != nil {
		return nil, false, err
	}
	e.charts.put(key, tgz)
	return ch, false, nil
}

// readIndex returns the index of the repository base. With one kept (and
// not full), it asks the server whether the index changed since (its
// ETag, else its Last-Modified) and reuses the kept index on a 304,
// reporting revalidated. Otherwise it downloads and parses the index, and
// keeps it when the server sent a validator.
func (e *Executor) readIndex(ctx context.Context, base string, creds *credentials, full bool) (*repo.IndexFile, bool, error) {
	kept, ok := e.indexes.get(base)
	hdr := http.Header{}
	if ok && !full {
		if kept.etag != "" {
			hdr.Set("If-None-Match", kept.etag)
		} else {
			hdr.Set("If-Modified-Since", kept.lastModified)
		}
	}
	data, answer, notModified, err := e.get(ctx, base+"/index.yaml", creds, maxIndexSize, hdr)
	if err != nil {
		return nil, false, err
	}
	if notModified {
		indexReads.WithLabelValues("notModified").Inc()
		return kept.index, true, nil
	}
	indexReads.WithLabelValues("downloaded").Inc()
	var index repo.IndexFile
	if err := yaml.Unmarshal(data, &index); err != nil {
		e.indexes.drop(base)
		return nil, false, fmt.Errorf("parsing the repository index: %w", err)
	}
	kept = &indexEntry{base: base, etag: answer.Get("ETag"), index: &index, size: int64(len(data))}
	if kept.etag == "" && strongLastModified(answer) {
		kept.lastModified = answer.Get("Last-Modified")
	}
	e.indexes.put(kept) // without a validator: not kept, and an older entry dropped
	return &index, false, nil
}

// strongLastModified reports whether a response's Last-Modified can tell
// two versions apart: only when it is at least a second older than the
// response's Date (RFC 9110, section 8.8.2.2). An index written within the
// second it was served may change again within that second under the same
// Last-Modified, and a conditional GET would then keep the older one.
func strongLastModified(h http.Header) bool {
	lm, err := http.ParseTime(h.Get("Last-Modified"))
	if err != nil {
		return false
	}
	date, err := http.ParseTime(h.Get("Date"))
	return err == nil && date.Sub(lm) >= time.Second
}

// get downloads rawURL, up to limit bytes, with basic authentication when
// the credentials are for its host, and the headers hdr. It returns the
// data and the answer's headers, or notModified on a 304 when hdr makes the
// request conditional; any other status is an error.
func (e *Executor) get(ctx context.Context, rawURL string, creds *credentials, limit int64, hdr http.Header) (data []byte, answer http.Header, notModified bool, err error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, nil, false, err
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, nil, false, fmt.Errorf("unsupported URL scheme %q", u.Scheme)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, rawURL, nil)
	if err != nil {
		return nil, nil, false, err
	}
	for k, v := range hdr {
		req.Header[k] = v
	}
	req.Header.Set("User-Agent", "tugboat-agent")
	if creds.forHost(u.Host) {
		// net/http drops Authorization on a redirect to another host.
		req.SetBasicAuth(creds.username, creds.password)
	}
	resp, err := e.http.Do(req)
	if err != nil {
		return nil, nil, false, err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode == http.StatusNotModified && len(hdr) > 0 {
		return nil, resp.Header, true, nil
	}
	if resp.StatusCode != http.StatusOK {
		return nil, nil, false, fmt.Errorf("GET %s: %s", redact(u), resp.Status)
	}
	data, err = io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return nil, nil, false, err
	}
	if int64(len(data)) > limit {
		return nil, nil, false, fmt.Errorf("GET %s: larger than %d bytes", redact(u), limit)
	}
	return data, resp.Header, false, nil
}

// fetchOCI pulls oci://<repository>/<name>:<version>. Credentials come only
// from the Secret: the registry client's own credential stores (Helm's and
// Docker's config files) are not consulted.
func (e *Executor) fetchOCI(ctx context.Context, src wire.ChartSource, version string, creds *credentials) (*chart.Chart, error) {
	ref := strings.TrimSuffix(src.Repository[len(registry.OCIScheme+"://"):], "/") + "/" + src.Name + ":" + version
	authorizer := auth.Client{
		Client: e.http,
		Cache:  auth.NewCache(),
		Credential: func(_ context.Context, hostport string) (auth.Credential, error) {
			if creds.forHost(hostport) {
				return auth.Credential{Username: creds.username, Password: creds.password}, nil
			}
			return auth.EmptyCredential, nil
		},
	}
	c, err := registry.NewClient(
		registry.ClientOptHTTPClient(e.http),
		registry.ClientOptAuthorizer(authorizer),
		registry.ClientOptWriter(io.Discard),
	)
	if err != nil {
		return nil, err
	}
	// The manifest's digest names what the tag points at now: a chart
	// pushed again under the same version is a new entry.
	var key chartKey
	if desc, err := c.Resolve(ref); err == nil {
		key = chartKey{repository: strings.TrimSuffix(src.Repository, "/"), name: src.Name, version: version, digest: desc.Digest.String()}
		if data, ok := e.charts.get(key); ok {
			return loader.LoadArchive(bytes.NewReader(data))
		}
	}
	type result struct {
		res *registry.PullResult
		err error
	}
	// Pull takes no context; its requests are bounded by the HTTP client's
	// timeout, and an ended ctx stops the wait.
	done := make(chan result, 1)
	go func() {
		res, err := c.Pull(ref, registry.PullOptWithChart(true))
		done <- result{res, err}
	}()
	var r result
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case r = <-done:
	}
	if r.err != nil {
		return nil, r.err
	}
	if r.res.Chart == nil || len(r.res.Chart.Data) == 0 {
		return nil, errors.New("the registry returned no chart layer")
	}
	ch, err := loader.LoadArchive(bytes.NewReader(r.res.Chart.Data))
	if err != nil {
		return nil, err
	}
	if r.res.Manifest != nil && r.res.Manifest.Digest == key.digest {
		// Kept only when what was pulled is what was resolved.
		e.charts.put(key, r.res.Chart.Data)
	}
	return ch, nil
}

// redact drops credentials and the query from a URL for messages.
func redact(u *url.URL) string {
	c := *u
	c.User, c.RawQuery, c.Fragment = nil, "", ""
	return c.String()
}
