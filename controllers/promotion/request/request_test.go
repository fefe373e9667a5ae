package request_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/controllers/pipeline"
	"tugboat.dev/tugboat/controllers/promotion/request"
)

func TestEnsure_createsAManualPromotionLikeTheController(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	p := newPipeline(t, ns)

	pr, created, err := request.Ensure(ctx, hubc, p, "staging", "1.4.0+build.7", tugboatv1alpha1.RequestedByUser, "alice")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(created).To(BeTrue())

	got := &tugboatv1alpha1.Promotion{}
	g.Expect(hub.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: pr.Name}, got)).To(Succeed())
	g.Expect(got.Name).To(Equal(pipeline.PromotionName("web", "staging", "1.4.0+build.7")))
	g.Expect(got.Labels).To(Equal(map[string]string{
		pipeline.LabelPipeline: "web", pipeline.LabelEnvironment: "staging", pipeline.LabelVersion: "1.4.0-build.7",
	}))
	g.Expect(got.OwnerReferences).To(ConsistOf(metav1.OwnerReference{
		APIVersion: "tugboat.dev/v1alpha1", Kind: "Pipeline", Name: "web", UID: p.UID,
		Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
	}))
	g.Expect(got.Spec).To(Equal(tugboatv1alpha1.PromotionSpec{
		Pipeline: "web", From: "dev", To: "staging", Version: "1.4.0+build.7",
		RequestedBy: tugboatv1alpha1.RequestedByUser, Requester: "alice",
	}))

	again, created, err := request.Ensure(ctx, hubc, p, "staging", "1.4.0+build.7", tugboatv1alpha1.RequestedByCI, "ci-job-9")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(created).To(BeFalse(), "asking again returns the unfinished Promotion")
	g.Expect(again.Name).To(Equal(pr.Name))
	g.Expect(again.Spec.Requester).To(Equal("alice"))

	first, err := request.Create(ctx, hubc, p, "dev", "2.0.0", tugboatv1alpha1.RequestedByCI, "")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(first.Spec.From).To(BeEmpty(), "the first environment has no source")
	g.Expect(promotions(t, ns)).To(HaveLen(2))
}

func TestEnsure_returnsTheControllersUnfinishedPromotion(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	p := newPipeline(t, ns)
	auto := &tugboatv1alpha1.Promotion{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: pipeline.PromotionName("web", "production", "1.4.0"),
			Labels: map[string]string{pipeline.LabelPipeline: "web", pipeline.LabelEnvironment: "production", pipeline.LabelVersion: "1.4.0"}},
		Spec: tugboatv1alpha1.PromotionSpec{Pipeline: "web", From: "staging", To: "production", Version: "1.4.0",
			RequestedBy: tugboatv1alpha1.RequestedByAuto},
	}
	g.Expect(hubc.Create(ctx, auto)).To(Succeed())
	setPhase(t, auto, tugboatv1alpha1.PromotionWaitingApproval)

	pr, created, err := request.Ensure(ctx, hubc, p, "production", "1.4.0", tugboatv1alpha1.RequestedByCI, "ci")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(created).To(BeFalse())
	g.Expect(pr.Name).To(Equal(auto.Name))
	g.Expect(pr.Spec.RequestedBy).To(Equal(tugboatv1alpha1.RequestedByAuto))
	g.Expect(promotions(t, ns)).To(HaveLen(1))
}

func TestEnsure_retriesAFinishedPromotionUnderANewName(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	p := newPipeline(t, ns)

	first, err := request.Create(ctx, hubc, p, "staging", "1.4.0", tugboatv1alpha1.RequestedByUser, "alice")
	g.Expect(err).NotTo(HaveOccurred())
	setPhase(t, first, tugboatv1alpha1.PromotionFailed)

	second, created, err := request.Ensure(ctx, hubc, p, "staging", "1.4.0", tugboatv1alpha1.RequestedByUser, "alice")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(created).To(BeTrue())
	g.Expect(second.Name).To(Equal(first.Name + "-r2"))

	same, created, err := request.Ensure(ctx, hubc, p, "staging", "1.4.0", tugboatv1alpha1.RequestedByUser, "alice")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(created).To(BeFalse())
	g.Expect(same.Name).To(Equal(second.Name))

	setPhase(t, second, tugboatv1alpha1.PromotionAborted)
	third, err := request.Create(ctx, hubc, p, "staging", "1.4.0", tugboatv1alpha1.RequestedByUser, "alice")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(third.Name).To(Equal(first.Name + "-r3"))
	g.Expect(promotions(t, ns)).To(HaveLen(3))
}

// A Promotion of another pipeline can hold the readable name (pipeline "a-b"
// into "c" and pipeline "a" into "b-c" of 1.0.0 are both a-b-c-1.0.0; here
// the holder is made by hand): the request then uses the controller's
// alternate name, and retries go on from the readable name.
func TestEnsure_usesTheAlternateNameWhenAnotherPipelineHoldsTheName(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	p := newPipeline(t, ns)
	primary := pipeline.PromotionName("web", "production", "1.4.0")
	foreign := &tugboatv1alpha1.Promotion{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: primary,
			Labels: map[string]string{pipeline.LabelPipeline: "other", pipeline.LabelEnvironment: "production", pipeline.LabelVersion: "1.4.0"}},
		Spec: tugboatv1alpha1.PromotionSpec{Pipeline: "other", From: "staging", To: "production", Version: "1.4.0",
			RequestedBy: tugboatv1alpha1.RequestedByAuto},
	}
	g.Expect(hubc.Create(ctx, foreign)).To(Succeed())

	pr, created, err := request.Ensure(ctx, hubc, p, "production", "1.4.0", tugboatv1alpha1.RequestedByUser, "alice")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(created).To(BeTrue())
	g.Expect(pr.Name).To(Equal(pipeline.AlternatePromotionName("web", "production", "1.4.0")))
	g.Expect(pr.Spec.Pipeline).To(Equal("web"))
	g.Expect(pr.Spec.To).To(Equal("production"))

	again, created, err := request.Ensure(ctx, hubc, p, "production", "1.4.0", tugboatv1alpha1.RequestedByCI, "ci")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(created).To(BeFalse(), "asking again returns the unfinished Promotion")
	g.Expect(again.Name).To(Equal(pr.Name))

	setPhase(t, pr, tugboatv1alpha1.PromotionFailed)
	retry, created, err := request.Ensure(ctx, hubc, p, "production", "1.4.0", tugboatv1alpha1.RequestedByUser, "alice")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(created).To(BeTrue())
	g.Expect(retry.Name).To(Equal(primary + "-r2"))

	// The foreign Promotion is untouched.
	got := &tugboatv1alpha1.Promotion{}
	g.Expect(hub.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: primary}, got)).To(Succeed())
	g.Expect(got.Spec.Pipeline).To(Equal("other"))
	g.Expect(promotions(t, ns)).To(HaveLen(3))
}

func TestEnsure_rejectsInvalidRequestsAndCreatesNothing(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	p := newPipeline(t, ns)
	for _, tc := range []struct {
		name, env, version, requester string
		by                            tugboatv1alpha1.Requester
		field, detail                 string
	}{
		{name: "unknown environment", env: "qa", version: "1.0.0", by: "user", field: "environment", detail: `no environment "qa" (it has dev, staging, production)`},
		{name: "no environment", env: "", version: "1.0.0", by: "user", field: "environment", detail: "required"},
		{name: "no version", env: "staging", version: "", by: "user", field: "version", detail: "required"},
		{name: "version too long", env: "staging", version: strings.Repeat("1", 65), by: "user", field: "version", detail: "at most 64"},
		{name: "version with a space", env: "staging", version: "1.0 0", by: "user", field: "version", detail: "not a chart version"},
		{name: "version starting with a dot", env: "staging", version: ".1", by: "user", field: "version", detail: "not a chart version"},
		{name: "requester too long", env: "staging", version: "1.0.0", by: "ci", requester: strings.Repeat("x", 257), field: "requester", detail: "at most 256"},
		{name: "requested by auto", env: "staging", version: "1.0.0", by: "auto", field: "requestedBy", detail: "must be user or ci"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			_, err := request.Create(ctx, hubc, p, tc.env, tc.version, tc.by, tc.requester)
			g.Expect(err).To(MatchError(request.ErrInvalid))
			var inv *request.InvalidError
			g.Expect(errors.As(err, &inv)).To(BeTrue())
			g.Expect(inv.Field).To(Equal(tc.field))
			g.Expect(inv.Detail).To(ContainSubstring(tc.detail))
			g.Expect(promotions(t, ns)).To(BeEmpty())
		})
	}
}

func TestResume_stampsTheEnvironmentsResumeAnnotation(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	p := newPipeline(t, ns)
	now := time.Date(2026, 5, 1, 12, 30, 0, 0, time.FixedZone("CEST", 2*3600))

	g.Expect(request.Resume(ctx, hub.Client, p, "production", now)).To(Succeed())
	got := &tugboatv1alpha1.Pipeline{}
	g.Expect(hub.Client.Get(ctx, client.ObjectKeyFromObject(p), got)).To(Succeed())
	g.Expect(got.Annotations).To(HaveKeyWithValue(pipeline.ResumeAnnotationPrefix+"production", "2026-05-01T10:30:00Z"))

	err := request.Resume(ctx, hub.Client, p, "qa", now)
	g.Expect(err).To(MatchError(request.ErrInvalid))
	gone := p.DeepCopy()
	gone.Name = "nope"
	g.Expect(request.Resume(ctx, hub.Client, gone, "production", now)).To(MatchError("pipeline " + ns + "/nope not found"))
}
