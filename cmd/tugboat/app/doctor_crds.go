//go:build !agentonly

package app

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// checkCRDs checks that the hub serves every kind of group/version. It
// reports which kinds are served, and false when the hub cannot be reached
// at all (no other check can run).
func (d *doctor) checkCRDs(ctx context.Context) (map[string]bool, bool) {
	served := map[string]bool{}
	groups, err := d.disc.ServerGroups()
	if err != nil {
		d.unreachable(err)
		return served, false
	}
	var group *metav1.APIGroup
	for i := range groups.Groups {
		if groups.Groups[i].Name == d.group {
			group = &groups.Groups[i]
		}
	}
	gv := d.group + "/" + d.version
	if group != nil {
		hasVersion := false
		for _, v := range group.Versions {
			hasVersion = hasVersion || v.Version == d.version
		}
		if hasVersion {
			resources, err := d.disc.ServerResourcesForGroupVersion(gv)
			if err != nil && !apierrors.IsNotFound(err) {
				d.add(checkCRDs, codeCRDsDiscoveryFailed, severityError, "", fmt.Sprintf("cannot discover the resources of %s: %v", gv, err), "retry; if it persists, check the hub's API server")
				return served, true
			}
			if resources != nil {
				for _, r := range resources.APIResources {
					served[r.Name] = true
				}
			}
		}
		if pv := group.PreferredVersion.Version; pv != "" && pv != d.version {
			d.add(checkCRDs, codeCRDsNewerVersion, severityWarning, "", fmt.Sprintf("the hub prefers %s/%s; this CLI speaks %s", d.group, pv, gv),
				"use the tugboat CLI of the hub's release")
		}
	}
	var kinds []string
	for _, k := range d.kinds {
		if served[k.plural] {
			kinds = append(kinds, k.kind)
			continue
		}
		d.explainCRD(ctx, k)
	}
	if len(kinds) == len(d.kinds) {
		d.add(checkCRDs, codeCRDsOK, severityOK, "", fmt.Sprintf("%s are installed, established and serve %s", joinAnd(kinds), gv), "")
	}
	return served, true
}

// unreachable reports a hub that did not answer discovery.
func (d *doctor) unreachable(err error) {
	host := d.server
	if u, perr := url.Parse(host); perr == nil && u.Host != "" {
		host = u.Host
	}
	switch {
	case apierrors.IsUnauthorized(err):
		d.add(checkConnection, codeConnectionUnauthorized, severityError, "", fmt.Sprintf("the hub's API server at %s rejected your credentials (401)", host),
			"refresh the kubeconfig's credentials, or pick another --context")
	case apierrors.IsForbidden(err):
		d.add(checkConnection, codeConnectionForbidden, severityError, "", fmt.Sprintf("the hub's API server at %s forbids discovery: %v", host, err),
			"you need the system:discovery ClusterRole (every authenticated user has it by default)")
	default:
		d.add(checkConnection, codeConnectionUnreachable, severityError, "", fmt.Sprintf("cannot reach the hub's API server at %s: %v", host, err),
			"check --kubeconfig and --context, and that the API server is up and reachable from here")
	}
}

// explainCRD says why kind is not served, from its CRD when it can read it.
func (d *doctor) explainCRD(ctx context.Context, k tugboatKind) {
	name := k.plural + "." + d.group
	gv := d.group + "/" + d.version
	install := "install the CRDs: tugboat install hub (or helm upgrade --install tugboat-hub config/charts/tugboat-hub -n tugboat-system --create-namespace)"
	crd := &apiextensionsv1.CustomResourceDefinition{}
	err := d.crds.Get(ctx, types.NamespacedName{Name: name}, crd)
	switch {
	case apierrors.IsNotFound(err):
		d.add(checkCRDs, codeCRDMissing, severityError, name, fmt.Sprintf("%s is not installed: no CustomResourceDefinition %s", k.kind, name), install)
		return
	case apierrors.IsForbidden(err):
		d.add(checkCRDs, codeCRDUnreadable, severityError, name, fmt.Sprintf("%s is not served as %s, and you may not read its CRD (get on customresourcedefinitions.apiextensions.k8s.io) to tell why", k.kind, gv),
			install+", or ask a cluster administrator to check it")
		return
	case err != nil:
		d.add(checkCRDs, codeCRDReadFailed, severityError, name, fmt.Sprintf("%s is not served as %s; reading its CRD failed: %v", k.kind, gv, err), install)
		return
	}
	established := apiextensionsv1.CustomResourceDefinitionCondition{Status: apiextensionsv1.ConditionUnknown}
	why := ""
	for _, c := range crd.Status.Conditions {
		switch c.Type {
		case apiextensionsv1.Established:
			established = c
		case apiextensionsv1.NamesAccepted:
			if c.Status == apiextensionsv1.ConditionFalse {
				why = fmt.Sprintf(" (%s: %s)", c.Reason, c.Message)
			}
		}
	}
	if established.Status != apiextensionsv1.ConditionTrue {
		if why == "" && established.Message != "" {
			why = fmt.Sprintf(" (%s: %s)", established.Reason, established.Message)
		}
		d.add(checkCRDs, codeCRDNotEstablished, severityError, name, fmt.Sprintf("CRD %s is not established%s", name, why),
			"kubectl describe crd "+name+"; a name that another CRD already uses is the usual cause")
		return
	}
	var versions []string
	servesIt := false
	for _, v := range crd.Spec.Versions {
		if v.Served {
			versions = append(versions, v.Name)
			servesIt = servesIt || v.Name == d.version
		}
	}
	if !servesIt {
		d.add(checkCRDs, codeCRDVersionNotServed, severityError, name, fmt.Sprintf("CRD %s does not serve %s (it serves %s); this CLI speaks %s", name, d.version, strings.Join(versions, ", "), gv),
			"use the tugboat CLI of the hub's release, or install the CRDs of this CLI's release")
		return
	}
	d.add(checkCRDs, codeCRDNotDiscoveredYet, severityWarning, name, fmt.Sprintf("CRD %s is established but the API server does not list %s yet", name, gv),
		"retry in a few seconds")
}
