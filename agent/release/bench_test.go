package release

import (
	"encoding/json"
	"testing"

	rspb "helm.sh/helm/v3/pkg/release"
)

// BenchmarkDecodeSecret decodes a realistic release (a ~20 KiB manifest,
// chart metadata, a template, values) as Helm's secret driver stores it.
// Throughput is in bytes of release JSON decoded (the payload once
// decompressed); the encoded payload is much smaller, gzip compresses
// manifests well.
func BenchmarkDecodeSecret(b *testing.B) {
	manifest := testManifest(17)
	if len(manifest) < 19<<10 || len(manifest) > 22<<10 {
		b.Fatalf("manifest is %d bytes, want about 20 KiB", len(manifest))
	}
	rls := testRelease("apps", "web", 7, rspb.StatusDeployed, manifest)
	body, err := json.Marshal(rls)
	if err != nil {
		b.Fatal(err)
	}
	s := storeSecret(b, rls)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := DecodeSecret(s, DecodeOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	// After the loop: b.Loop resets reported metrics when it starts.
	b.ReportMetric(float64(len(s.Data["release"])), "encoded-B")
}
