package spokedir

import (
	"time"

	dto "github.com/prometheus/client_model/go"
)

// SetClock replaces d's clock, for tests of its TTL and read rate.
func SetClock(d *Directory, now func() time.Time) { d.now = now }

// KeyReads is tugboat_receiver_key_reads_total{reason}.
func KeyReads(reason string) float64 {
	var m dto.Metric
	if err := keyReadsTotal.WithLabelValues(reason).Write(&m); err != nil {
		panic(err)
	}
	return m.GetCounter().GetValue()
}
