//go:build !agentonly

package app

import (
	"context"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Finding is a `tugboat doctor` finding, for tests.
type Finding = finding

// DoctorCRDFindings runs doctor's CRD check against the cluster cfg points
// at, expecting group/version to serve kinds (plural → Kind).
func DoctorCRDFindings(ctx context.Context, cfg *rest.Config, group, version string, kinds [][2]string) ([]Finding, error) {
	disc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, err
	}
	s := runtime.NewScheme()
	_ = apiextensionsv1.AddToScheme(s)
	crds, err := client.New(cfg, client.Options{Scheme: s})
	if err != nil {
		return nil, err
	}
	d := &doctor{opts: defaultDoctorOptions(), crds: crds, disc: disc, group: group, version: version, server: cfg.Host, now: time.Now}
	for _, k := range kinds {
		d.kinds = append(d.kinds, tugboatKind{plural: k[0], kind: k[1]})
	}
	d.checkCRDs(ctx)
	return d.findings, nil
}
