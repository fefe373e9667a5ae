package pipeline

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
)

// Labels on every Promotion.
const (
	LabelPipeline    = "tugboat.dev/pipeline"
	LabelEnvironment = "tugboat.dev/environment"
	LabelVersion     = "tugboat.dev/version"

	// ResumeAnnotationPrefix + environment name, set to an RFC 3339 time,
	// releases a rollback hold seen before that time (`tugboat promote
	// --resume`).
	ResumeAnnotationPrefix = "resume.tugboat.dev/"

	// TargetIndex indexes Pipelines by the ReleaseHistory names of their
	// targets; SpokeIndex by the Spokes they use.
	TargetIndex = "tugboat.dev/pipeline-targets"
	SpokeIndex  = "tugboat.dev/pipeline-spokes"
	// PromotionPipelineIndex indexes Promotions by spec.pipeline.
	PromotionPipelineIndex = "tugboat.dev/promotion-pipeline"
)

// ReleaseOf returns the release name of a target.
func ReleaseOf(p *tugboatv1alpha1.Pipeline, t *tugboatv1alpha1.Target) string {
	if t.Release != "" {
		return t.Release
	}
	return p.Spec.Release
}

// HistoryName returns the name of a target's ReleaseHistory (in the
// Pipeline's namespace).
func HistoryName(p *tugboatv1alpha1.Pipeline, t *tugboatv1alpha1.Target) string {
	return tugboatv1alpha1.ReleaseHistoryName(t.Spoke, t.Namespace, ReleaseOf(p, t))
}

// PromotionName is the deterministic name of the Promotion of version into
// environment: one per (pipeline, environment, version).
func PromotionName(pipeline, environment, version string) string {
	v := sanitize(version)
	name := pipeline + "-" + environment + "-" + v
	if v != version || v == "" {
		// Sanitizing lost something ('+' build metadata, upper case): a
		// hash of the version keeps distinct versions apart (1.0.0+build
		// and 1.0.0-build are different versions).
		sum := sha256.Sum256([]byte(version))
		name = strings.TrimRight(name, "-.") + "-" + hex.EncodeToString(sum[:4])
	}
	if len(name) <= 253 {
		return name
	}
	sum := sha256.Sum256([]byte(name))
	return strings.TrimRight(name[:240], "-.") + "-" + hex.EncodeToString(sum[:6])
}

// AlternatePromotionName is the name of the Promotion of version into
// environment when PromotionName is held by a Promotion of another
// (pipeline, environment, version): PromotionName joins its parts with '-',
// so pipeline "a-b" into "c" and pipeline "a" into "b-c" share it. The
// alternate is PromotionName plus "-" and a short hash of pipeline NUL
// environment NUL version, which tells such tuples apart; it is
// deterministic, so every reconcile finds the same one.
func AlternatePromotionName(pipeline, environment, version string) string {
	sum := sha256.Sum256([]byte(pipeline + "\x00" + environment + "\x00" + version))
	suffix := "-" + hex.EncodeToString(sum[:5])
	base := PromotionName(pipeline, environment, version)
	if len(base)+len(suffix) > 253 {
		base = strings.TrimRight(base[:253-len(suffix)], "-.")
	}
	return base + suffix
}

// LabelValue makes s a valid label value (versions may hold '+').
func LabelValue(s string) string {
	v := sanitize(s)
	if len(v) > 63 {
		sum := sha256.Sum256([]byte(s))
		v = strings.TrimRight(v[:50], "-.") + "-" + hex.EncodeToString(sum[:6])
	}
	return v
}

// sanitize lowercases s and maps every character a DNS subdomain cannot
// hold to '-'.
func sanitize(s string) string {
	b := []byte(strings.ToLower(s))
	for i, c := range b {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '-' && c != '.' {
			b[i] = '-'
		}
	}
	return strings.Trim(string(b), "-.")
}

// StrategyFor resolves the strategy of promotions into env: the
// environment's override, else the Pipeline's default.
func StrategyFor(p *tugboatv1alpha1.Pipeline, env *tugboatv1alpha1.Environment) tugboatv1alpha1.PromotionStrategy {
	if env.Promotion != nil {
		return *env.Promotion
	}
	return p.Spec.Promotion
}

// EnvironmentIndex returns the index of the named environment, or -1.
func EnvironmentIndex(p *tugboatv1alpha1.Pipeline, name string) int {
	for i := range p.Spec.Environments {
		if p.Spec.Environments[i].Name == name {
			return i
		}
	}
	return -1
}
