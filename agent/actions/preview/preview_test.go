package preview

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	"tugboat.dev/tugboat/api/wire"
)

const liveManifest = `---
# Source: app/templates/deployment.yaml
apiVersion: apps/v1
kind: Deployment
metadata:
  name: app
spec:
  replicas: 2
  template:
    spec:
      containers:
        - name: app
          image: registry.example/app:1.0.0
---
# Source: app/templates/legacy.yaml
apiVersion: v1
kind: ConfigMap
metadata:
  name: app-legacy
data:
  old: "yes"
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: app-config
data:
  dsn: postgres://app:hunter2-live-pw@db/app
  level: info
---
apiVersion: v1
kind: Secret
metadata:
  name: app-db
stringData:
  password: hunter2-live-pw
data:
  token: ` + "dG9rLWxpdmUtOTg3Ng==" + `
`

const newManifest = `---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: app
spec:
  replicas: 2
  template:
    spec:
      containers:
        - name: app
          image: registry.example/app:1.1.0
      tolerations:
        - key: dedicated
          operator: Exists
---
apiVersion: v1
kind: Service
metadata:
  name: app
spec:
  ports:
    - port: 80
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: app-config
data:
  dsn: postgres://app:hunter2-live-pw@db/app
  level: debug
---
apiVersion: v1
kind: Secret
metadata:
  name: app-db
stringData:
  password: hunter2-live-pw
  user: app-user-1.1.0
data:
  token: ` + "dG9rLWxpdmUtOTg3Ng==" + `
`

func values(level, key string) map[string]any {
	return map[string]any{
		"replicaCount":   2,
		"logLevel":       level,
		"metricsAuthKey": key,
		"db":             map[string]any{"host": "db", "password": "hunter2-live-pw"},
		"app":            map[string]any{"token": "tok-live-9876"},
		// Not under a sensitive key, but it feeds the Secret.
		"userName": "app-user-1.1.0",
	}
}

// The change between two renders: objects added, removed and changed,
// sorted by kind, namespace and name, with a diff of each changed manifest
// and of the values; the Secret only as changed.
func TestCompute_listsAddedRemovedAndChangedObjects(t *testing.T) {
	g := NewWithT(t)
	res, err := Compute(Input{Namespace: "apps", LiveManifest: liveManifest, NewManifest: newManifest,
		LiveValues: values("info", "key-one-1"), NewValues: values("debug", "key-two-2")})
	g.Expect(err).NotTo(HaveOccurred())
	type row struct{ Kind, Name, Change string }
	var rows []row
	for _, o := range res.Objects {
		g.Expect(o.Namespace).To(Equal("apps"), "objects without a namespace are in the release's")
		rows = append(rows, row{o.Kind, o.Name, o.Change})
	}
	g.Expect(rows).To(Equal([]row{
		{"ConfigMap", "app-config", wire.ChangeChanged},
		{"ConfigMap", "app-legacy", wire.ChangeRemoved},
		{"Deployment", "app", wire.ChangeChanged},
		{"Secret", "app-db", wire.ChangeChanged},
		{"Service", "app", wire.ChangeAdded},
	}))
	g.Expect(res.ObjectsChanged).To(Equal(5))
	g.Expect(res.Objects[2].Diff).To(ContainSubstring("-      - image: registry.example/app:1.0.0"))
	g.Expect(res.Objects[2].Diff).To(ContainSubstring("+      - image: registry.example/app:1.1.0"))
	g.Expect(res.Objects[2].Diff).To(ContainSubstring("+      - key: dedicated"))
	g.Expect(res.Objects[1].Diff).To(ContainSubstring("-  old: \"yes\""))
	g.Expect(res.Objects[4].Diff).To(ContainSubstring("+  - port: 80"))
	g.Expect(res.Objects[3].Secret).To(BeTrue())
	g.Expect(res.Objects[3].Diff).To(BeEmpty())
	g.Expect(res.ValuesDiff).To(ContainSubstring("-logLevel: info"))
	g.Expect(res.ValuesDiff).To(ContainSubstring("+logLevel: debug"))
	g.Expect(res.ValuesDiff).To(ContainSubstring("+metricsAuthKey: '" + RedactedChanged + "'"))
	g.Expect(res.LinesChanged).To(BeNumerically(">", 8))
	g.Expect(res.Digest).To(HaveLen(64))
	g.Expect(res.Truncated).To(BeFalse())
}

// Secret data, values under sensitive keys and values that feed a Secret
// never appear in the answer, in clear or in base64, wherever they occur
// (a ConfigMap embedding the password included).
func TestCompute_neverSendsSecretsOrSensitiveValues(t *testing.T) {
	g := NewWithT(t)
	res, err := Compute(Input{Namespace: "apps", LiveManifest: liveManifest, NewManifest: newManifest,
		LiveValues: values("info", "key-one-1"), NewValues: values("debug", "key-two-2")})
	g.Expect(err).NotTo(HaveOccurred())
	b, err := json.Marshal(res)
	g.Expect(err).NotTo(HaveOccurred())
	out := string(b)
	for _, s := range []string{"hunter2-live-pw", "tok-live-9876", "app-user-1.1.0", "key-one-1", "key-two-2"} {
		g.Expect(out).NotTo(ContainSubstring(s))
		g.Expect(out).NotTo(ContainSubstring(base64.StdEncoding.EncodeToString([]byte(s))))
	}
	g.Expect(res.ValuesDiff).To(ContainSubstring("password: " + Redacted))
	g.Expect(res.ValuesDiff).NotTo(ContainSubstring("userName: app"))
	// The ConfigMap still shows what changed around the redacted value.
	g.Expect(res.Objects[0].Diff).To(ContainSubstring("dsn: postgres://app:" + Redacted + "@db/app"))
}

// A change of nothing but a redacted value still shows as a change, with a
// note instead of the value.
func TestCompute_onlyASensitiveValueChanged(t *testing.T) {
	g := NewWithT(t)
	cm := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\ndata:\n  url: https://u:%s@h\n"
	res, err := Compute(Input{Namespace: "apps",
		LiveManifest: fmt.Sprintf(cm, "old-password"), NewManifest: fmt.Sprintf(cm, "new-password"),
		LiveValues: map[string]any{"password": "old-password"}, NewValues: map[string]any{"password": "new-password"}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.Objects).To(HaveLen(1))
	g.Expect(res.Objects[0].Diff).To(ContainSubstring("only redacted"))
	g.Expect(res.ValuesDiff).To(ContainSubstring("-password: " + Redacted))
	g.Expect(res.ValuesDiff).To(ContainSubstring("+password: '" + RedactedChanged + "'"))
	b, _ := json.Marshal(res)
	g.Expect(string(b)).NotTo(ContainSubstring("old-password"))
	g.Expect(string(b)).NotTo(ContainSubstring("new-password"))
}

// The same renders give the same answer and digest, whatever the order of
// the documents; a different change gives another digest.
func TestCompute_isDeterministic(t *testing.T) {
	g := NewWithT(t)
	in := Input{Namespace: "apps", LiveManifest: liveManifest, NewManifest: newManifest, LiveValues: values("info", "k1k1"), NewValues: values("debug", "k1k1")}
	a, err := Compute(in)
	g.Expect(err).NotTo(HaveOccurred())
	docs := strings.Split(newManifest, "---\n")
	for i, j := 0, len(docs)-1; i < j; i, j = i+1, j-1 {
		docs[i], docs[j] = docs[j], docs[i]
	}
	in.NewManifest = strings.Join(docs, "\n---\n")
	b, err := Compute(in)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(b).To(Equal(a))
	in.NewValues = values("warn", "k1k1")
	c, err := Compute(in)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(c.Digest).NotTo(Equal(a.Digest))

	same, err := Compute(Input{Namespace: "apps", LiveManifest: liveManifest, NewManifest: liveManifest})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(same.Objects).To(BeEmpty())
	g.Expect(same.LinesChanged).To(BeZero())
}

// Bounds: a diff over 16 KiB is cut on a line, the diffs stop at 256 KiB
// in all, at most MaxPreviewObjects objects are listed, and the answer says
// what it cut; the counts and digest are of the whole change.
func TestCompute_boundsTheAnswer(t *testing.T) {
	g := NewWithT(t)
	var live, next strings.Builder
	const n = wire.MaxPreviewObjects + 20
	for i := range n {
		fmt.Fprintf(&live, "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm-%03d\ndata:\n", i)
		fmt.Fprintf(&next, "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm-%03d\ndata:\n", i)
		lines := 20
		if i == 0 {
			lines = 2000 // about 60 KiB of diff
		}
		for j := range lines {
			fmt.Fprintf(&live, "  k%04d: old value %d\n", j, j)
			fmt.Fprintf(&next, "  k%04d: new value %d\n", j, j)
		}
	}
	res, err := Compute(Input{Namespace: "apps", LiveManifest: live.String(), NewManifest: next.String()})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.ObjectsChanged).To(Equal(n))
	g.Expect(res.LinesChanged).To(Equal(2*2000 + 2*20*(n-1)))
	g.Expect(res.Objects).To(HaveLen(wire.MaxPreviewObjects))
	g.Expect(res.Truncated).To(BeTrue())
	g.Expect(res.Objects[0].Truncated).To(BeTrue())
	g.Expect(len(res.Objects[0].Diff)).To(BeNumerically("<=", wire.MaxPreviewObjectDiff))
	g.Expect(res.Objects[0].Diff).To(HaveSuffix(" more bytes\n"))
	total, dropped := len(res.ValuesDiff), 0
	for _, o := range res.Objects {
		total += len(o.Diff)
		if o.Diff == "" {
			g.Expect(o.Truncated).To(BeTrue())
			dropped++
		}
	}
	g.Expect(total).To(BeNumerically("<=", wire.MaxPreviewTotal))
	g.Expect(dropped).To(BeNumerically(">", 0))
	g.Expect(res.Note).To(ContainSubstring("20 objects not listed"))
	g.Expect(res.Note).To(ContainSubstring("1 diffs cut at 16 KiB"))
	g.Expect(res.Note).To(ContainSubstring(fmt.Sprintf("%d diffs left out", dropped)))
	b, err := json.Marshal(res)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(len(b)).To(BeNumerically("<", 512<<10), "the answer fits the receiver's body limit")
}

// Keys like a toleration's "key" are not sensitive; apiKey, access_key
// and the like are.
func TestSensitiveKey(t *testing.T) {
	g := NewWithT(t)
	for _, k := range []string{"password", "dbPassword", "PASSWD", "clientSecret", "token", "apiKey", "api_key", "accessKey", "secret-key", "privateKeyPem", "oauth", "credentials"} {
		g.Expect(SensitiveKey.MatchString(k)).To(BeTrue(), k)
	}
	for _, k := range []string{"key", "keys", "tolerations", "hostKeyAlgorithms", "monkey", "replicaCount", "image"} {
		g.Expect(SensitiveKey.MatchString(k)).To(BeFalse(), k)
	}
}

// Diffs full of characters JSON escapes ("<" is 6 bytes) are left out,
// largest first, until the answer encodes within the bound.
func TestFit_keepsTheEncodedAnswerWithinTheBound(t *testing.T) {
	g := NewWithT(t)
	res := &wire.PreviewResult{Digest: strings.Repeat("a", 64), ObjectsChanged: 17, ValuesDiff: "+x: 1\n"}
	for i := range 16 {
		res.Objects = append(res.Objects, wire.PreviewObject{Kind: "ConfigMap", Name: fmt.Sprintf("html-%d", i), Change: wire.ChangeChanged,
			Diff: strings.Repeat("+<p>&</p>\n", wire.MaxPreviewObjectDiff/10)})
	}
	before, _ := json.Marshal(res)
	g.Expect(len(before)).To(BeNumerically(">", MaxEncoded), "the raw bounds alone do not keep it small")
	Fit(res, MaxEncoded)
	after, _ := json.Marshal(res)
	g.Expect(len(after)).To(BeNumerically("<=", MaxEncoded))
	g.Expect(res.Truncated).To(BeTrue())
	g.Expect(res.Note).To(MatchRegexp(`truncated: \d+ diffs left out to keep the answer within 512 KiB of JSON`))
	g.Expect(res.ValuesDiff).To(Equal("+x: 1\n"), "the small values diff is kept")
	kept := 0
	for _, o := range res.Objects {
		if o.Diff != "" {
			kept++
		} else {
			g.Expect(o.Truncated).To(BeTrue())
		}
	}
	g.Expect(kept).To(BeNumerically(">", 0))

	small := &wire.PreviewResult{Digest: strings.Repeat("a", 64), ValuesDiff: "+x: 1\n"}
	Fit(small, MaxEncoded)
	g.Expect(small.Truncated).To(BeFalse())
}

func TestCut(t *testing.T) {
	g := NewWithT(t)
	d, cut := Cut("a\nb\n", 10)
	g.Expect(cut).To(BeFalse())
	g.Expect(d).To(Equal("a\nb\n"))
	long := strings.Repeat("line of text\n", 100)
	d, cut = Cut(long, 200)
	g.Expect(cut).To(BeTrue())
	g.Expect(len(d)).To(BeNumerically("<=", 200))
	g.Expect(d).To(HavePrefix("line of text\n"))
	g.Expect(d).To(HaveSuffix(" more bytes\n"))
}

// BenchmarkCompute measures the comparison of a preview (parsing both
// manifests, diffing, redacting, bounding) for a chart like the sample's
// (3 objects) and one of 200 objects. The Helm render and the API server's
// dry run are not included.
func BenchmarkCompute(b *testing.B) {
	for _, n := range []int{3, 200} {
		var live, next strings.Builder
		for i := range n {
			for _, w := range []*strings.Builder{&live, &next} {
				fmt.Fprintf(w, "---\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: app-%03d\nspec:\n  replicas: 2\n  template:\n    spec:\n      containers:\n", i)
			}
			fmt.Fprintf(&live, "        - name: app\n          image: registry.example/app:1.0.0\n")
			fmt.Fprintf(&next, "        - name: app\n          image: registry.example/app:1.1.0\n")
		}
		in := Input{Namespace: "apps", LiveManifest: live.String(), NewManifest: next.String(),
			LiveValues: values("info", "k1k1"), NewValues: values("debug", "k2k2")}
		b.Run(fmt.Sprintf("objects=%d", n), func(b *testing.B) {
			for b.Loop() {
				if _, err := Compute(in); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// A failed Helm test's log leaves the spoke (issue 25, review): the data
// of the release's Secrets, its sensitive values and credentials written
// out are redacted from it; the rest of the log stays.
func TestRedact_aTestLogKeepsNoSecret(t *testing.T) {
	g := NewWithT(t)
	manifest := `apiVersion: v1
kind: Secret
metadata:
  name: db
stringData:
  dsn: postgres://app:s3cr3t-from-secret@db/app
`
	values := map[string]any{"auth": map[string]any{"apiToken": "tok-from-values-0123"}, "replicas": 3}
	log := strings.Join([]string{
		"connecting to postgres://app:s3cr3t-from-secret@db/app",
		"GET /healthz with header X-Token tok-from-values-0123",
		"retrying with password=hunter2hunter2 and Authorization: Bearer abc.def.ghi",
		`{"api_key": "k-123456789"}`,
		"FAIL: expected 200, got 503",
	}, "\n")
	got := Redact(manifest, "apps", values, log)
	for _, secret := range []string{"s3cr3t-from-secret", "tok-from-values-0123", "hunter2hunter2", "abc.def.ghi", "k-123456789"} {
		g.Expect(got).NotTo(ContainSubstring(secret))
	}
	g.Expect(got).To(ContainSubstring("FAIL: expected 200, got 503"))
	g.Expect(got).To(ContainSubstring("password=" + Redacted))
	g.Expect(got).To(ContainSubstring("Authorization: Bearer " + Redacted))
	g.Expect(Redact("not: [yaml", "apps", nil, "token: abc123456")).To(Equal("token: "+Redacted), "a manifest that does not parse: the forms still apply")
}
