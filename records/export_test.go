package records

import "time"

// SetNow makes r's clock now (tests of the marks' life).
func SetNow(r *Records, now func() time.Time) { r.now = now }

// MarkLife is r's markLife.
func MarkLife(r *Records) time.Duration { return r.markLife() }

// Listed is how many records l holds.
func Listed(l Listing) int { return len(l.byID) }
