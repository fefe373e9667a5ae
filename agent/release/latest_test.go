package release

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"tugboat.dev/tugboat/api/wire"
)

func TestLatest(t *testing.T) {
	g := NewWithT(t)
	rel := func(ns, name string, rev int, st wire.ReleaseStatus, storageNS string) *Release {
		return &Release{Namespace: ns, Name: name, Revision: rev, Status: st, StorageNamespace: storageNS,
			StorageName: StorageName(name, rev), LastDeployed: time.Unix(int64(rev), 0)}
	}
	web5 := rel("apps", "web", 5, wire.StatusSuperseded, "apps")
	web6 := rel("apps", "web", 6, wire.StatusDeployed, "apps")
	web7 := rel("apps", "web", 7, wire.StatusPendingUpgrade, "apps")
	otherNS := rel("staging", "web", 2, wire.StatusDeployed, "staging")
	api1 := rel("apps", "api", 1, wire.StatusFailed, "apps")

	// The same revision twice: deployed wins over superseded, whatever the order.
	dupSuperseded := rel("apps", "db", 3, wire.StatusSuperseded, "apps")
	dupDeployed := rel("apps", "db", 3, wire.StatusDeployed, "flux-storage")

	want := map[Key]*Release{
		{"apps", "web"}:    web7,
		{"staging", "web"}: otherNS,
		{"apps", "api"}:    api1,
		{"apps", "db"}:     dupDeployed,
	}
	g.Expect(Latest([]*Release{web5, web6, web7, otherNS, api1, dupSuperseded, dupDeployed})).To(Equal(want))
	g.Expect(Latest([]*Release{dupDeployed, nil, api1, web7, dupSuperseded, otherNS, web6, web5})).To(Equal(want))
	g.Expect(Latest(nil)).To(BeEmpty())
}
