package spokedir

import (
	"time"

	dto "github.com/prometheus/client_model/go"
)

// SetClock replaces d's clock, for tests of its TTL and read rate.
func SetClock(d *Directory, now func() time.Time) { d.now = now }

// KeyReadsLimited is tugboat_receiver_key_reads_limited_total.
func KeyReadsLimited() float64 {
	var m dto.Metric
	if err := keyReadsLimitedTotal.Write(&m); err != nil {
		panic(err)
	}
	return m.GetCounter().GetValue()
}

// KeyReads is tugboat_receiver_key_reads_total{reason}.
func KeyReads(reason string) float64 {
	var m dto.Metric
	if err := keyReadsTotal.WithLabelValues(reason).Write(&m); err != nil {
		panic(err)
	}
	return m.GetCounter().GetValue()
}
