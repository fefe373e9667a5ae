// Package spokeaccess gives the hub a client for a spoke's API server, for the
// promotion strategies that act on the spoke directly (kubernetes).
//
// The kubeconfig comes from the Spoke: spec.kubeConfigSecretRef (a Secret in
// the Spoke's namespace, key "value" unless set) or spec.clusterRef (the
// Cluster API convention: Secret <cluster>-kubeconfig, key "value", in the
// Spoke's namespace: a clusterRef into another namespace, another tenant's,
// is refused). A Spoke with neither
// has no hub access at all; that is a configuration error for strategies that
// need it, never something to retry.
//
// Kubeconfigs must be self-contained: client certificates, keys, CA bundles
// and tokens embedded as data. Exec plugins, auth providers and file paths
// are refused, because they would run commands or read files of the hub
// process on behalf of whoever can write the Secret.
//
// It never logs or returns kubeconfig contents. It is not a watch or a
// cache of spoke objects: Cache only reuses clients while the Secret is
// unchanged.
package spokeaccess
