package pipeline

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/util/validation"
)

func TestPromotionName_isDeterministicAndReadable(t *testing.T) {
	g := NewWithT(t)
	g.Expect(PromotionName("web", "production", "1.4.0")).To(Equal("web-production-1.4.0"))
	g.Expect(PromotionName("web", "production", "1.4.0")).To(Equal(PromotionName("web", "production", "1.4.0")))
	g.Expect(PromotionName("web", "production", "1.4.0-rc.1")).To(Equal("web-production-1.4.0-rc.1"))
	// '+' build metadata cannot be in a name: it is mapped, and a hash of the
	// version keeps 1.4.0+build.7 apart from 1.4.0-build.7.
	g.Expect(PromotionName("web", "production", "1.4.0+build.7")).To(MatchRegexp(`^web-production-1\.4\.0-build\.7-[0-9a-f]{8}$`))
	g.Expect(PromotionName("web", "production", "1.4.0+build.7")).To(Equal(PromotionName("web", "production", "1.4.0+build.7")))
}

func TestPromotionName_isAValidObjectName(t *testing.T) {
	long63 := strings.Repeat("p", 63)
	env63 := strings.Repeat("e", 63)
	for _, tc := range []struct{ pipeline, env, version string }{
		{"web", "production", "1.4.0"},
		{"web", "production", "1.4.0+build.7"},
		{"web", "production", "1.4.0+Build_7"},
		{"web", "production", "V1.4.0-RC1"},
		{"web", "production", "+1.0.0+"},
		{"web", "production", "..."},
		{"web", "production", "+"},
		{"web", "production", ""},
		{long63, env63, strings.Repeat("9", 64)},
		{long63, env63, strings.Repeat("1.", 80) + "0"},
		{long63, env63, strings.Repeat("x+", 200)},
	} {
		name := PromotionName(tc.pipeline, tc.env, tc.version)
		if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
			t.Errorf("PromotionName(%q, %q, %q) = %q: %v", tc.pipeline, tc.env, tc.version, name, errs)
		}
	}
}

func TestPromotionName_hashesLongNames(t *testing.T) {
	g := NewWithT(t)
	long63 := strings.Repeat("p", 63)
	env63 := strings.Repeat("e", 63)
	a := PromotionName(long63, env63, strings.Repeat("1", 130)+".0")
	b := PromotionName(long63, env63, strings.Repeat("1", 130)+".1")
	g.Expect(len(a)).To(BeNumerically("<=", validation.DNS1123SubdomainMaxLength))
	g.Expect(len(b)).To(BeNumerically("<=", validation.DNS1123SubdomainMaxLength))
	g.Expect(a).NotTo(Equal(b), "names differing only past the cut differ by their hash")
	g.Expect(a).To(HavePrefix(long63+"-"+env63+"-"), "the readable part is kept")
	g.Expect(PromotionName(long63, env63, strings.Repeat("1", 130)+".0")).To(Equal(a), "deterministic")
}

// Distinct versions must get distinct names: the name is the Promotion's
// identity (one per pipeline, environment and version), so a collision
// would make the reconciler think a version was already promoted.
func TestPromotionName_distinctVersionsGetDistinctNames(t *testing.T) {
	versions := []string{
		"1.0.0", "1.0.0-build", "1.0.0+build", "1.0.0_build", "1.0.0-Build",
		"1.0.0-rc1", "1.0.0-RC1", "1.0.0+build.1", "1.0.0+build.2", "1.0.0-build.1",
	}
	seen := map[string]string{}
	for _, v := range versions {
		name := PromotionName("web", "production", v)
		if other, ok := seen[name]; ok {
			t.Errorf("versions %q and %q share the promotion name %q", other, v, name)
		}
		seen[name] = v
	}
}

func TestLabelValue(t *testing.T) {
	g := NewWithT(t)
	g.Expect(LabelValue("1.4.0")).To(Equal("1.4.0"))
	g.Expect(LabelValue("1.4.0+build.7")).To(Equal("1.4.0-build.7"))
	g.Expect(LabelValue("V1.4.0")).To(Equal("v1.4.0"))
	g.Expect(LabelValue("")).To(Equal(""))
	long := strings.Repeat("1.", 60) + "0"
	g.Expect(LabelValue(long)).To(Equal(LabelValue(long)), "deterministic")
	g.Expect(LabelValue(long)).NotTo(Equal(LabelValue(long + "1")))
	for _, v := range []string{"1.4.0", "1.4.0+build.7", "+x+", "...", long, strings.Repeat("a-", 40), strings.Repeat("+", 70)} {
		if errs := validation.IsValidLabelValue(LabelValue(v)); len(errs) > 0 {
			t.Errorf("LabelValue(%q) = %q: %v", v, LabelValue(v), errs)
		}
	}
}

// PromotionName joins its parts with '-', so pipeline "a-b" into "c" and
// pipeline "a" into "b-c" share a name; the alternate name tells them apart.
func TestAlternatePromotionName(t *testing.T) {
	g := NewWithT(t)
	g.Expect(PromotionName("a-b", "c", "1.0.0")).To(Equal(PromotionName("a", "b-c", "1.0.0")), "the collision it exists for")
	alt := AlternatePromotionName("a-b", "c", "1.0.0")
	g.Expect(alt).To(MatchRegexp(`^a-b-c-1\.0\.0-[0-9a-f]{10}$`), "the readable name plus a short hash")
	g.Expect(AlternatePromotionName("a-b", "c", "1.0.0")).To(Equal(alt), "deterministic")
	g.Expect(AlternatePromotionName("a", "b-c", "1.0.0")).NotTo(Equal(alt))
	g.Expect(AlternatePromotionName("a", "b-c", "1.0.0")).NotTo(Equal(PromotionName("a", "b-c", "1.0.0")))
	g.Expect(AlternatePromotionName("web", "production", "1.4.0")).To(HavePrefix("web-production-1.4.0-"))

	long63 := strings.Repeat("p", 63)
	env63 := strings.Repeat("e", 63)
	seen := map[string]string{}
	for _, tc := range []struct{ pipeline, env, version string }{
		{"a-b", "c", "1.0.0"}, {"a", "b-c", "1.0.0"}, {"a-b-c", "d", "1.0.0"}, {"a", "b-c-d", "1.0.0"},
		{"a", "b", "c-1.0.0"}, {"web", "production", "1.4.0+build.7"}, {"web", "production", "+"},
		{long63, env63, strings.Repeat("9", 64)}, {long63, env63, strings.Repeat("x+", 200)},
		{long63, env63, strings.Repeat("1", 130) + ".0"}, {long63, env63, strings.Repeat("1", 130) + ".1"},
	} {
		name := AlternatePromotionName(tc.pipeline, tc.env, tc.version)
		if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
			t.Errorf("AlternatePromotionName(%q, %q, %q) = %q: %v", tc.pipeline, tc.env, tc.version, name, errs)
		}
		g.Expect(len(name)).To(BeNumerically("<=", validation.DNS1123SubdomainMaxLength))
		if other, ok := seen[name]; ok {
			t.Errorf("%v and %s share the alternate name %q", tc, other, name)
		}
		seen[name] = tc.pipeline + "/" + tc.env + "/" + tc.version
		g.Expect(name).NotTo(Equal(PromotionName(tc.pipeline, tc.env, tc.version)))
	}
}
