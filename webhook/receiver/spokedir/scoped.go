package spokedir

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/client"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/webhook/receiver"
)

// Scoped returns c, except that a list of Spokes made with a context that
// carries the Spoke a request was authenticated as (receiver.WithSpoke)
// sees that Spoke's namespace only.
//
// The recorder and the action store find a request's Spoke by its name
// alone, and treat a name used in two namespaces as unknown. Given a Scoped
// client, they see only the Spoke the receiver authenticated (by namespace,
// name and key), so a Spoke of the same name in another namespace (a
// squatter) can neither block the real one nor be mistaken for it. Reads
// made for anything else, or without an authenticated Spoke, are unchanged.
func Scoped(c client.Client) client.Client { return scoped{Client: c} }

type scoped struct {
	client.Client
}

func (s scoped) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if _, ok := list.(*tugboatv1alpha1.SpokeList); ok {
		if ref, ok := receiver.SpokeFrom(ctx); ok && ref.Namespace != "" {
			opts = append(opts, client.InNamespace(ref.Namespace))
		}
	}
	return s.Client.List(ctx, list, opts...)
}
