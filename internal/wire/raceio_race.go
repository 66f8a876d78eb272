//go:build race

package wire

// raceBuild makes rawConn read and write through internal/poll, which
// tells the race detector that bytes written happen before they are read.
// rawConn's own system calls cannot say so to a peer using net, so under
// the race detector every socket handoff in the tests would look racy.
// .ci/run also runs the raw path's tests without -race.
const raceBuild = true
