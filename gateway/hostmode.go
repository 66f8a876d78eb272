package gateway

import (
	"net/http"

	"github.com/previewgate/previewgate/config"
	"github.com/previewgate/previewgate/internal/outbound"
)

// hostModeFor returns the identity of the app that tpl's host_header
// asks for on r (#22): the local mode (the default) presents the request
// as the app would see it on its own machine, preserve the preview's own
// Host, rewrite the container's address. internal/outbound applies it
// to the outbound head on every path, and maps a redirect back.
func hostModeFor(tpl *config.Template, r *http.Request) outbound.Host {
	switch tpl.HostHeader {
	case config.HostRewrite:
		return outbound.Host{Mode: outbound.Rewrite}
	case config.HostPreserve:
		return outbound.Host{Mode: outbound.Preserve}
	}
	return outbound.Host{Mode: outbound.Local, Preview: r.Host}
}
