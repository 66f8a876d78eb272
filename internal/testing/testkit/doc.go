// Package testkit holds the helpers that the tests of several packages
// share, so that each package's tests call one definition. It is for tests
// only: nothing but _test.go files may import it.
//
// It promises that every helper ties what it starts to the test it is
// given (listeners, servers and their goroutines end in t.Cleanup), and
// that a helper that waits does so for a bounded time and then fails the
// test instead of hanging.
//
// Besides the standard library it imports only config and auth, for the
// config and token fixtures (fixture.go), so the tests of those two
// packages cannot use it. It never imports a package whose tests use it:
// ServeOn and Scrape take a server's parts and a handler rather than
// h1server's or metrics's types.
package testkit
