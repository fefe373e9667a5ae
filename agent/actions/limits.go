package actions

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync"

	"github.com/Masterminds/semver/v3"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"

	"tugboat.dev/tugboat/agent/keyfile"
)

// Any, as the only or one of the entries of a limit list, allows everything.
const Any = "*"

// Limits are what the spoke lets the hub do, whatever the hub sends. The
// zero value allows nothing.
type Limits struct {
	// Namespaces that may receive promotions; Any allows all. Empty allows
	// none.
	Namespaces []string `json:"allowedNamespaces,omitempty"`
	// ChartSources are URL prefixes (https://host/path, oci://host/path)
	// that a chart's repository plus name must start with, on a path
	// boundary; Any allows all. Empty allows none.
	ChartSources []string `json:"allowedChartSources,omitempty"`
	// AllowDowngrades allows a version lower (semver) than the release's.
	AllowDowngrades bool `json:"allowDowngrades,omitempty"`

	// from is the file the limits were read from; empty for flags. It names
	// the limit in refusals.
	from string
}

// refusal is an action outside the limits: it is reported Refused and not
// attempted.
type refusal struct{ msg string }

func (r *refusal) Error() string { return r.msg }

func refuse(format string, args ...any) error {
	return &refusal{msg: fmt.Sprintf(format, args...)}
}

// name is how a refusal names a limit: the flag, or the key in the file.
func (l Limits) name(flag, key string) string {
	if l.from == "" {
		return flag
	}
	return key + " of " + l.from
}

// checkNamespace refuses a namespace the limits do not allow.
func (l Limits) checkNamespace(ns string) error {
	for _, n := range l.Namespaces {
		if n == Any || n == ns {
			return nil
		}
	}
	return refuse("namespace %s is not in %s", ns, l.name(flagNamespaces, "allowedNamespaces"))
}

// checkSource refuses a chart source the limits do not allow, and any
// source that carries credentials, a query, or dot segments (which could
// walk out of an allowed prefix).
func (l Limits) checkSource(repository, chart string) error {
	src, err := normalizeSource(repository)
	if err != nil {
		return refuse("chart source %s is not allowed: %v", repository, err)
	}
	if chart == "" || strings.ContainsAny(chart, "/\\:@?#") || chart == "." || chart == ".." {
		return refuse("chart name %q is not allowed", chart)
	}
	full := src + "/" + chart
	for _, p := range l.ChartSources {
		if p == Any {
			return nil
		}
		prefix, err := normalizeSource(p)
		if err != nil {
			continue
		}
		if full == prefix || strings.HasPrefix(full, prefix+"/") {
			return nil
		}
	}
	return refuse("chart source %s is not allowed (not under %s)", repository, l.name(flagChartSources, "allowedChartSources"))
}

// checkVersion refuses a downgrade from current (which may be empty or not a
// version: then nothing is compared) to target.
func (l Limits) checkVersion(current, target string) error {
	if l.AllowDowngrades || current == "" {
		return nil
	}
	cur, err := semver.NewVersion(current)
	if err != nil {
		return nil
	}
	tgt, err := semver.NewVersion(target)
	if err != nil {
		return refuse("version %q is not a semantic version", target)
	}
	if tgt.LessThan(cur) {
		return refuse("%s is a downgrade from %s and downgrades are not allowed (%s)", target, current, l.name(flagAllowDowngrades, "allowDowngrades"))
	}
	return nil
}

// normalizeSource returns a chart source URL with its scheme and host in
// lower case and no trailing slash, or an error when it is not an http,
// https or oci URL, or carries credentials, a query, a fragment or dot
// segments.
func normalizeSource(s string) (string, error) {
	u, err := url.Parse(s)
	if err != nil {
		return "", errors.New("not a URL")
	}
	scheme := strings.ToLower(u.Scheme)
	switch scheme {
	case "http", "https", "oci":
	default:
		return "", fmt.Errorf("scheme %q: must be http, https or oci", u.Scheme)
	}
	switch {
	case u.Host == "":
		return "", errors.New("no host")
	case u.User != nil:
		return "", errors.New("credentials in the URL (they come from the spoke's Secret)")
	case u.RawQuery != "" || u.Fragment != "" || u.Opaque != "":
		return "", errors.New("a query or fragment")
	}
	for _, seg := range strings.Split(u.Path, "/") {
		if seg == "." || seg == ".." {
			return "", errors.New("dot segments in the path")
		}
	}
	return scheme + "://" + strings.ToLower(u.Host) + strings.TrimRight(u.EscapedPath(), "/"), nil
}

// validate checks the limits' entries.
func (l Limits) validate() error {
	var errs []error
	for _, n := range l.Namespaces {
		if n != Any && len(validation.IsDNS1123Label(n)) > 0 {
			errs = append(errs, fmt.Errorf("%s: %q is not a namespace name", l.name(flagNamespaces, "allowedNamespaces"), n))
		}
	}
	for _, p := range l.ChartSources {
		if p == Any {
			continue
		}
		if _, err := normalizeSource(p); err != nil {
			errs = append(errs, fmt.Errorf("%s: %q: %w", l.name(flagChartSources, "allowedChartSources"), p, err))
		}
	}
	return errors.Join(errs...)
}

// limitsSource gives the limits in force: the flags', or the file's, re-read
// when the file changes.
type limitsSource struct {
	flags Limits
	path  string

	mu     sync.Mutex
	cached Limits
	info   os.FileInfo
}

// get returns the limits in force, or an error when the limits file cannot
// be used (every action is then refused).
func (s *limitsSource) get() (Limits, error) {
	if s.path == "" {
		return s.flags, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	info, err := os.Stat(s.path)
	if err != nil {
		return Limits{}, err
	}
	if s.info != nil && keyfile.SameFile(info, s.info) {
		return s.cached, nil
	}
	l, err := readLimits(s.path)
	if err != nil {
		return Limits{}, err
	}
	s.cached, s.info = l, info
	return l, nil
}

// readLimits reads and validates a limits file.
func readLimits(path string) (Limits, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Limits{}, err
	}
	var l Limits
	if err := yaml.UnmarshalStrict(data, &l); err != nil {
		return Limits{}, fmt.Errorf("parsing %s: %w", path, err)
	}
	l.from = path
	if err := l.validate(); err != nil {
		return Limits{}, err
	}
	return l, nil
}
