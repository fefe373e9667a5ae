//go:build tools

// This file pins dependencies that the agent and hub packages are being built
// on, so that concurrent work agrees on one version set. Remove an import once
// real code uses it.
package main

import (
	_ "github.com/fluxcd/cli-utils/pkg/kstatus/status"
	_ "github.com/fluxcd/helm-controller/api/v2"
	_ "github.com/open-policy-agent/cert-controller/pkg/rotator"
	_ "github.com/prometheus/client_golang/prometheus"
	_ "helm.sh/helm/v3/pkg/action"
)
