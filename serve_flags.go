package main

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/previewgate/previewgate/config"
)

// serveFlags are serve's command line. The listener and domain flags win
// over the development default and over a file, also on its reloads.
type serveFlags struct {
	config                     string // "" for the development default
	configFromEnv              bool   // $PREVIEWGATE_CONFIG chose config, not --config
	http, https, admin, domain string // "" keeps the config's
	labels                     labelFlag
}

// adminEnv, when set, moves the admin listener for serve and tells
// healthcheck where it is: in a container the health check runs as a
// separate process that cannot see serve's flags.
const adminEnv = "PREVIEWGATE_ADMIN_ADDR"

// envAdminAddr returns $PREVIEWGATE_ADMIN_ADDR, "" if unset. A value that
// is no listen address is an error that does not repeat it: a token pasted
// into the wrong variable must not end up in a log.
func envAdminAddr() (string, error) {
	v := os.Getenv(adminEnv)
	if v == "" {
		return "", nil
	}
	if err := config.CheckAddr(v); err != nil {
		return "", fmt.Errorf("$%s is not a listen address such as 127.0.0.1:9090 (its value is not shown)", adminEnv)
	}
	return v, nil
}

// parseServeFlags parses and checks serve's flags.
func parseServeFlags(args []string, stdout, stderr io.Writer) (serveFlags, error) {
	fs := newFlagSet("serve", "serve [flags]   (no --config nor $"+configEnv+": the embedded development default)", args, stdout, stderr)
	f := serveFlags{labels: labelFlag{}}
	configFlag(fs, &f.config, "config `file`", "the embedded development setup")
	fs.StringVar(&f.http, "http", "", "preview listener `address` (listen.http; development default "+config.DevListenHTTP+")")
	fs.StringVar(&f.https, "https", "", "HTTPS preview listener `address` (listen.https; used when tls.mode is not off)")
	fs.StringVar(&f.admin, "admin", "", "admin listener `address` (listen.admin; default $"+adminEnv+", which healthcheck reads too; development default "+config.DevListenAdmin+")")
	fs.StringVar(&f.domain, "domain", "", "serve sandbox-<id>.`NAME` (replaces the config's domains; development default "+config.DevDomain+")")
	fs.Var(f.labels, "label", "extra `key=value` label on every container, network and image this gateway creates (repeatable); it then also only adopts containers carrying them; the development default adds previewgate.instance=<id kept in its data dir>")
	if err := parseFlags(fs, args); err != nil {
		return f, err
	}
	f.configFromEnv = fromConfigEnv(fs, f.config)
	if fs.NArg() > 0 {
		return f, usageError(fmt.Sprintf("serve: unexpected argument %q (flags only; see serve --help)", fs.Arg(0)))
	}
	if f.admin == "" {
		addr, err := envAdminAddr()
		if err != nil {
			return f, usageError("serve: " + err.Error())
		}
		f.admin = addr
	}
	for _, a := range []struct{ name, v string }{{"http", f.http}, {"https", f.https}, {"admin", f.admin}} {
		if a.v == "" {
			continue
		}
		if err := config.CheckAddr(a.v); err != nil {
			return f, usageError(fmt.Sprintf("serve --%s: %v", a.name, err))
		}
	}
	if f.domain != "" {
		d, ok := config.NormalizeHost(f.domain)
		if !ok || !config.ValidDomain(d) {
			return f, usageError(fmt.Sprintf("serve --domain %q: want a DNS name such as preview.example.com", f.domain))
		}
		f.domain = d
	}
	return f, nil
}

// apply puts the flags' settings into c.
func (f serveFlags) apply(c *config.Config) {
	for _, s := range []struct {
		v string
		p *string
	}{{f.http, &c.Listen.HTTP}, {f.https, &c.Listen.HTTPS}, {f.admin, &c.Listen.Admin}} {
		if s.v != "" {
			*s.p = s.v
		}
	}
	if f.domain != "" {
		c.Domains = config.StringList{f.domain}
	}
}

// labelFlag collects repeated --label key=value flags.
type labelFlag map[string]string

func (l labelFlag) String() string { return fmt.Sprint(map[string]string(l)) }

func (l labelFlag) Set(v string) error {
	k, val, ok := strings.Cut(v, "=")
	if !ok || k == "" {
		return fmt.Errorf("label %q: want key=value", v)
	}
	l[k] = val
	return nil
}
