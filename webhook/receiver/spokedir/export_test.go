package spokedir

import "time"

// SetClock replaces d's clock, for tests of its TTL and read rate.
func SetClock(d *Directory, now func() time.Time) { d.now = now }
