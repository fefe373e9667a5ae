//go:build !agentonly

package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"tugboat.dev/tugboat/cmd/tugboat/app/hub"
)

// installFieldManager owns, in server-side apply, the fields install sets.
const installFieldManager = "tugboat-install"

// cluster is one cluster install writes to.
type cluster struct {
	client client.Client
	// where names the cluster in messages: `spoke cluster (context
	// "staging-1", https://...)`.
	where string
}

// connectCluster loads the kubeconfig and checks that the API server
// answers, so an unreachable cluster is reported before anything is changed.
func connectCluster(ctx context.Context, role string, kf kubeFlags) (*cluster, error) {
	cfg, err := kf.restConfig()
	if err != nil {
		return nil, fmt.Errorf("loading the %s's kubeconfig: %w", role, err)
	}
	where := role + " (" + cfg.Host + ")"
	if kf.context != "" {
		where = fmt.Sprintf("%s (context %q, %s)", role, kf.context, cfg.Host)
	}
	check := rest.CopyConfig(cfg)
	check.Timeout = 15 * time.Second
	dc, err := discovery.NewDiscoveryClientForConfig(check)
	if err != nil {
		return nil, fmt.Errorf("connecting to the %s: %w", where, err)
	}
	if _, err := dc.ServerVersion(); err != nil {
		return nil, fmt.Errorf("cannot reach the %s: %w", where, err)
	}
	s := hub.Scheme()
	if err := apiextensionsv1.AddToScheme(s); err != nil {
		return nil, err
	}
	c, err := client.New(cfg, client.Options{Scheme: s})
	if err != nil {
		return nil, fmt.Errorf("connecting to the %s: %w", where, err)
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	return &cluster{client: c, where: where}, nil
}

// explain wraps an API error with what was being done where ("applying
// Deployment tugboat-system/tugboat-hub to" + " the hub cluster (...)"),
// and what the usual causes are.
func (c *cluster) explain(doing string, err error) error {
	switch {
	case apierrors.IsForbidden(err):
		return fmt.Errorf("%s the %s: forbidden, your credentials there may not do this: %w", doing, c.where, err)
	case apierrors.IsUnauthorized(err):
		return fmt.Errorf("%s the %s: the cluster rejected the kubeconfig's credentials: %w", doing, c.where, err)
	case apimeta.IsNoMatchError(err):
		hint := "is its CRD installed?"
		if strings.HasSuffix(err.Error(), "cert-manager.io") || strings.Contains(err.Error(), "cert-manager.io/") {
			hint = "is cert-manager installed there? --cert-manager needs it"
		}
		return fmt.Errorf("%s the %s: the cluster does not serve this kind (%s): %w", doing, c.where, hint, err)
	}
	return fmt.Errorf("%s the %s: %w", doing, c.where, err)
}

// describe names an object in messages: "Deployment tugboat-system/tugboat-hub".
func describe(u *unstructured.Unstructured) string {
	if u.GetNamespace() != "" {
		return u.GetKind() + " " + u.GetNamespace() + "/" + u.GetName()
	}
	return u.GetKind() + " " + u.GetName()
}

// checkKinds fails, before anything is changed, when the cluster does not
// serve a kind of objs whose CRD is not among them (cert-manager's, say).
func (c *cluster) checkKinds(objs []*unstructured.Unstructured) error {
	defined := map[schema.GroupKind]bool{}
	for _, o := range objs {
		if o.GetKind() == "CustomResourceDefinition" {
			group, _, _ := unstructured.NestedString(o.Object, "spec", "group")
			kind, _, _ := unstructured.NestedString(o.Object, "spec", "names", "kind")
			defined[schema.GroupKind{Group: group, Kind: kind}] = true
		}
	}
	for _, o := range objs {
		gvk := o.GroupVersionKind()
		if defined[gvk.GroupKind()] {
			continue
		}
		if _, err := c.client.RESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version); err != nil {
			return c.explain("checking "+gvk.GroupVersion().String()+" "+gvk.Kind+" (for "+describe(o)+") on", err)
		}
	}
	return nil
}

// apply applies one object with server-side apply, forcing conflicts (the
// install's fields win), and prints whether it was created, configured or
// unchanged, and note.
func (c *cluster) apply(ctx context.Context, out io.Writer, u *unstructured.Unstructured, note string) error {
	before := &metav1.PartialObjectMetadata{}
	before.SetGroupVersionKind(u.GroupVersionKind())
	existed, known := false, true
	switch err := c.client.Get(ctx, client.ObjectKeyFromObject(u), before); {
	case err == nil:
		existed = true
	case apierrors.IsNotFound(err):
	case apierrors.IsForbidden(err):
		known = false // perhaps only apply is allowed: try it
	default:
		return c.explain("reading "+describe(u)+" on", err)
	}
	// A copy: the API server's answer is written into it (for the key
	// Secret, the key), and u stays as built.
	obj := u.DeepCopy()
	if err := c.client.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj), client.FieldOwner(installFieldManager), client.ForceOwnership); err != nil {
		return c.explain("applying "+describe(u)+" to", err)
	}
	result := "created"
	switch {
	case !known:
		result = "applied"
	case existed && obj.GetResourceVersion() == before.ResourceVersion:
		result = "unchanged"
	case existed:
		result = "configured"
	}
	fmt.Fprintf(out, "  %s %s%s\n", describe(u), result, note)
	return nil
}

// errTimedOut is what poll returns when its time is up.
var errTimedOut = errors.New("timed out")

// poll calls cond every interval until it reports done or an error, or
// until timeout has passed (errTimedOut). cond's requests run under ctx,
// not under the timeout, so the last one is not cut short by it.
func poll(ctx context.Context, interval, timeout time.Duration, cond func(context.Context) (bool, error)) error {
	deadline := time.Now().Add(timeout)
	return wait.PollUntilContextCancel(ctx, interval, true, func(ctx context.Context) (bool, error) {
		done, err := cond(ctx)
		if done || err != nil {
			return done, err
		}
		if time.Now().After(deadline) {
			return false, errTimedOut
		}
		return false, nil
	})
}

// waitEstablished waits until every CRD of names is Established.
func (c *cluster) waitEstablished(ctx context.Context, names []string, timeout time.Duration) error {
	for _, name := range names {
		var last string
		err := poll(ctx, 100*time.Millisecond, timeout, func(ctx context.Context) (bool, error) {
			crd := &apiextensionsv1.CustomResourceDefinition{}
			if err := c.client.Get(ctx, client.ObjectKey{Name: name}, crd); err != nil {
				return false, c.explain("reading CustomResourceDefinition "+name+" on", err)
			}
			for _, cond := range crd.Status.Conditions {
				switch {
				case cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue:
					return true, nil
				case cond.Type == apiextensionsv1.NamesAccepted && cond.Status == apiextensionsv1.ConditionFalse:
					return false, fmt.Errorf("CustomResourceDefinition %s on the %s: its names are not accepted: %s", name, c.where, cond.Message)
				case cond.Type == apiextensionsv1.Established:
					last = cond.Message
				}
			}
			return false, nil
		})
		if errors.Is(err, errTimedOut) {
			return fmt.Errorf("CustomResourceDefinition %s on the %s is not Established after %s: %s", name, c.where, timeout, last)
		}
		if err != nil {
			return err
		}
	}
	return nil
}
