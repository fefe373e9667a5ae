package request

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
)

// patchStatus reads the Promotion namespace/name and lets change check it
// and set what it asks for in its status, then patches the status with the
// resourceVersion read; on a conflict it reads and checks again
// (retry.DefaultRetry). change returns false when there is nothing to write
// (the same request again): the Promotion comes back as read.
//
// A Promotion gone before the write is a *NotFoundError; a write the API
// server forbids is refused, a copy of refused with the API's message as
// its Detail. This package's errors come back as they are; any other is
// wrapped as "<doing> promotion <namespace>/<name>: <err>".
func patchStatus(ctx context.Context, c client.Client, namespace, name, doing string, refused NotAllowedError,
	change func(pr *tugboatv1alpha1.Promotion) (bool, error),
) (*tugboatv1alpha1.Promotion, error) {
	var out *tugboatv1alpha1.Promotion
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		pr, err := GetPromotion(ctx, c, namespace, name)
		if err != nil {
			return err
		}
		orig := pr.DeepCopy()
		write, err := change(pr)
		if err != nil {
			return err
		}
		if !write {
			out = orig
			return nil
		}
		if err := c.Status().Patch(ctx, pr, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
			switch {
			case apierrors.IsNotFound(err):
				return &NotFoundError{Kind: "promotion", Namespace: namespace, Name: name}
			case apierrors.IsForbidden(err):
				refused.Detail = err.Error()
				return &refused
			}
			return err
		}
		out = pr
		return nil
	})
	if err != nil {
		if errors.Is(err, ErrInvalid) || errors.Is(err, ErrNotFound) || errors.Is(err, ErrNotWaiting) || errors.Is(err, ErrNotAllowed) {
			return nil, err
		}
		return nil, fmt.Errorf("%s promotion %s/%s: %w", doing, namespace, name, err)
	}
	return out, nil
}
