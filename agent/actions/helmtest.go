package actions

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/release"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"

	"tugboat.dev/tugboat/agent/actions/preview"
	"tugboat.dev/tugboat/api/clip"
	"tugboat.dev/tugboat/api/wire"
)

// A helm test action (wire.ActionHelmTest) runs the release's Helm test
// hooks (helm test, through the Helm SDK's ReleaseTesting) for a helmTest
// lifecycle step of a promotion.
//
// Limits: the namespace limit applies as to an upgrade; no chart is
// fetched (the hooks are the release's own, from its stored revision). It
// tests only the revision the promotion produced: the release's latest
// revision must be a.HelmTest.Revision, deployed at a.HelmTest.Version;
// anything else (a person upgraded or rolled back since) is Refused.
//
// The outcome is Succeeded when every test hook passed; Failed names the
// failing test Pod and holds the end of its log (bounded: helmTestLogBytes).
// A Pod whose log cannot be read (a kwok node serves none) is named with
// why its log is unavailable.

// helmTestLogBytes bounds the log excerpt in a failed test's message; the
// hub keeps 1024 characters of a message.
const helmTestLogBytes = 600

// checkHelmTest rejects a helm test action missing what it needs.
func checkHelmTest(a wire.Action) error {
	var errs []error
	if a.Namespace == "" || a.Release == "" {
		errs = append(errs, errors.New("namespace and release are required"))
	}
	if a.Version != "" {
		errs = append(errs, errors.New("a helm test sets no version (helmTest.version is the version it tests)"))
	}
	if a.Rollback != nil || a.Preview != nil {
		errs = append(errs, errors.New("rollback and preview are not set on a helm test action"))
	}
	t := a.HelmTest
	if t == nil {
		return errors.Join(append(errs, errors.New("helmTest is required"))...)
	}
	if t.Revision < 1 {
		errs = append(errs, errors.New("helmTest.revision must be at least 1"))
	}
	if t.Version == "" {
		errs = append(errs, errors.New("helmTest.version is required"))
	}
	if t.TimeoutSeconds < 0 {
		errs = append(errs, errors.New("helmTest.timeoutSeconds must not be negative"))
	}
	return errors.Join(errs...)
}

// helmTest carries out a helm test action. It returns a message and the
// revision tested.
func (e *Executor) helmTest(ctx context.Context, log logr.Logger, limits Limits, a wire.Action) (string, int, error) {
	t := a.HelmTest
	key := a.Namespace + "/" + a.Release
	if err := limits.checkNamespace(a.Namespace); err != nil {
		return "", 0, err
	}
	cfg, err := e.helmConfig(a.Namespace, a.Release)
	if err != nil {
		return "", 0, err
	}
	last, err := e.settle(ctx, log, cfg, a)
	if err != nil {
		return "", 0, err
	}
	if last.Version != t.Revision || chartVersion(last) != t.Version || last.Info.Status != release.StatusDeployed {
		return "", 0, refuse("release %s changed since the promotion: its latest revision is %d (chart version %s, %s), not revision %d at %s that the promotion produced; its tests would not test the promoted version",
			key, last.Version, chartVersion(last), last.Info.Status, t.Revision, t.Version)
	}
	if ctx.Err() != nil {
		return "", 0, abandoned(ctx)
	}
	rt := action.NewReleaseTesting(cfg)
	rt.Namespace = a.Namespace
	rt.Timeout = e.opts.UpgradeTimeout
	if d := time.Duration(t.TimeoutSeconds) * time.Second; d > 0 && d < rt.Timeout {
		rt.Timeout = d
	}
	log.Info("Running the release's Helm tests", "revision", last.Version, "timeout", rt.Timeout.String())
	// Like an upgrade, once started it runs to its end (Run takes no
	// context): Helm deletes the test Pods of an earlier run first.
	rel, runErr := rt.Run(a.Release)
	tests := testHooks(rel)
	if runErr == nil {
		if len(tests) == 0 {
			return fmt.Sprintf("release %s (revision %d, chart version %s) has no test hooks: nothing to test", key, last.Version, t.Version), last.Version, nil
		}
		return fmt.Sprintf("release %s (revision %d, chart version %s): %d test(s) passed: %s", key, last.Version, t.Version, len(tests), strings.Join(names(tests), ", ")), last.Version, nil
	}
	failed := failedTest(tests)
	if failed == nil {
		return "", last.Version, fmt.Errorf("helm test of release %s (revision %d): %w", key, last.Version, runErr)
	}
	return "", last.Version, fmt.Errorf("helm test of release %s (revision %d): test %s %s failed: %s",
		key, last.Version, strings.ToLower(failed.Kind), failed.Name, e.testLog(ctx, a.Namespace, failed, rel))
}

// testHooks returns rel's test hooks.
func testHooks(rel *release.Release) []*release.Hook {
	if rel == nil {
		return nil
	}
	var out []*release.Hook
	for _, h := range rel.Hooks {
		for _, ev := range h.Events {
			if ev == release.HookTest {
				out = append(out, h)
				break
			}
		}
	}
	return out
}

func names(hooks []*release.Hook) []string {
	out := make([]string, 0, len(hooks))
	for _, h := range hooks {
		out = append(out, h.Name)
	}
	return out
}

// failedTest returns the test hook whose last run failed, or nil.
func failedTest(hooks []*release.Hook) *release.Hook {
	for _, h := range hooks {
		if h.LastRun.Phase == release.HookPhaseFailed {
			return h
		}
	}
	return nil
}

// testLog returns the end of the failed test Pod's log, bounded, or says
// why it is unavailable. It leaves the spoke (the Promotion's status, its
// Events and notices), so the release's secrets are redacted from it
// (preview.Redact: the data of the Secrets rel renders, its sensitive
// values, credentials written out).
func (e *Executor) testLog(ctx context.Context, namespace string, h *release.Hook, rel *release.Release) string {
	if h.Kind != "Pod" {
		return "no log: the test is a " + h.Kind + ", not a Pod"
	}
	cs, err := kubernetes.NewForConfig(e.rest)
	if err != nil {
		return "its log is unavailable: " + err.Error()
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	// The last lines say why a test failed; clip bounds them.
	tail, limit := int64(10), int64(16<<10)
	rc, err := cs.CoreV1().Pods(namespace).GetLogs(h.Name, &corev1.PodLogOptions{TailLines: &tail, LimitBytes: &limit}).Stream(ctx)
	if err != nil {
		return "its log is unavailable: " + clip.String(err.Error(), 300)
	}
	defer rc.Close()
	var b bytes.Buffer
	if _, err := io.Copy(&b, io.LimitReader(rc, limit)); err != nil && b.Len() == 0 {
		return "its log is unavailable: " + clip.String(err.Error(), 300)
	}
	text := strings.TrimSpace(b.String())
	if text == "" {
		return "its log is empty"
	}
	var manifest string
	var values map[string]any
	if rel != nil {
		manifest = rel.Manifest
		if v, err := chartutil.CoalesceValues(rel.Chart, rel.Config); err == nil {
			values = v
		}
	}
	return "log (last lines): " + clip.String(preview.Redact(manifest, namespace, values, text), helmTestLogBytes)
}
