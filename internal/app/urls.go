package app

import (
	"fmt"
	"io"
	"net"
	"strings"

	"github.com/previewgate/previewgate/config"
)

// listenURL is the URL of a listener at addr ("host:port" or ":port") for
// host (empty: the address's own host, or 127.0.0.1 for all interfaces),
// without the scheme's default port.
func listenURL(scheme, addr, host string) string {
	h, port, err := net.SplitHostPort(addr)
	if err != nil {
		return scheme + "://" + addr
	}
	if host == "" {
		host = h
		if host == "" || host == "0.0.0.0" || host == "::" {
			host = "127.0.0.1"
		}
	}
	if scheme == "http" && port == "80" || scheme == "https" && port == "443" {
		if strings.Contains(host, ":") {
			return scheme + "://[" + host + "]"
		}
		return scheme + "://" + host
	}
	return scheme + "://" + net.JoinHostPort(host, port)
}

// PreviewBase is where sandbox id's preview opens under cfg: over https
// when TLS is on. With TLS off on a real domain, TLS ends at a proxy in
// front (config validation requires trusted_proxies there: browsers
// would drop the Secure cookie over plain http), so the URL is that
// proxy's, https on its default port, not listen.http's port behind it
// (deploy/kubernetes: :8080 in the pod). A localhost domain is plain
// http on listen.http.
func PreviewBase(cfg *config.Config, id string) string {
	host := config.SandboxPrefix + id + "." + cfg.Domains[0]
	if cfg.TLS.Mode == config.TLSOff {
		if !config.IsLocalDomain(cfg.Domains[0]) {
			return "https://" + host + "/"
		}
		return listenURL("http", cfg.Listen.HTTP, host) + "/"
	}
	return listenURL("https", cfg.Listen.HTTPS, host) + "/"
}

// printListeners names every listener's URL at start, the admin page
// included (#24, 5: the printed admin address answered 404 at /).
func printListeners(w io.Writer, cfg *config.Config) {
	fmt.Fprintf(w, "\nPreviews:   %s (one per sandbox <id>)\n", PreviewBase(cfg, "<id>"))
	if cfg.TLS.Mode == config.TLSOff && !config.IsLocalDomain(cfg.Domains[0]) {
		fmt.Fprintf(w, "            through the TLS proxy in front, to %s here\n", listenURL("http", cfg.Listen.HTTP, ""))
	}
	switch cfg.TLS.Mode {
	case config.TLSOff:
	case config.TLSACME:
		fmt.Fprintf(w, "            %s answers ACME challenges and redirects to https\n", listenURL("http", cfg.Listen.HTTP, ""))
	default:
		fmt.Fprintf(w, "            %s redirects to https\n", listenURL("http", cfg.Listen.HTTP, ""))
	}
	admin := listenURL("http", cfg.Listen.Admin, "")
	fmt.Fprintf(w, "Admin page: %s/ui/\n", admin)
	// /admin/ itself is no page (404): name a call that answers.
	fmt.Fprintf(w, "Admin API:  %s/admin/sandboxes (docs/api.md; health: %s/healthz, metrics: %s/metrics)\n", admin, admin, admin)
	if cfg.Listen.Metrics != "" {
		fmt.Fprintf(w, "Metrics:    %s/metrics (no token)\n", listenURL("http", cfg.Listen.Metrics, ""))
	}
	fmt.Fprintln(w)
}
