// Package tunnel carries upgraded connections (WebSocket, any protocol a
// 101 switches to) between a client and a sandbox once the gateway has
// decided to proxy them: the handshake on the sandbox side, the switch on
// the client side (Writer.Take: hijack, the 101, the bytes either side
// sent early; TestTake), the splice of the two sockets, and the registry
// that closes them with a WebSocket close frame: 1001 for all of a key
// (CloseAll), or a code and reason the gateway gives for one socket
// (Writer.GoAway: its grant ended). It decides no policy
// (which upgrades are allowed, to where, how many); the gateway does
// (gateway/upgrade.go, limits.go).
//
// Its promises, each tested with a peer that breaks it (the gateway's
// sockets_test.go, stuckws_docker_test.go, writetimeout_test.go):
//
//  1. Every write to either side of a spliced pair has a deadline
//     (WriteTimeout): a peer that stops reading ends the pair instead of
//     holding its goroutines and descriptors (#13).
//  2. The handshake is bounded in time (HandshakeTimeout) and in size
//     (upstream.ReadFinal's head bounds), and bytes either side sent
//     early are forwarded before the splice, never lost.
//  3. An idle pair holds no copy buffer: on plain TCP a pump waits for
//     readability and borrows a pooled buffer only while data flows (#9).
//  4. Registry.CloseAll and Writer.GoAway return at once, whatever the
//     clients do: they hold no lock across a write, cut a write in
//     progress, and otherwise the splice sends the close frame within
//     goAwayTimeout.
package tunnel
