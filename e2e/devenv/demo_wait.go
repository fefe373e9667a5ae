package devenv

// The demo's waits (each prints a live line whenever what it waits for
// changes, and every few seconds while nothing does) and its timeline.

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"tugboat.dev/tugboat/api/clip"
	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
)

// stillEvery is how often a wait that sees no change says it still waits.
const stillEvery = 5 * time.Second

// wait calls check every 100ms until it reports done, printing its status
// whenever it changes. It gives up after the step timeout.
func (d *demoRun) wait(ctx context.Context, what string, check func(ctx context.Context) (status string, done bool, err error)) error {
	wctx, cancel := context.WithTimeout(ctx, d.opts.StepTimeout)
	defer cancel()
	start := time.Now()
	last, lastPrint := "", time.Time{}
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		status, done, err := check(wctx)
		if err != nil {
			status = "error: " + err.Error()
		}
		if status != last || time.Since(lastPrint) >= stillEvery {
			prefix := "…"
			if status == last {
				prefix = "… still"
			}
			fmt.Fprintf(d.out, "   %s %s  %s\n", prefix, seconds(time.Since(start)), status)
			last, lastPrint = status, time.Now()
		}
		if done {
			return nil
		}
		select {
		case <-wctx.Done():
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("waiting for %s: gave up after %s; last seen: %s (logs in %s/logs)", what, d.opts.StepTimeout, last, d.Env.Dir)
		case <-t.C:
		}
	}
}

// historyName is the ReleaseHistory of the sample release on spoke.
func historyName(spoke string) string {
	return tugboatv1alpha1.ReleaseHistoryName(spoke, DemoNamespace, DemoChart)
}

// releaseStatus describes the sample release on spoke as the hub recorded
// it; current is nil before it has any.
func (d *demoRun) releaseStatus(ctx context.Context, spoke string) (status string, current *tugboatv1alpha1.RevisionSummary, err error) {
	var rh tugboatv1alpha1.ReleaseHistory
	err = d.Env.Hub.Client.Get(ctx, client.ObjectKey{Namespace: d.Env.Namespace, Name: historyName(spoke)}, &rh)
	if apierrors.IsNotFound(err) {
		return fmt.Sprintf("%s: no release recorded yet", spoke), nil, nil
	}
	if err != nil || rh.Status.Current == nil {
		return fmt.Sprintf("%s: no release recorded yet", spoke), nil, err
	}
	c := rh.Status.Current
	status = fmt.Sprintf("%s: revision %d, %s %s, %s, %s", spoke, c.Revision, c.Chart, c.ChartVersion, c.Status, orUnknown(string(c.Health)))
	if c.HealthReason != "" && c.Health != tugboatv1alpha1.HealthCurrent {
		status += ": " + oneLine(c.HealthReason, 160)
	}
	return status, c, nil
}

// waitRelease waits until the hub records version deployed with health on
// spoke, then records the fact.
func (d *demoRun) waitRelease(ctx context.Context, spoke, version string, health tugboatv1alpha1.Health) error {
	var cur *tugboatv1alpha1.RevisionSummary
	err := d.wait(ctx, fmt.Sprintf("%s to run %s %s", spoke, version, health), func(ctx context.Context) (string, bool, error) {
		status, c, err := d.releaseStatus(ctx, spoke)
		cur = c
		return status, c != nil && c.ChartVersion == version && c.Status == tugboatv1alpha1.ReleaseStatusDeployed && c.Health == health, err
	})
	if err != nil {
		return err
	}
	d.releaseFact(spoke, cur)
	return nil
}

// recordRelease records the sample release of spoke as the hub has it now.
func (d *demoRun) recordRelease(ctx context.Context, spoke string) error {
	_, cur, err := d.releaseStatus(ctx, spoke)
	if err != nil {
		return err
	}
	if cur == nil {
		return fmt.Errorf("the hub recorded no release %s on %s", DemoChart, spoke)
	}
	d.releaseFact(spoke, cur)
	return nil
}

func (d *demoRun) releaseFact(spoke string, c *tugboatv1alpha1.RevisionSummary) {
	d.fact("release %s/%s/%s revision %d: %s %s, %s", spoke, DemoNamespace, DemoChart, c.Revision, c.Chart, c.ChartVersion, orUnknown(string(c.Health)))
}

// waitPromotion waits until the Promotion of version into env reaches phase.
func (d *demoRun) waitPromotion(ctx context.Context, env, version string, phase tugboatv1alpha1.PromotionPhase) error {
	name := d.promotionName(env, version)
	msg := ""
	var steps []tugboatv1alpha1.StepStatus
	err := d.wait(ctx, fmt.Sprintf("promotion %s to be %s", name, phase), func(ctx context.Context) (string, bool, error) {
		var pr tugboatv1alpha1.Promotion
		err := d.Env.Hub.Client.Get(ctx, client.ObjectKey{Namespace: d.Env.Namespace, Name: name}, &pr)
		if apierrors.IsNotFound(err) {
			return fmt.Sprintf("promotion %s: not created yet", name), false, nil
		}
		if err != nil {
			return "", false, err
		}
		msg, steps = "", pr.Status.Steps
		if c := apimeta.FindStatusCondition(pr.Status.Conditions, tugboatv1alpha1.ReadyCondition.String()); c != nil {
			msg = c.Message
		}
		status := fmt.Sprintf("promotion %s: %s", name, orDefault(string(pr.Status.Phase), "Pending"))
		if msg != "" {
			status += ": " + oneLine(msg, 200)
		}
		if !pr.Status.Phase.Terminal() {
			var pts tugboatv1alpha1.PromotionTargetList
			if err := d.Env.Hub.Client.List(ctx, &pts, client.InNamespace(d.Env.Namespace),
				client.MatchingLabels{tugboatv1alpha1.LabelPromotion: tugboatv1alpha1.PromotionLabelValue(name)}); err != nil {
				return "", false, err
			}
			for _, pt := range pts.Items {
				if t := pt.Status; !t.Done && t.Message != "" {
					status += fmt.Sprintf("; %s %s", pt.Key(), oneLine(t.Message, 160))
				}
			}
		}
		if pr.Status.Phase != phase && pr.Status.Phase.Terminal() {
			return status, false, fmt.Errorf("promotion %s ended %s, not %s: %s", name, pr.Status.Phase, phase, msg)
		}
		return status, pr.Status.Phase == phase, nil
	})
	if err != nil {
		return err
	}
	d.fact("promotion %s: %s", name, phase)
	var failed *tugboatv1alpha1.StepStatus
	for i, st := range steps {
		d.fact("step %s of %s (%s %s): %s", st.Name, name, st.Stage, st.Type, st.Phase)
		if st.Phase == tugboatv1alpha1.StepFailed || st.Phase == tugboatv1alpha1.StepTimedOut {
			failed = &steps[i]
		}
	}
	switch {
	case failed != nil:
		d.printStepFailure(failed)
	case msg != "" && phase != tugboatv1alpha1.PromotionSucceeded:
		d.say("  (%s)", oneLine(msg, 300))
	}
	return nil
}

// printStepFailure prints how the failed step st ended: its message,
// which for a helmTest step names the failing test Pod and ends with its
// log's last lines, each printed on a line of its own.
func (d *demoRun) printStepFailure(st *tugboatv1alpha1.StepStatus) {
	d.say("  %s step %s (%s) %s after %d attempt(s):", strings.ToLower(string(st.Stage)), st.Name, st.Type, st.Phase, st.Attempts)
	head, log, found := strings.Cut(st.Message, "log (last lines): ")
	d.say("  | %s", strings.TrimSpace(head))
	if found {
		d.say("  | log (last lines):")
		for _, line := range strings.Split(strings.TrimSpace(log), "\n") {
			d.say("  |   %s", line)
		}
	}
}

// waitStopped waits until the Pipeline says that version is not promoted
// out of the environment where it failed a post step (its Ready reason
// StoppedByStep), then records it.
func (d *demoRun) waitStopped(ctx context.Context, version string) error {
	msg := ""
	err := d.wait(ctx, "the pipeline to stop "+version, func(ctx context.Context) (string, bool, error) {
		var p tugboatv1alpha1.Pipeline
		if err := d.Env.Hub.Client.Get(ctx, client.ObjectKey{Namespace: d.Env.Namespace, Name: d.Env.Pipeline}, &p); err != nil {
			return "", false, err
		}
		c := apimeta.FindStatusCondition(p.Status.Conditions, tugboatv1alpha1.ReadyCondition.String())
		if c == nil {
			return fmt.Sprintf("pipeline %s: no Ready condition yet", p.Name), false, nil
		}
		msg = c.Message
		return fmt.Sprintf("pipeline %s: %s: %s", p.Name, c.Reason, oneLine(c.Message, 200)),
			c.Reason == tugboatv1alpha1.StoppedByStepReason.String() && strings.HasPrefix(c.Message, version+" is not promoted"), nil
	})
	if err != nil {
		return err
	}
	stopped, _, _ := strings.Cut(msg, ";")
	d.fact("stopped: %s", stopped)
	return nil
}

// waitHold waits until the Pipeline holds env.
func (d *demoRun) waitHold(ctx context.Context, env string) error {
	var held tugboatv1alpha1.HeldEnvironment
	err := d.wait(ctx, "the pipeline to hold "+env, func(ctx context.Context) (string, bool, error) {
		var p tugboatv1alpha1.Pipeline
		if err := d.Env.Hub.Client.Get(ctx, client.ObjectKey{Namespace: d.Env.Namespace, Name: d.Env.Pipeline}, &p); err != nil {
			return "", false, err
		}
		for _, h := range p.Status.HeldEnvironments {
			if h.Name == env {
				held = h
				return fmt.Sprintf("pipeline %s holds %s: %s", p.Name, env, h.Message), true, nil
			}
		}
		return fmt.Sprintf("pipeline %s holds no environment yet", p.Name), false, nil
	})
	if err != nil {
		return err
	}
	d.fact("hold %s: %s, %s", env, held.Reason, held.Message)
	d.say("  automatic promotion into and out of %s waits until someone runs `tugboat resume %s --env %s`", d.Env.Pipeline, env)
	return nil
}

// PrintTimeline writes the demo's timeline: each step, when it started
// (from the start of the demo), how long it took, and what the hub
// recorded.
func (d *Demo) PrintTimeline(w io.Writer) {
	fmt.Fprintf(w, "\nTimeline\n")
	fmt.Fprintf(w, "  %8s  %7s  %s\n", "AT", "TOOK", "STEP")
	var end time.Time
	for i, s := range d.Steps {
		took := "-"
		if !s.End.IsZero() {
			took = seconds(s.End.Sub(s.Start))
			end = s.End
		}
		fmt.Fprintf(w, "  %8s  %7s  %d. %s\n", "+"+seconds(s.Start.Sub(d.Start)), took, i+1, s.Title)
		for _, f := range s.Facts {
			fmt.Fprintf(w, "  %8s  %7s     %s\n", "", "", f)
		}
	}
	if !end.IsZero() {
		fmt.Fprintf(w, "Total: %s\n", seconds(end.Sub(d.Start)))
	}
}

func seconds(d time.Duration) string {
	return fmt.Sprintf("%.1fs", d.Seconds())
}

func orUnknown(s string) string { return orDefault(s, "Unknown") }

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// prefixWriter indents every line written through it.
type prefixWriter struct {
	w      io.Writer
	prefix string
	mu     sync.Mutex
	mid    bool
}

func (p *prefixWriter) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out bytes.Buffer
	for _, line := range bytes.SplitAfter(b, []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		if !p.mid {
			out.WriteString(p.prefix)
		}
		out.Write(line)
		p.mid = !bytes.HasSuffix(line, []byte("\n"))
	}
	if _, err := p.w.Write(out.Bytes()); err != nil {
		return 0, err
	}
	return len(b), nil
}

// oneLine puts s on one line, clipped to n bytes (clip.String).
func oneLine(s string, n int) string {
	return clip.String(strings.ReplaceAll(s, "\n", " "), n)
}
