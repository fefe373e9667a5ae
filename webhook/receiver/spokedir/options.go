package spokedir

import (
	"fmt"
	"math"

	"github.com/spf13/pflag"
	"golang.org/x/time/rate"
)

// DefaultForcedReadsPerSecond is the default of Options.ForcedReadsPerSecond.
const DefaultForcedReadsPerSecond = 10

// Options configure a Directory beyond its key TTL.
type Options struct {
	// ForcedReadsPerSecond caps the key Secret reads forced by requests that
	// failed to verify (RefreshKeys), of all Spokes together. Each Spoke is
	// also held to one such read per MinForcedReadInterval, but a caller
	// with no key can still name many Spokes: without this cap, bad
	// signatures for N spokes would cost N Secret GETs a second. The burst
	// is the rate rounded up (at least 1). A read refused by the cap is
	// counted in tugboat_receiver_key_reads_limited_total, and the request
	// is verified with the keys already held (a key written without the
	// Spoke's keys annotation then takes effect at the next read the cap
	// allows, or within the TTL). 0 forces no read at all.
	ForcedReadsPerSecond float64
}

// NewOptions returns the defaults.
func NewOptions() Options {
	return Options{ForcedReadsPerSecond: DefaultForcedReadsPerSecond}
}

// BindFlags binds the options to flags.
func (o *Options) BindFlags(fs *pflag.FlagSet) {
	fs.Float64Var(&o.ForcedReadsPerSecond, "spoke-key-forced-reads-per-second", o.ForcedReadsPerSecond,
		"most spoke key Secret reads per second, over all spokes, forced by requests that failed to verify (each spoke also at most one a second); 0: none, keys are re-read only when a Spoke's tugboat.dev/keys-updated-at changes or --spoke-key-cache-ttl passes")
}

// Validate reports an invalid option.
func (o *Options) Validate() error {
	if o.ForcedReadsPerSecond < 0 || math.IsNaN(o.ForcedReadsPerSecond) || math.IsInf(o.ForcedReadsPerSecond, 0) {
		return fmt.Errorf("--spoke-key-forced-reads-per-second must be a number of at least 0, got %v", o.ForcedReadsPerSecond)
	}
	return nil
}

// limiter returns the token bucket of ForcedReadsPerSecond.
func (o Options) limiter() *rate.Limiter {
	if o.ForcedReadsPerSecond <= 0 {
		return rate.NewLimiter(0, 0)
	}
	return rate.NewLimiter(rate.Limit(o.ForcedReadsPerSecond), max(1, int(math.Ceil(o.ForcedReadsPerSecond))))
}
