//go:build !agentonly

package app_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"go.yaml.in/yaml/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/controllers/pipeline"
	"tugboat.dev/tugboat/controllers/promotion/request"
	"tugboat.dev/tugboat/e2e/identity"
)

var (
	t0 = metav1.NewTime(time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC))
	t1 = metav1.NewTime(time.Date(2026, 5, 1, 11, 30, 0, 0, time.UTC))
)

// reportedPipeline creates Pipeline "web" with a status: dev and staging at
// 1.4.0 (staging promoting into production), production held after a
// rollback to 1.2.0.
func reportedPipeline(t *testing.T, ns string) {
	t.Helper()
	p := newPipeline(t, ns, "web")
	target := func(spoke string, rev int32, version string, h tugboatv1alpha1.Health) tugboatv1alpha1.TargetStatus {
		return tugboatv1alpha1.TargetStatus{Spoke: spoke, Namespace: "apps", Release: "web", Revision: rev, Version: version, Health: h, LastDeployed: &t0}
	}
	writeStatus(t, p, tugboatv1alpha1.PipelineStatus{
		Conditions: []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, Reason: "HeldAfterRollback",
			Message: "automatic promotion into production is held", LastTransitionTime: t1}},
		Environments: []tugboatv1alpha1.EnvironmentStatus{
			{Name: "dev", Versions: []string{"1.4.0"}, HealthySince: &t0, Targets: []tugboatv1alpha1.TargetStatus{target("dev-1", 12, "1.4.0", "Current")}},
			{Name: "staging", Versions: []string{"1.4.0"}, HealthySince: &t1, ActivePromotion: "web-production-1.4.0",
				Targets: []tugboatv1alpha1.TargetStatus{target("staging-1", 7, "1.4.0", "Current")}},
			{Name: "production", Versions: []string{"1.2.0"}, Targets: []tugboatv1alpha1.TargetStatus{target("prod-1", 5, "1.2.0", "InProgress")}},
		},
		HeldEnvironments: []tugboatv1alpha1.HeldEnvironment{{Name: "production", Since: t1, Version: "1.2.0", Message: "rolled back from 1.3.0 (revision 4) to 1.2.0 (revision 5)"}},
	})
}

func TestStatus_listsEveryPipelinesEnvironments(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	reportedPipeline(t, ns)
	newPipeline(t, ns, "api") // not reported yet

	out, _, err := tugboat("status", "-n", ns)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(lineWith(out, "PIPELINE", "ENVIRONMENT", "VERSIONS")).NotTo(BeNil(), out)
	g.Expect(lineWith(out, "web", "dev")).To(Equal([]string{"web", "dev", "1.4.0", "2026-05-01T10:00:00Z", "-", "-"}), out)
	g.Expect(lineWith(out, "staging", "web-production-1.4.0")).To(Equal([]string{"staging", "1.4.0", "2026-05-01T11:30:00Z", "web-production-1.4.0", "-"}), out)
	g.Expect(lineWith(out, "production", "1.2.0")[:5]).To(Equal([]string{"production", "1.2.0", "-", "-", "held"}), out)
	g.Expect(out).To(ContainSubstring("held since 2026-05-01T11:30:00Z: rolled back from 1.3.0 (revision 4) to 1.2.0 (revision 5)"))
	g.Expect(lineWith(out, "api", "dev")).To(Equal([]string{"api", "dev", "-", "-", "-", "-"}), out)

	out, _, err = tugboat("status", "-n", ns, "-o", "json")
	g.Expect(err).NotTo(HaveOccurred())
	var list struct {
		Pipelines []struct {
			Name         string
			Environments []struct {
				Name     string
				Versions []string
			}
		}
	}
	g.Expect(json.Unmarshal([]byte(out), &list)).To(Succeed(), out)
	g.Expect(list.Pipelines).To(HaveLen(2))
	g.Expect(list.Pipelines[1].Name).To(Equal("web"))
	g.Expect(list.Pipelines[1].Environments[2].Versions).To(Equal([]string{"1.2.0"}))

	out, _, err = tugboat("status", "-n", newNamespace(t))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out).To(ContainSubstring("No pipelines in namespace"))
}

func TestStatus_showsOnePipelinesTargetsAndConditions(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	reportedPipeline(t, ns)

	out, _, err := tugboat("status", "web", "-n", ns)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out).To(ContainSubstring("Pipeline " + ns + "/web (release web)"))
	g.Expect(lineWith(out, "production", "1.2.0", "required")).NotTo(BeNil(), out)
	g.Expect(lineWith(out, "staging", "staging-1")).To(Equal([]string{"staging", "staging-1", "apps", "web", "7", "1.4.0", "Current", "2026-05-01T10:00:00Z"}), out)
	g.Expect(lineWith(out, "production", "prod-1")).To(Equal([]string{"production", "prod-1", "apps", "web", "5", "1.2.0", "InProgress", "2026-05-01T10:00:00Z"}), out)
	g.Expect(lineWith(out, "Ready", "True", "HeldAfterRollback")).NotTo(BeNil(), out)

	out, _, err = tugboat("status", "web", "-n", ns, "-o", "yaml")
	g.Expect(err).NotTo(HaveOccurred())
	var v struct {
		Name         string `yaml:"name"`
		Environments []struct {
			Name string `yaml:"name"`
			Hold *struct {
				Version string `yaml:"version"`
			} `yaml:"hold"`
			Targets []struct {
				Revision int `yaml:"revision"`
			} `yaml:"targets"`
		} `yaml:"environments"`
	}
	g.Expect(yaml.Unmarshal([]byte(out), &v)).To(Succeed(), out)
	g.Expect(v.Name).To(Equal("web"))
	g.Expect(v.Environments[2].Hold).NotTo(BeNil(), out)
	g.Expect(v.Environments[2].Hold.Version).To(Equal("1.2.0"))
	g.Expect(v.Environments[1].Targets[0].Revision).To(Equal(7))

	_, _, err = tugboat("status", "nope", "-n", ns)
	g.Expect(err).To(MatchError("pipeline " + ns + "/nope not found"))
	_, _, err = tugboat("status", "web", "-n", ns, "-o", "xml")
	g.Expect(err).To(MatchError(ContainSubstring(`unknown output format "xml"`)))
}

func TestHistory_showsRevisionsAndEvents(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	rh := &tugboatv1alpha1.ReleaseHistory{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "staging-1.apps.web"},
		Spec:       tugboatv1alpha1.ReleaseHistorySpec{Spoke: "staging-1", Namespace: "apps", Release: "web"},
	}
	g.Expect(cluster.Client.Create(ctx, rh)).To(Succeed())
	summary := func(rev int32, version string, status tugboatv1alpha1.ReleaseStatus, h tugboatv1alpha1.Health, at metav1.Time) tugboatv1alpha1.RevisionSummary {
		return tugboatv1alpha1.RevisionSummary{Revision: rev, Chart: "web", ChartVersion: version, AppVersion: "v" + version,
			Status: status, Health: h, FirstDeployed: &at, LastDeployed: &at}
	}
	cur := summary(7, "1.4.0", "deployed", "Current", t1)
	rh.Status = tugboatv1alpha1.ReleaseHistoryStatus{
		Current: &cur,
		Revisions: []tugboatv1alpha1.Revision{
			{RevisionSummary: cur, Events: []tugboatv1alpha1.ReleaseEvent{
				{ID: "a1", Time: t1, Type: "Normal", Reason: "ScalingReplicaSet", Object: &tugboatv1alpha1.EventObjectReference{Kind: "Deployment", Namespace: "apps", Name: "web"}, Message: "Scaled up web-7d9f to 3", Count: 2},
				{ID: "a2", Time: t1, Type: "Normal", Reason: "RolloutComplete", Message: "rollout complete", Count: 1},
			}},
			{RevisionSummary: summary(6, "1.3.0", "superseded", "Failed", t0)},
		},
	}
	g.Expect(cluster.Client.Status().Update(ctx, rh)).To(Succeed())

	out, _, err := tugboat("history", "staging-1/apps/web", "-n", ns)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out).To(ContainSubstring("Release apps/web on spoke staging-1"))
	g.Expect(lineWith(out, "7")).To(Equal([]string{"7", "web", "1.4.0", "v1.4.0", "deployed", "Current", "2026-05-01T11:30:00Z"}), out)
	g.Expect(lineWith(out, "6")).To(Equal([]string{"6", "web", "1.3.0", "v1.3.0", "superseded", "Failed", "2026-05-01T10:00:00Z"}), out)
	g.Expect(out).NotTo(ContainSubstring("RolloutComplete"))

	out, _, err = tugboat("history", "--spoke", "staging-1", "--release-namespace", "apps", "--release", "web", "-n", ns, "--events")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out).To(ContainSubstring("Revision 7 (web 1.4.0):"))
	g.Expect(lineWith(out, "ScalingReplicaSet")).To(Equal([]string{"2026-05-01T11:30:00Z", "Normal", "ScalingReplicaSet", "Deployment/web", "2", "Scaled", "up", "web-7d9f", "to", "3"}), out)
	g.Expect(lineWith(out, "RolloutComplete")).To(Equal([]string{"2026-05-01T11:30:00Z", "Normal", "RolloutComplete", "-", "-", "rollout", "complete"}), out)
	g.Expect(out).To(ContainSubstring("Revision 6 (web 1.3.0):\n  no events recorded"))

	out, _, err = tugboat("history", "staging-1/apps/web", "-n", ns, "-o", "json")
	g.Expect(err).NotTo(HaveOccurred())
	var v struct {
		Revisions []tugboatv1alpha1.Revision `json:"revisions"`
	}
	g.Expect(json.Unmarshal([]byte(out), &v)).To(Succeed(), out)
	g.Expect(v.Revisions).To(HaveLen(2))
	g.Expect(v.Revisions[0].Events).To(BeEmpty(), "events only with --events")

	_, _, err = tugboat("history", "staging-1/apps/api", "-n", ns)
	g.Expect(err).To(MatchError(ContainSubstring("no history of release apps/api on spoke staging-1")))
	_, _, err = tugboat("history", "staging-1/apps", "-n", ns)
	g.Expect(err).To(MatchError(`"staging-1/apps" is not <spoke>/<namespace>/<release>`))
}

func TestPromote_createsAManualPromotionAndResumes(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	reportedPipeline(t, ns)

	out, stderr, err := tugboat("promote", "web", "-n", ns, "--to", "production", "--version", "1.5.0")
	g.Expect(err).NotTo(HaveOccurred())
	name := pipeline.PromotionName("web", "production", "1.5.0")
	g.Expect(out).To(ContainSubstring("Created promotion " + name + ": 1.5.0 into production"))
	g.Expect(out).To(ContainSubstring("production requires approval by someone other than you: tugboat approve " + name + " -n " + ns))
	g.Expect(stderr).To(BeEmpty())
	pr := getPromotion(t, ns, name)
	g.Expect(pr.Spec.RequestedBy).To(Equal(tugboatv1alpha1.RequestedByUser))
	g.Expect(pr.Spec.Requester).To(Equal("tugboat-harness-admin"), "the user the API server authenticated (the client certificate's CN)")
	g.Expect(pr.Spec.From).To(Equal("staging"))

	out, _, err = tugboat("promote", "web", "-n", ns, "--to", "production", "--version", "1.5.0")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out).To(ContainSubstring("Promotion " + name + " of 1.5.0 into production already exists (Pending)"))

	_, stderr, err = tugboat("promote", "web", "-n", ns, "--to", "staging", "--version", "v1.5")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(stderr).To(ContainSubstring(`Warning: "v1.5" is not a semantic version`))

	_, _, err = tugboat("promote", "web", "-n", ns, "--to", "qa", "--version", "1.5.0")
	g.Expect(err).To(MatchError(ContainSubstring(`environment: pipeline ` + ns + `/web has no environment "qa"`)))
	_, _, err = tugboat("promote", "nope", "-n", ns, "--to", "production", "--version", "1.5.0")
	g.Expect(err).To(MatchError("pipeline " + ns + "/nope not found"))
	_, _, err = tugboat("promote", "web", "-n", ns, "--to", "production")
	g.Expect(err).To(MatchError(ContainSubstring("give --to and --version")))
	_, _, err = tugboat("promote", "web", "-n", ns, "--resume", "production", "--to", "production")
	g.Expect(err).To(MatchError("--resume cannot be combined with --to or --version"))

	before := time.Now().Add(-time.Second)
	out, _, err = tugboat("promote", "web", "-n", ns, "--resume", "production")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out).To(ContainSubstring("Resumed automatic promotion into production of pipeline " + ns + "/web"))
	p := &tugboatv1alpha1.Pipeline{}
	g.Expect(cluster.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web"}, p)).To(Succeed())
	stamp, err := time.Parse(time.RFC3339, p.Annotations[pipeline.ResumeAnnotationPrefix+"production"])
	g.Expect(err).NotTo(HaveOccurred(), "%v", p.Annotations)
	g.Expect(stamp).To(BeTemporally(">=", before.Truncate(time.Second)))

	out, _, err = tugboat("promote", "web", "-n", ns, "--resume", "dev")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out).To(ContainSubstring("Environment dev of pipeline " + ns + "/web was not held"))
}

func TestPromote_usesTheContextsNamespace(t *testing.T) {
	g := NewWithT(t)
	newPipeline(t, "default", "cli-default")
	t.Cleanup(func() {
		_ = cluster.Client.DeleteAllOf(context.Background(), &tugboatv1alpha1.Promotion{}, client.InNamespace("default"))
		_ = cluster.Client.Delete(context.Background(), &tugboatv1alpha1.Pipeline{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "cli-default"}})
	})
	out, _, err := tugboat("promote", "cli-default", "--to", "staging", "--version", "2.0.0")
	g.Expect(err).NotTo(HaveOccurred())
	name := pipeline.PromotionName("cli-default", "staging", "2.0.0")
	g.Expect(out).To(ContainSubstring("Created promotion " + name))
	g.Expect(out).NotTo(ContainSubstring("requires approval"))
	g.Expect(getPromotion(t, "default", name).Spec.Version).To(Equal("2.0.0"))
}

// TestApproveAndReject_recordTheAuthenticatedUser runs the CLI as people:
// kubeconfigs whose user impersonates alice, bob or carol (the kubeconfig's
// user entry stays "hub-admin", and $USER says mallory), with the policy
// tugboat-approvals installed. The API server's name for the user is what
// is recorded.
func TestApproveAndReject_recordTheAuthenticatedUser(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	g.Expect(identity.Install(ctx, cluster.Client)).To(Succeed())
	t.Cleanup(func() {
		if err := identity.Uninstall(ctx, cluster.Client); err != nil {
			t.Error(err)
		}
	})
	t.Setenv("USER", "mallory")
	ns := newNamespace(t)
	p := newPipeline(t, ns, "web")
	p.Spec.Environments[2].Gates.Approvals = ptr.To[int32](2)
	g.Expect(cluster.Client.Update(ctx, p)).To(Succeed())
	for user, envs := range map[string][]string{"alice": {"web/production"}, "bob": {"web/*"}, "carol": nil} {
		g.Expect(identity.Grant(ctx, cluster.Client, ns, user, envs...)).To(Succeed())
	}
	hubc, err := client.New(identity.HubConfig(cluster.RESTConfig), client.Options{Scheme: cluster.Client.Scheme()})
	g.Expect(err).NotTo(HaveOccurred())
	as := func(user string, args ...string) (string, error) {
		kc := kubeconfigVariant(t, cluster.KubeconfigPath, func(c *clientcmdapi.Config) { c.AuthInfos["hub-admin"].Impersonate = user })
		out, _, err := run(append(args, "-n", ns, "--kubeconfig", kc)...)
		return out, err
	}
	create := func(version string, phase tugboatv1alpha1.PromotionPhase) *tugboatv1alpha1.Promotion {
		pr, err := request.Create(ctx, hubc, p, "production", version, tugboatv1alpha1.RequestedByCI, "ci")
		g.Expect(err).NotTo(HaveOccurred())
		orig := pr.DeepCopy()
		pr.Status.Phase = phase
		g.Expect(hubc.Status().Patch(ctx, pr, client.MergeFrom(orig))).To(Succeed())
		return pr
	}

	waiting := create("1.4.0", tugboatv1alpha1.PromotionWaitingApproval)
	out, err := as("alice", "approve", waiting.Name, "-m", "canary is fine")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out).To(Equal("Promotion " + waiting.Name + " (1.4.0 into production) approved by alice.\n" +
		"It has 1 of 2 approvals (alice); waiting for 1 more approval from someone other than alice.\n"))
	votes := getPromotion(t, ns, waiting.Name).Status.Approvals
	g.Expect(votes).To(HaveLen(1))
	g.Expect(votes[0].User).To(Equal("alice"), "the API server's name, not the kubeconfig's nor $USER")
	g.Expect(votes[0].Source).To(Equal(tugboatv1alpha1.ApprovalSourceKubernetes))
	g.Expect(votes[0].Message).To(Equal("canary is fine"))

	_, err = as("alice", "reject", waiting.Name)
	g.Expect(err).To(MatchError("promotion " + waiting.Name + " was already approved by alice: a decision cannot be changed"))
	_, err = as("carol", "approve", waiting.Name)
	g.Expect(err).To(MatchError(ContainSubstring("user carol may not approve promotions into web/production")))
	out, err = as("bob", "approve", waiting.Name)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out).To(Equal("Promotion " + waiting.Name + " (1.4.0 into production) approved by bob.\n"))
	g.Expect(getPromotion(t, ns, waiting.Name).Status.Approvals).To(HaveLen(2))

	pending := create("1.5.0", "")
	out, err = as("bob", "reject", pending.Name, "--message", "freeze")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out).To(Equal("Promotion " + pending.Name + " (1.5.0 into production) rejected by bob.\n"))
	g.Expect(getPromotion(t, ns, pending.Name).Status.Approvals[0].Decision).To(Equal(tugboatv1alpha1.DecisionReject))

	// A manual promotion records its authenticated requester, who cannot
	// approve it.
	out, err = as("alice", "promote", "web", "--to", "production", "--version", "1.6.0")
	g.Expect(err).NotTo(HaveOccurred())
	own := pipeline.PromotionName("web", "production", "1.6.0")
	g.Expect(out).To(ContainSubstring("Created promotion " + own))
	g.Expect(getPromotion(t, ns, own).Spec.Requester).To(Equal("alice"))
	_, err = as("alice", "approve", own)
	g.Expect(err).To(MatchError(ContainSubstring("alice requested this promotion: another person must approve it")))
	g.Expect(getPromotion(t, ns, own).Status.Approvals).To(BeEmpty())

	running := create("1.7.0", tugboatv1alpha1.PromotionRunning)
	_, err = as("alice", "approve", running.Name)
	g.Expect(err).To(MatchError("promotion " + running.Name + " is Running, not waiting for approval"))
	g.Expect(getPromotion(t, ns, running.Name).Status.Approvals).To(BeEmpty())

	_, err = as("alice", "approve", "web-production-0.0.1")
	g.Expect(err).To(MatchError("promotion " + ns + "/web-production-0.0.1 not found"))
}
