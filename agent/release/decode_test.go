package release

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"runtime"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	rspb "helm.sh/helm/v3/pkg/release"
	corev1 "k8s.io/api/core/v1"

	"tugboat.dev/tugboat/api/wire"
)

var allStatuses = map[rspb.Status]wire.ReleaseStatus{
	rspb.StatusPendingInstall:  wire.StatusPendingInstall,
	rspb.StatusPendingUpgrade:  wire.StatusPendingUpgrade,
	rspb.StatusPendingRollback: wire.StatusPendingRollback,
	rspb.StatusDeployed:        wire.StatusDeployed,
	rspb.StatusFailed:          wire.StatusFailed,
	rspb.StatusSuperseded:      wire.StatusSuperseded,
	rspb.StatusUninstalling:    wire.StatusUninstalling,
	rspb.StatusUninstalled:     wire.StatusUninstalled,
	rspb.StatusUnknown:         wire.StatusUnknown,
}

func TestDecodeSecret_helmSecretsDriver(t *testing.T) {
	g := NewWithT(t)
	manifest := testManifest(2)
	rls := testRelease("apps", "web", 7, rspb.StatusDeployed, manifest)
	s := storeSecret(t, rls)

	// What Helm wrote is what DESIGN.md §2 describes.
	g.Expect(s.Name).To(Equal("sh.helm.release.v1.web.v7"))
	g.Expect(IsReleaseSecret(s)).To(BeTrue())
	raw := make([]byte, len(s.Data["release"]))
	n, err := b64Decode(raw, s.Data["release"])
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(raw[:n]).To(HavePrefix(string(gzipMagic)), "Helm gzips by default")

	r, err := DecodeSecret(s, DecodeOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	config, _ := json.Marshal(rls.Config)
	g.Expect(*r).To(Equal(Release{
		Namespace:        "apps",
		Name:             "web",
		Revision:         7,
		StorageNamespace: "apps",
		StorageName:      "sh.helm.release.v1.web.v7",
		Chart:            "web",
		ChartVersion:     "1.4.0",
		AppVersion:       "2.3.1",
		Status:           wire.StatusDeployed,
		FirstDeployed:    firstDeployed,
		LastDeployed:     lastDeployed,
		Description:      "Upgrade complete",
		ValuesDigest:     "sha256:" + sha256Hex(config),
		ManifestDigest:   "sha256:" + sha256Hex([]byte(manifest)),
		Manifest:         manifest,
	}))
}

func TestDecodeSecret_everyStatus(t *testing.T) {
	for helmStatus, want := range allStatuses {
		t.Run(string(helmStatus), func(t *testing.T) {
			g := NewWithT(t)
			r, err := DecodeSecret(storeSecret(t, testRelease("apps", "web", 3, helmStatus, "")), DecodeOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(r.Status).To(Equal(want))
			g.Expect(r.State().Status).To(Equal(want))
		})
	}
	g := NewWithT(t)
	g.Expect(WireStatus("something-new")).To(Equal(wire.StatusUnknown))
	g.Expect(WireStatus("")).To(Equal(wire.StatusUnknown))
}

func TestDecodeSecret_uncompressedLegacyPayload(t *testing.T) {
	g := NewWithT(t)
	rls := testRelease("apps", "web", 7, rspb.StatusPendingUpgrade, testManifest(1))
	legacy, err := DecodeSecret(secretWith(legacyPayload(t, rls)), DecodeOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	current, err := DecodeSecret(storeSecret(t, rls), DecodeOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(*legacy).To(Equal(*current), "gzip or not, the same release")
	g.Expect(legacy.Status).To(Equal(wire.StatusPendingUpgrade))
}

func TestDecodeConfigMap_helmConfigMapsDriver(t *testing.T) {
	g := NewWithT(t)
	rls := testRelease("apps", "web", 2, rspb.StatusFailed, testManifest(1))
	cm := storeConfigMap(t, rls)
	g.Expect(IsReleaseConfigMap(cm)).To(BeTrue())

	r, err := DecodeConfigMap(cm, DecodeOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(r.Key()).To(Equal(Key{Namespace: "apps", Name: "web"}))
	g.Expect(r.Revision).To(Equal(2))
	g.Expect(r.Status).To(Equal(wire.StatusFailed))
	g.Expect(r.ChartVersion).To(Equal("1.4.0"))

	fromSecret, err := DecodeSecret(storeSecret(t, rls), DecodeOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(r.ValuesDigest).To(Equal(fromSecret.ValuesDigest))
	g.Expect(r.ManifestDigest).To(Equal(fromSecret.ManifestDigest))

	delete(cm.Labels, "owner")
	_, err = DecodeConfigMap(cm, DecodeOptions{})
	expectStage(g, err, StageType, "configmap apps/sh.helm.release.v1.web.v2: type: ")

	_, err = DecodeConfigMap(nil, DecodeOptions{})
	expectStage(g, err, StageMissing, "configmap /: missing: nil ConfigMap")
}

func TestDecodeSecret_fillsNameAndRevisionFromStorageName(t *testing.T) {
	g := NewWithT(t)
	rls := testRelease("", "", 0, rspb.StatusDeployed, "")
	r, err := DecodeSecret(secretWith(legacyPayload(t, rls)), DecodeOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(r.Namespace).To(Equal("apps"))
	g.Expect(r.Name).To(Equal("web"))
	g.Expect(r.Revision).To(Equal(7))
}

func TestDecodeSecret_corruptInputs(t *testing.T) {
	valid := storeSecret(t, testRelease("apps", "web", 7, rspb.StatusDeployed, testManifest(1))).Data["release"]
	validGzip := make([]byte, len(valid))
	n, _ := b64Decode(validGzip, valid)
	validGzip = validGzip[:n]
	flipped := bytes.Clone(validGzip)
	flipped[len(flipped)-6] ^= 0xff // inside the CRC-32 trailer

	noChart := testRelease("apps", "web", 7, rspb.StatusDeployed, "")
	noChart.Chart = nil

	tests := []struct {
		name    string
		secret  *corev1.Secret
		opts    DecodeOptions
		stage   Stage
		message string
	}{
		{"nil secret", nil, DecodeOptions{}, StageMissing, "secret /: missing: nil Secret"},
		{"wrong type", func() *corev1.Secret { s := secretWith(valid); s.Type = corev1.SecretTypeOpaque; return s }(),
			DecodeOptions{}, StageType, `type is "Opaque", want "helm.sh/release.v1"`},
		{"missing key", func() *corev1.Secret { s := secretWith(nil); s.Data = map[string][]byte{"other": valid}; return s }(),
			DecodeOptions{}, StageMissing, `no "release" key in .data`},
		{"empty value", secretWith([]byte{}), DecodeOptions{}, StageMissing, `"release" is empty`},
		{"bad base64", secretWith([]byte("H4sI!!!not base64")), DecodeOptions{}, StageBase64, "illegal base64 data"},
		{"truncated base64", secretWith(valid[:len(valid)-1]), DecodeOptions{}, StageBase64, "illegal base64 data"},
		{"gzip magic then garbage", secretWith(b64(append([]byte{0x1f, 0x8b}, bytes.Repeat([]byte("B"), 30)...))), DecodeOptions{}, StageGzip, "invalid header"},
		{"truncated gzip", secretWith(b64(validGzip[:len(validGzip)/2])), DecodeOptions{}, StageGzip, "unexpected EOF"},
		{"bad gzip checksum", secretWith(b64(flipped)), DecodeOptions{}, StageGzip, "gzip: invalid checksum"},
		{"bad json", secretWith(b64([]byte(`{"name": "web", "version": 7,`))), DecodeOptions{}, StageJSON, ""},
		{"not a release", secretWith(b64([]byte(`["web"]`))), DecodeOptions{}, StageJSON, "json: cannot unmarshal array"},
		{"wrong field type", secretWith(b64([]byte(`{"name": "web", "version": "7"}`))), DecodeOptions{}, StageJSON, "cannot unmarshal string"},
		{"trailing data", secretWith(b64([]byte(`{"name": "web"} {}`))), DecodeOptions{}, StageJSON, "unexpected data after"},
		{"json null", secretWith(b64([]byte(`null`))), DecodeOptions{}, StageMissing, "chart name and version"},
		{"no chart", secretWith(legacyPayload(t, noChart)), DecodeOptions{}, StageMissing, "release has no chart name and version"},
		{"negative revision", secretWith(b64([]byte(`{"name":"web","version":-1}`))), DecodeOptions{}, StageMissing, "no valid revision (got -1)"},
		{"encoded over limit", secretWith(valid), DecodeOptions{MaxEncodedBytes: 100}, StageTooLarge, "over the limit of 100"},
		{"decompressed over limit", secretWith(valid), DecodeOptions{MaxDecompressedBytes: 1000}, StageTooLarge, "over the limit of 1000 bytes"},
		{"uncompressed over limit", secretWith(legacyPayload(t, noChart)), DecodeOptions{MaxDecompressedBytes: 100}, StageTooLarge, "over the limit of 100"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			r, err := DecodeSecret(tt.secret, tt.opts)
			g.Expect(r).To(BeNil())
			expectStage(g, err, tt.stage, tt.message)
			if tt.secret != nil {
				g.Expect(err.Error()).To(HavePrefix("secret apps/sh.helm.release.v1.web.v7: " + string(tt.stage) + ": "))
			}
		})
	}
}

// TestDecodeSecret_gzipBomb feeds 1 GiB of zeros compressed into about 1 MiB
// (1024 gzip members of 1 MiB each: gzip readers concatenate members, as
// Helm's does). Decoding must stop at the limit, allocating a small multiple
// of it, not a GiB.
func TestDecodeSecret_gzipBomb(t *testing.T) {
	g := NewWithT(t)
	var member bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&member, gzip.BestCompression)
	_, err := zw.Write(make([]byte, 1<<20))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(zw.Close()).To(Succeed())
	bomb := bytes.Repeat(member.Bytes(), 1024)
	payload := b64(bomb)
	g.Expect(len(payload)).To(BeNumerically("<", DefaultMaxEncodedBytes), "the bomb passes the encoded-size check")

	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	r, err := DecodeSecret(secretWith(payload), DecodeOptions{})
	runtime.ReadMemStats(&after)

	g.Expect(r).To(BeNil())
	expectStage(g, err, StageTooLarge, "decompressed payload is over the limit of 16777216 bytes")
	g.Expect(after.TotalAlloc-before.TotalAlloc).To(BeNumerically("<", 128<<20), "allocated far less than the 1 GiB the bomb expands to")
}

// TestDecodeSecret_limitIsExact checks the decompressed limit is inclusive.
func TestDecodeSecret_limitIsExact(t *testing.T) {
	g := NewWithT(t)
	rls := testRelease("apps", "web", 7, rspb.StatusDeployed, "")
	body, err := json.Marshal(rls)
	g.Expect(err).NotTo(HaveOccurred())
	var zbuf bytes.Buffer
	zw := gzip.NewWriter(&zbuf)
	_, _ = zw.Write(body)
	g.Expect(zw.Close()).To(Succeed())

	_, err = DecodeSecret(secretWith(b64(zbuf.Bytes())), DecodeOptions{MaxDecompressedBytes: len(body)})
	g.Expect(err).NotTo(HaveOccurred())
	_, err = DecodeSecret(secretWith(b64(zbuf.Bytes())), DecodeOptions{MaxDecompressedBytes: len(body) - 1})
	expectStage(g, err, StageTooLarge, "")
}

func TestValuesDigest(t *testing.T) {
	g := NewWithT(t)
	decode := func(config string) string {
		t.Helper()
		body := `{"name":"web","version":1,"chart":{"metadata":{"name":"web","version":"1.0.0"}},"config":` + config + `}`
		r, err := DecodeSecret(secretWith(b64([]byte(body))), DecodeOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		return r.ValuesDigest
	}
	g.Expect(decode(`{"b":1,"a":{"y":true,"x":"s"}}`)).To(Equal(decode(`{"a":{"x":"s","y":true},"b":1}`)), "key order does not matter")
	g.Expect(decode(`{"a":1}`)).NotTo(Equal(decode(`{"a":2}`)))
	g.Expect(decode(`{"id":12345678901234567890}`)).NotTo(Equal(decode(`{"id":12345678901234567891}`)), "integers beyond float64 precision stay exact")
	g.Expect(decode(`null`)).To(Equal(decode(`{}`)))
	g.Expect(decode(`{}`)).To(Equal("sha256:" + sha256Hex([]byte("{}"))))
}

func TestRelease_State(t *testing.T) {
	g := NewWithT(t)
	r, err := DecodeSecret(storeSecret(t, testRelease("apps", "web", 7, rspb.StatusDeployed, testManifest(1))), DecodeOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	st := r.State()
	g.Expect(st.Release).To(Equal("web"))
	g.Expect(st.Health).To(Equal(wire.HealthUnknown))
	g.Expect(st.LastDeployed).To(Equal(lastDeployed))

	// The state passes the hub's validation as it is.
	snap := wire.StateSnapshot{Spoke: "staging-1", AgentVersion: "v0.1.0", TakenAt: time.Now(), Releases: []wire.ReleaseState{st}}
	g.Expect(snap.Validate()).To(Succeed())
}

func expectStage(g Gomega, err error, stage Stage, message string) {
	g.Expect(err).To(HaveOccurred())
	var de *DecodeError
	g.Expect(errors.As(err, &de)).To(BeTrue(), "error %v is a *DecodeError", err)
	g.Expect(de.Stage).To(Equal(stage), err.Error())
	g.Expect(err.Error()).To(ContainSubstring(message))
}

func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

func b64Decode(dst, src []byte) (int, error) {
	return base64.StdEncoding.Decode(dst, src)
}
