package v1alpha1_test

import (
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/runtime"

	tugboatv1 "tugboat.dev/tugboat/api/v1alpha1"
)

func TestAddToScheme_registersEveryKind(t *testing.T) {
	g := NewWithT(t)
	s := runtime.NewScheme()
	g.Expect(tugboatv1.AddToScheme(s)).To(Succeed())
	for _, kind := range []string{"Spoke", "SpokeList", "ReleaseHistory", "ReleaseHistoryList", "Pipeline", "PipelineList", "Promotion", "PromotionList"} {
		g.Expect(s.Recognizes(tugboatv1.GroupVersion.WithKind(kind))).To(BeTrue(), kind)
	}
}

func TestReleaseHistoryName(t *testing.T) {
	g := NewWithT(t)
	g.Expect(tugboatv1.ReleaseHistoryName("staging-1", "apps", "web.api")).To(Equal("staging-1.apps.web.api"))
}

func TestPromotionPhase_Terminal(t *testing.T) {
	g := NewWithT(t)
	for _, p := range []tugboatv1.PromotionPhase{tugboatv1.PromotionSucceeded, tugboatv1.PromotionFailed, tugboatv1.PromotionAborted} {
		g.Expect(p.Terminal()).To(BeTrue(), string(p))
	}
	for _, p := range []tugboatv1.PromotionPhase{tugboatv1.PromotionPending, tugboatv1.PromotionWaitingApproval, tugboatv1.PromotionRunning, tugboatv1.PromotionVerifying} {
		g.Expect(p.Terminal()).To(BeFalse(), string(p))
	}
}
