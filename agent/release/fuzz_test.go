package release

import (
	"errors"
	"strings"
	"testing"

	rspb "helm.sh/helm/v3/pkg/release"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// FuzzDecodeSecret feeds arbitrary bytes to the decoder as the "release" key
// of a Helm Secret (and of a ConfigMap). It must never panic, must return
// either a release or a *DecodeError, and a release it returns must be
// well-formed. The committed corpus in testdata/fuzz/FuzzDecodeSecret holds
// real gzip and uncompressed payloads written by Helm's storage driver.
func FuzzDecodeSecret(f *testing.F) {
	rls := testRelease("apps", "web", 7, rspb.StatusDeployed, testManifest(1))
	f.Add(storeSecret(f, rls).Data["release"])
	f.Add(legacyPayload(f, rls))
	f.Add([]byte("H4sIAAAAAAAA/w=="))
	f.Add([]byte("e30="))

	opts := DecodeOptions{MaxEncodedBytes: 1 << 20, MaxDecompressedBytes: 1 << 20}
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := DecodeSecret(secretWith(data), opts)
		checkDecoded(t, r, err)

		cm := &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "sh.helm.release.v1.web.v7", Labels: map[string]string{"owner": "helm"}},
			Data:       map[string]string{"release": string(data)},
		}
		r2, err2 := DecodeConfigMap(cm, opts)
		checkDecoded(t, r2, err2)
		if (err == nil) != (err2 == nil) {
			t.Fatalf("secret and configmap drivers disagree: %v vs %v", err, err2)
		}
		if r != nil && *r != *r2 {
			t.Fatalf("secret and configmap drivers decoded differently:\n%+v\n%+v", r, r2)
		}
	})
}

func checkDecoded(t *testing.T, r *Release, err error) {
	t.Helper()
	if (r == nil) == (err == nil) {
		t.Fatalf("want exactly one of release and error, got %v and %v", r, err)
	}
	if err != nil {
		var de *DecodeError
		if !errors.As(err, &de) || de.Stage == "" || de.Err == nil {
			t.Fatalf("error is not a complete *DecodeError: %#v", err)
		}
		if !strings.Contains(err.Error(), "apps/sh.helm.release.v1.web.v7: "+string(de.Stage)+": ") {
			t.Fatalf("error does not name the object and stage: %v", err)
		}
		return
	}
	if r.Name == "" || r.Namespace == "" || r.Revision < 1 || r.Chart == "" || r.ChartVersion == "" || r.Status == "" {
		t.Fatalf("incomplete release: %+v", r)
	}
	for _, d := range []string{r.ValuesDigest, r.ManifestDigest} {
		if !strings.HasPrefix(d, "sha256:") || len(d) != len("sha256:")+64 {
			t.Fatalf("malformed digest %q", d)
		}
	}
}
