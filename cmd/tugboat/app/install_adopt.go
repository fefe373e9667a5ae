//go:build !agentonly

package app

import (
	"context"
	"fmt"
	"io"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Helm's ownership marks: an object carrying them for a release is adopted
// by that release's install or upgrade; one without them makes Helm refuse
// ("invalid ownership metadata").
const (
	helmManagedByLabel      = "app.kubernetes.io/managed-by"
	helmReleaseNameKey      = "meta.helm.sh/release-name"
	helmReleaseNamespaceKey = "meta.helm.sh/release-namespace"
)

// adoptCRDs marks the chart's CRDs that exist on the cluster without any
// Helm release (applied with kubectl, say) as the release's, so that the
// install adopts them instead of failing. A CRD another release owns is
// left alone: Helm then says which release holds it.
func adoptCRDs(ctx context.Context, out io.Writer, c *cluster, objs []*unstructured.Unstructured, release, namespace string) error {
	for _, o := range objs {
		if o.GetKind() != "CustomResourceDefinition" {
			continue
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := c.client.Get(ctx, client.ObjectKey{Name: o.GetName()}, crd); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return fmt.Errorf("reading CRD %s: %w", o.GetName(), err)
		}
		if crd.Annotations[helmReleaseNameKey] != "" {
			continue
		}
		patch := client.MergeFrom(crd.DeepCopy())
		if crd.Labels == nil {
			crd.Labels = map[string]string{}
		}
		if crd.Annotations == nil {
			crd.Annotations = map[string]string{}
		}
		crd.Labels[helmManagedByLabel] = "Helm"
		crd.Annotations[helmReleaseNameKey] = release
		crd.Annotations[helmReleaseNamespaceKey] = namespace
		if err := c.client.Patch(ctx, crd, patch); err != nil {
			return fmt.Errorf("adopting CRD %s, applied outside Helm, into release %s/%s: %w", o.GetName(), namespace, release, err)
		}
		fmt.Fprintf(out, "adopted CRD %s (applied outside Helm) into release %s/%s\n", o.GetName(), namespace, release)
	}
	return nil
}
