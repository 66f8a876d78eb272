//go:build !unix

package h1server

// openFileLimit is unknown here: no global connection cap by default.
func openFileLimit() (uint64, bool) { return 0, false }
