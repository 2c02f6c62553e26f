package memory

import "time"

// SetGrace changes how long single-use entries outlive their expiry, so
// that tests can watch them expire.
func (r *Redis) SetGrace(d time.Duration) { r.grace = d }
