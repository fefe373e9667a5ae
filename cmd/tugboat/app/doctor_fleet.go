//go:build !agentonly

package app

import (
	"context"
	"fmt"
	"sort"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/api/wire"
)

// checkHub judges whether the hub runs from what it writes: Spokes'
// heartbeats (the receiver) and reconciled generations (the controllers).
func (d *doctor) checkHub(spokes *tugboatv1alpha1.SpokeList, pipelines *tugboatv1alpha1.PipelineList) {
	now := d.now()
	// The hub records a live Spoke's lastSeen at most every
	// --spoke-heartbeat-refresh (its heartbeat digests carry the rest), so
	// a live spoke's lastSeen may be that much older than its heartbeat.
	window := d.opts.staleAfter + d.opts.heartbeatRefresh
	if spokes != nil {
		var latest, latestFlux *tugboatv1alpha1.Spoke
		recent := 0
		for i := range spokes.Items {
			sp := &spokes.Items[i]
			if ev := sp.Status.LastFluxEvent; ev != nil && (latestFlux == nil || ev.ReceivedAt.After(latestFlux.Status.LastFluxEvent.ReceivedAt.Time)) {
				latestFlux = sp
			}
			if sp.Status.LastSeen == nil {
				continue
			}
			if now.Sub(sp.Status.LastSeen.Time) <= window {
				recent++
			}
			if latest == nil || sp.Status.LastSeen.After(latest.Status.LastSeen.Time) {
				latest = sp
			}
		}
		switch {
		case len(spokes.Items) == 0:
			d.add(checkHub, codeHubNoSpokes, severityWarning, "", "no Spokes "+d.scope()+": nothing reports to the hub",
				"register each leaf cluster as a Spoke and run the agent there (docs/agent.md)")
		case latest == nil && latestFlux != nil:
			// Agentless spokes only: Flux posts when something happens, so
			// a quiet one says nothing about the receiver.
			d.add(checkHub, codeHubFluxEventsOK, severityOK, "", fmt.Sprintf("no agent heartbeats (agentless spokes only): the receiver records Flux events (latest from %s/%s, %s ago)",
				latestFlux.Namespace, latestFlux.Name, age(now.Sub(latestFlux.Status.LastFluxEvent.ReceivedAt.Time))), "")
		case latest == nil:
			d.add(checkHub, codeHubNeverReported, severityWarning, "", fmt.Sprintf("no Spoke has ever reported (%s registered %s)", plural(len(spokes.Items), "Spoke"), d.scope()),
				"run the agent on each spoke with --hub-url pointing at the hub's receiver and the Spoke's key (docs/agent.md)")
		case recent == 0:
			d.add(checkHub, codeHubHeartbeatsStale, severityError, "", fmt.Sprintf("no Spoke has reported in the last %s (latest: %s/%s, %s ago)",
				age(window), latest.Namespace, latest.Name, age(now.Sub(latest.Status.LastSeen.Time))),
				"the hub's receiver is down or the agents cannot reach it: kubectl -n tugboat-system get deploy,pods; kubectl -n tugboat-system logs deploy/tugboat-hub; and the agents' logs")
		default:
			d.add(checkHub, codeHubHeartbeatsOK, severityOK, "", fmt.Sprintf("the receiver records heartbeats: %d of %s reported in the last %s (latest %s ago)",
				recent, plural(len(spokes.Items), "Spoke"), age(window), age(now.Sub(latest.Status.LastSeen.Time))), "")
		}
	}

	judged, total := 0, 0
	var behind []string
	note := func(obj metav1.Object, observed int64, conds []metav1.Condition) {
		total++
		done, judge := d.reconciled(obj, observed, conds)
		if !judge {
			return
		}
		judged++
		if !done {
			behind = append(behind, obj.GetNamespace()+"/"+obj.GetName())
		}
	}
	if spokes != nil {
		for i := range spokes.Items {
			note(&spokes.Items[i], spokes.Items[i].Status.ObservedGeneration, spokes.Items[i].Status.Conditions)
		}
	}
	if pipelines != nil {
		for i := range pipelines.Items {
			note(&pipelines.Items[i], pipelines.Items[i].Status.ObservedGeneration, pipelines.Items[i].Status.Conditions)
		}
	}
	sort.Strings(behind)
	switch {
	case judged == 0:
		// Nothing to judge the controllers by.
	case len(behind) == judged:
		d.add(checkHub, codeHubControllersDown, severityError, "", fmt.Sprintf("the hub's controllers are not reconciling: none of %s Spokes and Pipelines has status.observedGeneration up to its generation",
			strconv.Itoa(judged)),
			"kubectl -n tugboat-system get deploy tugboat-hub; kubectl -n tugboat-system logs deploy/tugboat-hub (is it running, and has one replica won the leader election?)")
	case len(behind) > 0:
		d.add(checkHub, codeHubControllersBehind, severityWarning, "", fmt.Sprintf("%d of %d Spokes and Pipelines are not reconciled since their last change: %s",
			len(behind), judged, firstFew(behind, 3)),
			"the hub's controllers may be failing on them: kubectl -n tugboat-system logs deploy/tugboat-hub")
	default:
		d.add(checkHub, codeHubControllersOK, severityOK, "", fmt.Sprintf("the controllers reconcile: %d of %d Spokes and Pipelines are up to date", judged, total), "")
	}
}

// checkSpokes reports every Spoke's Ready condition, agent version and key
// Secret.
func (d *doctor) checkSpokes(ctx context.Context, spokes []tugboatv1alpha1.Spoke) {
	now := d.now()
	cli := version()
	secretsForbidden := map[string]bool{}
	for i := range spokes {
		sp := &spokes[i]
		obj := sp.Namespace + "/" + sp.Name
		seen := "never seen"
		if sp.Status.LastSeen != nil {
			seen = "last seen " + age(now.Sub(sp.Status.LastSeen.Time)) + " ago"
		}
		agentHint := fmt.Sprintf("check the agent on spoke %s: that it runs, its logs, that --hub-url reaches the hub's receiver and that it signs with the key in Secret %s/%s",
			sp.Name, sp.Namespace, sp.Spec.KeySecretRef.Name)
		ready := apimeta.FindStatusCondition(sp.Status.Conditions, tugboatv1alpha1.ReadyCondition.String())
		// An agentless spoke (Flux notification-controller, no agent) is
		// judged by its Flux events.
		agentless := sp.Status.LastSeen == nil && ready != nil &&
			(ready.Reason == tugboatv1alpha1.FluxEventReceivedReason.String() || ready.Reason == tugboatv1alpha1.NoEventSinceSetupReason.String())
		switch {
		case sp.Spec.Suspend:
			d.add(checkSpoke, codeSpokeSuspended, severityWarning, obj, "suspended: the hub rejects its agent and promotes nothing into or from it ("+seen+")",
				"set spec.suspend to false when the spoke should take part again")
		case ready == nil:
			if _, judge := d.reconciled(sp, sp.Status.ObservedGeneration, sp.Status.Conditions); judge {
				d.add(checkSpoke, codeSpokeUnreconciled, severityWarning, obj, "no Ready condition: the hub has not reconciled it ("+seen+")",
					"see the hub check: the hub's controllers may not run")
			} else {
				d.add(checkSpoke, codeSpokeJustChanged, severityOK, obj, "just created or changed; waiting for the hub to reconcile it", "")
			}
		case agentless && ready.Status == metav1.ConditionTrue:
			msg := "Ready, agentless (Flux notification-controller): " + ready.Message
			if ev := sp.Status.LastFluxEvent; ev != nil {
				msg = fmt.Sprintf("Ready, agentless (Flux notification-controller): last Flux event %s ago (%s of %s)", age(now.Sub(ev.ReceivedAt.Time)), orDash(ev.Reason), orDash(ev.Object))
			}
			d.add(checkSpoke, codeSpokeAgentlessReady, severityOK, obj, msg, "")
		case agentless:
			d.add(checkSpoke, codeSpokeAgentlessNotReady, severityError, obj, fmt.Sprintf("not Ready (%s, %s): %s", ready.Status, ready.Reason, ready.Message),
				fmt.Sprintf("check Flux on spoke %s: kubectl -n flux-system get providers,alerts; the Provider's address must reach the hub's receiver at /v1/flux/%s and its Secret's token must be %q of Secret %s/%s (tugboat spoke add %s --flux sets both up; docs/flux.md)",
					sp.Name, sp.Name, tugboatv1alpha1.SpokeFluxKeySecretKey, sp.Namespace, sp.Spec.KeySecretRef.Name, sp.Name))
		case ready.Status == metav1.ConditionTrue:
			msg := fmt.Sprintf("Ready, %s, agent %s", seen, orDash(sp.Status.AgentVersion))
			if sp.Status.KubernetesVersion != "" {
				msg += ", Kubernetes " + sp.Status.KubernetesVersion
			}
			d.add(checkSpoke, codeSpokeReady, severityOK, obj, msg+", "+plural(int(sp.Status.ReleaseCount), "release"), "")
			if sp.Status.ReleaseCount == 0 {
				d.add(checkSpoke, codeSpokeNoReleases, severityWarning, obj, "its agent reports no Helm releases",
					"if the spoke runs releases, check the agent's --watch-namespaces and its RBAC to read Secrets and ConfigMaps")
			}
		case ready.Status == metav1.ConditionFalse:
			hint, code := "kubectl describe spoke "+sp.Name+" -n "+sp.Namespace, codeSpokeNotReady
			switch ready.Reason {
			case "DuplicateName":
				code = codeSpokeDuplicateName
				hint = "an older Spoke in another namespace has this name (spoke names are unique across the hub): rename this one"
			case tugboatv1alpha1.InvalidSpecReason.String():
				code = codeSpokeInvalidKey
				hint = fmt.Sprintf("put keys of at least %d bytes (openssl rand -hex 32) in Secret %s/%s: %q, and %q if Flux reports for the spoke, different from it", wire.MinSpokeKeySize, sp.Namespace, sp.Spec.KeySecretRef.Name, tugboatv1alpha1.SpokeKeySecretKey, tugboatv1alpha1.SpokeFluxKeySecretKey)
			}
			d.add(checkSpoke, code, severityError, obj, fmt.Sprintf("not Ready (%s): %s", ready.Reason, ready.Message), hint)
		default:
			msg := fmt.Sprintf("not Ready (%s, %s): %s", ready.Status, ready.Reason, ready.Message)
			if sp.Status.LastSeen == nil {
				msg = fmt.Sprintf("not Ready (%s, %s): its agent never reported", ready.Status, ready.Reason)
			}
			d.add(checkSpoke, codeSpokeAgentNotSeen, severityError, obj, msg, agentHint)
		}

		// The hub refuses to bootstrap the agent as the Spoke asks (its
		// Ready still follows the heartbeats of an agent installed before).
		if c := apimeta.FindStatusCondition(sp.Status.Conditions, tugboatv1alpha1.AgentInstalledCondition.String()); c != nil && c.Status == metav1.ConditionFalse {
			hint := ""
			switch c.Reason {
			case tugboatv1alpha1.ValuesNotAllowedReason.String():
				hint = "take those values out of the Spoke's spec.agentBootstrap.values (or its SpokeClass's spec.agent.values), or have the hub's operator allow them (tugboat hub --bootstrap-allowed-values; docs/hub.md)"
			case tugboatv1alpha1.KeySecretNotGeneratedReason.String():
				hint = fmt.Sprintf("point spec.keySecretRef at the key the hub generated for this Spoke, or delete Secret %s/%s so that the hub generates one (then give its agent the new key)", sp.Namespace, sp.Spec.KeySecretRef.Name)
			}
			if hint != "" {
				d.add(checkSpoke, codeSpokeBootstrapRefused, severityError, obj, fmt.Sprintf("agent bootstrap refused (%s): %s", c.Reason, c.Message), hint)
			}
		}

		if av := sp.Status.AgentVersion; av != "" {
			if a, c := majorMinor(av), majorMinor(cli); a != "" && c != "" && a != c {
				d.add(checkSpoke, codeSpokeVersionSkew, severityWarning, obj, fmt.Sprintf("agent %s, this CLI %s: versions differ in major or minor", av, cli),
					"run the same minor version of tugboat on the hub, the agents and the CLI (upgrade the older side)")
			}
		}

		if secretsForbidden[sp.Namespace] {
			continue
		}
		secret := &metav1.PartialObjectMetadata{}
		secret.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
		err := d.c.Get(ctx, types.NamespacedName{Namespace: sp.Namespace, Name: sp.Spec.KeySecretRef.Name}, secret)
		switch {
		case err == nil:
		case apierrors.IsNotFound(err):
			d.add(checkSpoke, codeSpokeKeySecretMissing, severityError, obj, fmt.Sprintf("key Secret %s/%s does not exist: the hub cannot verify the agent", sp.Namespace, sp.Spec.KeySecretRef.Name),
				"the hub's Spoke controller generates it when it runs (see the hub check); then give the agent that key")
		case apierrors.IsForbidden(err):
			secretsForbidden[sp.Namespace] = true
			who := "you"
			if u := d.whoAmI(ctx); u != "" {
				who = "user " + u
			}
			d.add(checkSpoke, codeSpokeKeySecretForbidden, severityWarning, sp.Namespace, "cannot check the Spokes' key Secrets in namespace "+sp.Namespace+": forbidden",
				who+" needs get on secrets in namespace "+sp.Namespace+" for doctor to check them")
		default:
			d.add(checkSpoke, codeSpokeKeySecretReadError, severityWarning, obj, fmt.Sprintf("cannot read key Secret %s/%s: %v", sp.Namespace, sp.Spec.KeySecretRef.Name, err), "retry")
		}
	}
}

// checkPipelines reports every Pipeline's conditions, suspension, holds
// and targets naming a Spoke that does not exist (when spokes could be
// listed).
func (d *doctor) checkPipelines(pipelines []tugboatv1alpha1.Pipeline, spokes *tugboatv1alpha1.SpokeList) {
	now := d.now()
	for i := range pipelines {
		p := &pipelines[i]
		obj := p.Namespace + "/" + p.Name
		conds := p.Status.Conditions
		ready := apimeta.FindStatusCondition(conds, tugboatv1alpha1.ReadyCondition.String())
		stalled := apimeta.FindStatusCondition(conds, tugboatv1alpha1.StalledCondition.String())
		reconciling := apimeta.FindStatusCondition(conds, tugboatv1alpha1.ReconcilingCondition.String())
		done, judge := d.reconciled(p, p.Status.ObservedGeneration, conds)
		switch {
		case stalled != nil && stalled.Status == metav1.ConditionTrue:
			d.add(checkPipeline, codePipelineStalled, severityError, obj, fmt.Sprintf("Stalled (%s): %s", stalled.Reason, stalled.Message),
				"fix the Pipeline's spec: kubectl edit pipeline "+p.Name+" -n "+p.Namespace)
		case ready == nil:
			if judge {
				d.add(checkPipeline, codePipelineUnreconciled, severityWarning, obj, "no Ready condition: the hub has not reconciled it",
					"see the hub check: the hub's controllers may not run")
			} else {
				d.add(checkPipeline, codePipelineJustChanged, severityOK, obj, "just created or changed; waiting for the hub to reconcile it", "")
			}
		case ready.Status == metav1.ConditionFalse:
			hint, code := "kubectl describe pipeline "+p.Name+" -n "+p.Namespace, codePipelineNotReady
			switch ready.Reason {
			case tugboatv1alpha1.ReconciliationFailedReason.String():
				code = codePipelineReconcileFailed
				hint = "the hub retries with back-off; the message names the error (see also the hub's logs)"
			case tugboatv1alpha1.TargetNotFoundReason.String():
				code = codePipelineTargetNotFound
				hint = "register the missing Spokes (or fix the targets), and fix the agents of Spokes that are not Ready (see the spoke findings)"
			}
			d.add(checkPipeline, code, severityError, obj, fmt.Sprintf("not Ready (%s): %s", ready.Reason, ready.Message), hint)
		case ready.Status == metav1.ConditionTrue:
			d.add(checkPipeline, codePipelineReady, severityOK, obj, fmt.Sprintf("Ready (%s): %s", ready.Reason, ready.Message), "")
		default:
			d.add(checkPipeline, codePipelineReadyUnknown, severityWarning, obj, fmt.Sprintf("Ready is %s (%s): %s", ready.Status, ready.Reason, ready.Message),
				"kubectl describe pipeline "+p.Name+" -n "+p.Namespace)
		}
		if !done && judge && ready != nil {
			d.add(checkPipeline, codePipelineGenerationBehind, severityWarning, obj, fmt.Sprintf("not reconciled since its last change (generation %d, observed %d)", p.Generation, p.Status.ObservedGeneration),
				"the hub's controllers may be failing on it: kubectl -n tugboat-system logs deploy/tugboat-hub")
		}
		if reconciling != nil && reconciling.Status == metav1.ConditionTrue && now.Sub(reconciling.LastTransitionTime.Time) >= d.opts.reconcileGrace {
			d.add(checkPipeline, codePipelineReconcilingLong, severityWarning, obj, fmt.Sprintf("Reconciling for %s (%s): %s", age(now.Sub(reconciling.LastTransitionTime.Time)), reconciling.Reason, reconciling.Message),
				"kubectl describe pipeline "+p.Name+" -n "+p.Namespace)
		}
		if p.Spec.Suspend {
			d.add(checkPipeline, codePipelineSuspended, severityWarning, obj, "suspended: no automatic promotions (manual ones still run)",
				"set spec.suspend to false to resume automatic promotion")
		}
		for _, h := range p.Status.HeldEnvironments {
			d.addHold(p, h)
		}
		if spokes != nil && !done {
			// The hub has not judged this generation's targets (its
			// TargetNotFound says it when it has): doctor does.
			d.checkTargetSpokes(p, spokes.Items)
		}
	}
}

// addHold reports a hold on automatic promotion into an environment, with
// the fix that fits what a person did: a rollback or an uninstall.
func (d *doctor) addHold(p *tugboatv1alpha1.Pipeline, h tugboatv1alpha1.HeldEnvironment) {
	obj := p.Namespace + "/" + p.Name
	since := age(d.now().Sub(h.Since.Time))
	resume := fmt.Sprintf("tugboat resume %s --env %s -n %s", p.Name, h.Name, p.Namespace)
	var code findingCode
	var msg, hint string
	if h.Reason == tugboatv1alpha1.HoldUninstall {
		code = codePipelineHeldUninstall
		msg = fmt.Sprintf("automatic promotion into %s is held after an uninstall, since %s ago", h.Name, since)
		hint = fmt.Sprintf("reinstall the release on the target, or drop the target from environment %s of the Pipeline if it is gone for good; then: %s", h.Name, resume)
	} else {
		// Rollback, or a hold recorded before holds had a reason.
		code = codePipelineHeldRollback
		msg = fmt.Sprintf("automatic promotion into %s is held after a rollback, since %s ago", h.Name, since)
		hint = "once the rollback is dealt with: " + resume
		if h.Reason == tugboatv1alpha1.HoldRolloutFailed {
			msg = fmt.Sprintf("automatic promotion into %s is held after a failed rollout was rolled back, since %s ago", h.Name, since)
			hint = "once the failed version is understood (tugboat status " + p.Name + " -n " + p.Namespace + "): " + resume
		}
	}
	if h.Message != "" {
		msg += ": " + h.Message
	}
	d.add(checkPipeline, code, severityWarning, obj, msg, hint)
}

// checkTargetSpokes reports the targets of p that name a Spoke not
// registered in p's namespace: the hub can never promote into them. It
// reads the Spokes itself, so it tells even when the hub's controllers
// have not reconciled p.
func (d *doctor) checkTargetSpokes(p *tugboatv1alpha1.Pipeline, spokes []tugboatv1alpha1.Spoke) {
	known := map[string]bool{}
	for i := range spokes {
		if spokes[i].Namespace == p.Namespace {
			known[spokes[i].Name] = true
		}
	}
	for _, env := range p.Spec.Environments {
		var missing []string
		seen := map[string]bool{}
		for _, t := range env.Targets {
			if t.Spoke == "" || known[t.Spoke] || seen[t.Spoke] {
				continue
			}
			seen[t.Spoke] = true
			missing = append(missing, t.Spoke)
		}
		if len(missing) == 0 {
			continue
		}
		sort.Strings(missing)
		d.add(checkPipeline, codePipelineUnknownSpoke, severityError, p.Namespace+"/"+p.Name,
			fmt.Sprintf("environment %s targets %s %s, not registered in namespace %s", env.Name, spokeWord(len(missing)), joinAnd(missing), p.Namespace),
			fmt.Sprintf("register it (tugboat spoke add NAME -n %s prints the agent's install command), or fix the target's spoke name", p.Namespace))
	}
}

func spokeWord(n int) string {
	if n == 1 {
		return "Spoke"
	}
	return "Spokes"
}
