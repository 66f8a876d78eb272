// Command previewgate is a preview gateway: it terminates TLS for
// sandbox-<id>.<domain>, checks access tokens, wakes the sandbox's
// container and reverse-proxies to it. See README.md.
//
// This file is all the root package holds: the command line is
// internal/cli, the gateway it serves is built by internal/app.
package main

import (
	"os"

	"github.com/previewgate/previewgate/internal/cli"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	os.Exit(cli.Main(os.Args, version, os.Stdout, os.Stderr))
}
