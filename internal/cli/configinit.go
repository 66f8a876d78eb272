package cli

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/previewgate/previewgate/internal/app"
)

// starterConfig is what `config init` writes: the development default as
// a file to grow from, every line commented. {{SECRET}}, {{ADMIN}}, {{API}}
// and {{SCOPE}} are replaced with generated values.
const starterConfig = `# previewgate config, written by "previewgate config init".
# Every key: docs/configuration.md. After an edit, check it with
#   previewgate config validate FILE
# A running gateway reloads this file when it changes; listen.*, data_dir,
# scope, docker.*, tls.* and log.level/format need a restart (a reload says
# which and keeps them).
#
# This file holds secrets (the signing key, the admin and API tokens): keep it
# private, or move them into the environment as ${VARIABLES}.

# Previews are served at http://sandbox-<id>.<domain>/. "localhost" needs no
# DNS: browsers resolve *.localhost to this machine.
domain: localhost

listen:
  http: "127.0.0.1:8080"      # previews (with TLS: ACME challenges and the redirect)
  https: "127.0.0.1:8443"     # previews over TLS; unused while tls.mode is off
  admin: "127.0.0.1:9090"     # admin API, /healthz, /metrics; keep it private
  # metrics: "127.0.0.1:9091" # /metrics without the admin token, for Prometheus

data_dir: previewgate-data    # certificates and state, relative to the working directory

# This gateway's sandboxes are labelled with its scope, and it adopts only
# sandboxes of the same scope: replicas sharing this file share them, and
# another gateway on the same engine never takes them over (generated).
scope: {{SCOPE}}

# Bearer token for the admin API on listen.admin (generated): the config,
# the admin page, everything. Keep it for people.
admin_token: "{{ADMIN}}"

# Bearer tokens for backends (generated): the sandboxes scope opens the
# /admin/sandboxes calls only (create or wake, list, logs, stop, remove,
# settings, share links), never the config. Give this one to your backend, not the admin token.
api_tokens:
  - {token: "{{API}}", scopes: [sandboxes]}

tls:
  mode: "off"                 # off | self-signed | acme | files (docs/tls.md)

auth:
  audience: previewgate
  issuers: [app-backend]      # the "iss" your backend puts in its tokens
  keys:
    # HS256 with a shared secret (generated). Your backend signs with the
    # same secret (docs/auth.md), or write secret: "${PREVIEWGATE_JWT_SECRET}"
    # to read it from the environment.
    - {kid: k1, alg: HS256, secret: "{{SECRET}}"}
  # Share links (POST /admin/sandboxes/{id}/links, docs/links.md): the
  # lifetime of one that names none, and the longest one may ask for.
  link_ttl: 1h
  max_link_ttl: 24h

docker:
  network: previewgate        # the bridge sandboxes join; made if missing

default_template: demo        # for tokens without a "tpl" claim
templates:
  demo:
    # The demo app: the gateway builds this image from its own binary when
    # the engine lacks it. Put your dev server's image here (nothing is
    # pulled: it must exist on the engine).
    image: previewgate-demo:latest
    port: 3000                # the port the app listens on in the container
    ready: {path: /, timeout: 30s}
    # local: the app sees Host localhost:<port> (and that Origin on its
    # WebSockets), which stock Vite and Next.js dev servers accept; the
    # real host is in X-Forwarded-Host. preserve: the preview's own host.
    host_header: local
    idle_timeout: 15m         # stop after this long without traffic
    max_keep_up: 4h           # PATCH /admin/sandboxes/{id} may keep it up this far ahead
    memory: 1GiB
    cpus: 1.0
`

// configInit writes a starter config to the file named by args (default
// previewgate.yaml; "-" for stdout). It never overwrites a file.
func configInit(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("config init", "config init [FILE]   (default previewgate.yaml; - for stdout; never overwrites)", args, stdout, stderr)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 1 {
		fs.Usage()
		return errFlags
	}
	path := "previewgate.yaml"
	if fs.NArg() == 1 {
		path = fs.Arg(0)
	}
	data := starterText()
	if path == "-" {
		_, err := io.WriteString(stdout, data)
		return err
	}
	err := app.WriteNew(path, []byte(data))
	if errors.Is(err, os.ErrExist) {
		err = fmt.Errorf("%s exists; not overwritten", path)
	}
	if err != nil {
		return fmt.Errorf("config init: %w", err)
	}
	fmt.Fprintf(stdout, `wrote %[1]s (with a generated signing key, admin token and backend API token; keep it private)

  %[2]s serve --config %[1]s
  %[2]s token mint --config %[1]s --sandbox demo --url
`, path, invokedAs())
	return nil
}

// starterText is starterConfig with fresh secrets: an HS256 secret of 32
// random bytes (43 base64url characters, used as they are, like any
// configured secret), bearer tokens of 24, and a scope of "pg-" and 12
// random hex digits.
func starterText() string {
	scope := make([]byte, 6)
	rand.Read(scope)
	return strings.NewReplacer("{{SECRET}}", random(32), "{{ADMIN}}", random(24), "{{SCOPE}}", fmt.Sprintf("pg-%x", scope),
		"{{API}}", random(24)).Replace(starterConfig)
}

// random is n random bytes, base64url.
func random(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}
