//go:build !agentonly

package app

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// errDoctorFound is what `tugboat doctor` returns when it found at least one
// error-severity problem: the binary then exits with status 1.
type errDoctorFound struct{ errors, warnings int }

func (e errDoctorFound) Error() string {
	return fmt.Sprintf("doctor found %s and %s", plural(e.errors, "error"), plural(e.warnings, "warning"))
}

func newDoctorCommand() *cobra.Command {
	var (
		hf   hubFlags
		out  outputFlag
		opts = defaultDoctorOptions()
	)
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Check the tugboat installation on the hub and say what is wrong",
		Long: `doctor reads the hub with your kubeconfig and checks, one line per finding
(ok, warning or error, with a hint for each problem):

  crds            the tugboat.dev CRDs (Spoke, ReleaseHistory, Pipeline, Promotion,
                  PromotionPreview, Lifecycle, LifecycleEvent, SpokeClass) are
                  installed, established and serve v1alpha1, the version this CLI
                  speaks
  hub             the hub runs: Spokes' heartbeats arrive (status.lastSeen within
                  --stale-after plus --heartbeat-refresh, the hub's refresh of
                  lastSeen) and its controllers reconcile (Spokes' and
                  Pipelines' observedGeneration keeps up with their generation)
  spoke           every Spoke: Ready, last seen, agent version against this CLI's,
                  key Secret present, release count
  pipeline        every Pipeline: Ready/Stalled/Reconciling and their messages,
                  suspension, rollback holds
  promotion       Promotions waiting for approval longer than --approval-age,
                  Running/Verifying near or past their timeout, the most recent
                  failures (--failures per Pipeline)
  releasehistory  ReleaseHistories whose Ready condition is False

RBAC decides what doctor can read: a read you are not allowed is a finding
that names the missing permission. Each finding has a stable code (shown
with -o wide, json or yaml) that docs/troubleshooting.md explains. The exit status
is 1 when an error was found (or doctor could not run), 0 otherwise:
warnings do not fail unless --fail-on warning.`,
		Example: `  tugboat doctor -n fleet
  tugboat doctor -A -o json
  tugboat doctor -n fleet --approval-age 4h --stale-after 2m`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := out.validate(); err != nil {
				return err
			}
			if err := opts.validate(); err != nil {
				return err
			}
			s, err := hf.connect()
			if err != nil {
				return err
			}
			d, err := newDoctor(s.config, s.client, opts, s.namespace)
			if err != nil {
				return err
			}
			findings := d.run(cmd.Context())
			w := cmd.OutOrStdout()
			if done, err := out.structured(w, findings); done {
				if err != nil {
					return err
				}
			} else {
				printFindings(w, d, findings, out.wide(), newPainter(w))
			}
			return doctorVerdict(findings, opts.failOn)
		},
	}
	hf.bind(cmd)
	out.bind(cmd)
	f := cmd.Flags()
	f.BoolVarP(&opts.allNamespaces, "all-namespaces", "A", false, "check every namespace of the hub")
	f.DurationVar(&opts.staleAfter, "stale-after", opts.staleAfter, "a Spoke whose last heartbeat is older than this (plus --heartbeat-refresh) is stale; when every Spoke is, the hub's receiver is likely down")
	f.DurationVar(&opts.heartbeatRefresh, "heartbeat-refresh", opts.heartbeatRefresh, "the hub's --spoke-heartbeat-refresh: a live Spoke's status.lastSeen may be this much older than its last heartbeat (the hub's heartbeat digests carry each one)")
	f.DurationVar(&opts.approvalAge, "approval-age", opts.approvalAge, "report Promotions waiting for approval longer than this")
	f.IntVar(&opts.failures, "failures", opts.failures, "report at most this many of each Pipeline's most recent failed Promotions")
	f.Var(&opts.failOn, "fail-on", "exit with status 1 when a finding is at least this severe: error, or warning")
	f.DurationVar(&opts.reconcileGrace, "reconcile-grace", opts.reconcileGrace, "how long after a change a Spoke or Pipeline may go unreconciled before it counts against the hub's controllers")
	return cmd
}

// newDoctor readies the checks of the hub cfg points at: c reads tugboat
// objects, namespace is the one checked (unless opts.allNamespaces).
func newDoctor(cfg *rest.Config, c client.Client, opts doctorOptions, namespace string) (*doctor, error) {
	disc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("connecting to the hub: %w", err)
	}
	crdScheme := runtime.NewScheme()
	_ = apiextensionsv1.AddToScheme(crdScheme)
	crds, err := client.New(cfg, client.Options{Scheme: crdScheme})
	if err != nil {
		return nil, fmt.Errorf("connecting to the hub: %w", err)
	}
	d := &doctor{opts: opts, c: c, crds: crds, disc: disc, namespace: namespace, server: cfg.Host}
	if opts.allNamespaces {
		d.namespace = ""
	}
	return d, nil
}

// doctorVerdict is what `tugboat doctor` returns after its findings: an
// errDoctorFound (exit status 1) when one is an error, or a warning with
// --fail-on warning; nil (exit status 0) otherwise.
func doctorVerdict(findings []finding, failOn severity) error {
	errs, warns := countFindings(findings)
	if errs > 0 || (failOn == severityWarning && warns > 0) {
		return errDoctorFound{errors: errs, warnings: warns}
	}
	return nil
}

// printFindings writes the findings as a table and a summary; wide adds
// each finding's code and puts the hint in a column of its own.
func printFindings(w io.Writer, d *doctor, findings []finding, wide bool, pt painter) {
	scope := "namespace " + d.namespace
	if d.namespace == "" {
		scope = "all namespaces"
	}
	fmt.Fprintf(w, "Checking tugboat on the hub %s, %s.\n\n", d.server, scope)
	tw := newTable(w)
	if wide {
		row(tw, pt.header("STATUS"), "CHECK", "CODE", "OBJECT", "FINDING", "HINT")
	} else {
		row(tw, pt.header("STATUS"), "CHECK", "OBJECT", "FINDING")
	}
	for _, f := range findings {
		if wide {
			row(tw, pt.cell(string(f.Severity)), f.Check, string(f.Code), f.Object, f.Message, f.Hint)
			continue
		}
		msg := f.Message
		if f.Hint != "" {
			msg += "; hint: " + f.Hint
		}
		row(tw, pt.cell(string(f.Severity)), f.Check, f.Object, msg)
	}
	_ = tw.Flush()
	errs, warns := countFindings(findings)
	fmt.Fprintln(w)
	if errs == 0 && warns == 0 {
		fmt.Fprintln(w, "No problems found.")
		return
	}
	fmt.Fprintf(w, "%s, %s.\n", plural(errs, "error"), plural(warns, "warning"))
}

func countFindings(findings []finding) (errs, warns int) {
	for _, f := range findings {
		switch f.Severity {
		case severityError:
			errs++
		case severityWarning:
			warns++
		}
	}
	return errs, warns
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	if strings.HasSuffix(word, "y") {
		return fmt.Sprintf("%d %sies", n, strings.TrimSuffix(word, "y"))
	}
	return fmt.Sprintf("%d %ss", n, word)
}

// age renders a duration for people: 45s, 12m, 3h5m, 2d4h.
func age(d time.Duration) string {
	switch {
	case d < 0:
		return "0s"
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		if s := int(d.Seconds()) % 60; s != 0 && d < 10*time.Minute {
			return fmt.Sprintf("%dm%ds", int(d.Minutes()), s)
		}
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 24*time.Hour:
		if m := int(d.Minutes()) % 60; m != 0 {
			return fmt.Sprintf("%dh%dm", int(d.Hours()), m)
		}
		return fmt.Sprintf("%dh", int(d.Hours()))
	}
	days := int(d.Hours()) / 24
	if h := int(d.Hours()) % 24; h != 0 {
		return fmt.Sprintf("%dd%dh", days, h)
	}
	return fmt.Sprintf("%dd", days)
}
