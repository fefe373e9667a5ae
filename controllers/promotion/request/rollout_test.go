package request_test

import (
	"context"
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/controllers/promotion/request"
)

// TestSteerRollout_refusesBadInputBeforeWriting: a request SteerRollout
// cannot make is an *InvalidError naming the field, and nothing is read
// or written (the Promotion named does not even exist).
func TestSteerRollout_refusesBadInputBeforeWriting(t *testing.T) {
	ns := newNamespace(t)
	pause := tugboatv1alpha1.RolloutActionPause
	for _, tc := range []struct {
		name string
		req  tugboatv1alpha1.RolloutRequest
		want string
	}{
		{"no action", tugboatv1alpha1.RolloutRequest{User: "alice"}, `action: must be Pause or Resume, got ""`},
		{"another action", tugboatv1alpha1.RolloutRequest{Action: "Abort", User: "alice"}, `action: must be Pause or Resume, got "Abort"`},
		{"no user", tugboatv1alpha1.RolloutRequest{Action: pause}, "user: required: the authenticated identity"},
		{"a user too long", tugboatv1alpha1.RolloutRequest{Action: pause, User: strings.Repeat("u", request.MaxIdentityLength+1)},
			"user: at most 256 characters, got 257"},
		{"a message too long", tugboatv1alpha1.RolloutRequest{Action: pause, User: "alice", Message: strings.Repeat("m", request.MaxMessageLength+1)},
			"message: at most 1024 characters, got 1025"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			_, err := request.SteerRollout(context.Background(), hubc, ns, "web-production-1.4.0", tc.req)
			g.Expect(err).To(MatchError(tc.want))
			g.Expect(err).To(MatchError(request.ErrInvalid))
		})
	}
	_, err := request.SteerRollout(context.Background(), hubc, ns, "web-production-1.4.0", tugboatv1alpha1.RolloutRequest{Action: pause, User: "alice"})
	NewWithT(t).Expect(err).To(MatchError(request.ErrNotFound), "valid input reaches the API server")
}
