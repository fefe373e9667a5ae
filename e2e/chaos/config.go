package chaos

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"time"
)

// Environment variables that configure the suite (see docs/reliability.md).
const (
	// EnvSeed fixes the schedule: which faults, at which offsets, for how
	// long. Unset, a seed is drawn and printed.
	EnvSeed = "CHAOS_SEED"
	// EnvScale multiplies the number of releases and faults per scenario
	// (default 1, the variant in `make test`).
	EnvScale = "CHAOS_SCALE"
	// EnvTimeScale divides protocol time: the agents' state interval and
	// retry backoff, the hub's heartbeat timeout and the outages (default
	// 30: a 5-minute outage lasts 10 s).
	EnvTimeScale = "CHAOS_TIME_SCALE"
)

// Config is one run's configuration.
type Config struct {
	Seed      uint64
	Scale     int
	TimeScale int
}

// ConfigFromEnv reads the suite's configuration from the environment.
func ConfigFromEnv() (Config, error) {
	c := Config{Scale: 1, TimeScale: 30}
	if v := os.Getenv(EnvSeed); v != "" {
		s, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return c, fmt.Errorf("%s=%q: want an unsigned integer", EnvSeed, v)
		}
		c.Seed = s
	} else {
		c.Seed = uint64(time.Now().UnixNano()) % 1_000_000
	}
	for _, e := range []struct {
		name string
		into *int
	}{{EnvScale, &c.Scale}, {EnvTimeScale, &c.TimeScale}} {
		v := os.Getenv(e.name)
		if v == "" {
			continue
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return c, fmt.Errorf("%s=%q: want a positive integer", e.name, v)
		}
		*e.into = n
	}
	return c, nil
}

// Rand returns the run's random source for one scenario: the same seed and
// scenario give the same draws, whatever ran before.
func (c Config) Rand(scenario string) *rand.Rand {
	var h uint64 = 14695981039346656037 // FNV-1a of the scenario's name
	for i := 0; i < len(scenario); i++ {
		h = (h ^ uint64(scenario[i])) * 1099511628211
	}
	return rand.New(rand.NewPCG(c.Seed, h)) //nolint:gosec // a reproducible schedule drawn from a seed, not a secret
}

// Protocol scales a duration of protocol time (e.g. a 5-minute outage) to
// the run's wall time, never below floor.
func (c Config) Protocol(d, floor time.Duration) time.Duration {
	return max(d/time.Duration(c.TimeScale), floor)
}

// Between draws a duration uniformly from [lo, hi].
func Between(r *rand.Rand, lo, hi time.Duration) time.Duration {
	if hi <= lo {
		return lo
	}
	return lo + time.Duration(r.Int64N(int64(hi-lo)+1))
}

// String is the environment that reproduces the run.
func (c Config) String() string {
	return fmt.Sprintf("%s=%d %s=%d %s=%d", EnvSeed, c.Seed, EnvScale, c.Scale, EnvTimeScale, c.TimeScale)
}
