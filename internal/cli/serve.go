package cli

import (
	"fmt"
	"io"
	"strings"

	"github.com/previewgate/previewgate/config"
	"github.com/previewgate/previewgate/internal/app"
)

// serve runs the gateway (internal/app) as its flags and the
// environment say.
func serve(args []string, stdout, stderr io.Writer) error {
	o, err := parseServeFlags(args, stdout, stderr)
	if err != nil {
		return err
	}
	o.Version, o.Invoked, o.Stdout, o.Stderr = version, invokedAs(), stdout, stderr
	return app.Serve(o)
}

// parseServeFlags parses and checks serve's flags: the options they say.
func parseServeFlags(args []string, stdout, stderr io.Writer) (app.Options, error) {
	fs := newFlagSet("serve", "serve [flags]   (no --config nor $"+configEnv+": the embedded development default)", args, stdout, stderr)
	labels := labelFlag{}
	f := app.Options{Labels: labels}
	configFlag(fs, &f.ConfigPath, "config `file`", "the embedded development setup")
	fs.StringVar(&f.Overrides.HTTP, "http", "", "preview listener `address` (listen.http; development default "+config.DevListenHTTP+")")
	fs.StringVar(&f.Overrides.HTTPS, "https", "", "HTTPS preview listener `address` (listen.https; used when tls.mode is not off)")
	fs.StringVar(&f.Overrides.Admin, "admin", "", "admin listener `address` (listen.admin; default $"+adminEnv+", which healthcheck reads too; development default "+config.DevListenAdmin+")")
	fs.StringVar(&f.Overrides.Domain, "domain", "", "serve sandbox-<id>.`NAME` (replaces the config's domains; development default "+config.DevDomain+")")
	fs.Var(labels, "label", "extra `key=value` label on every container, network and image this gateway creates (repeatable); it then also only adopts containers carrying them; the development default adds previewgate.instance=<id kept in its data dir>")
	if err := parseFlags(fs, args); err != nil {
		return f, err
	}
	if path := f.ConfigPath; fromConfigEnv(fs, path) {
		f.ExplainLoad = func(err error) error { return configEnvError(path, err) }
	}
	if fs.NArg() > 0 {
		return f, usageError(fmt.Sprintf("serve: unexpected argument %q (flags only; see serve --help)", fs.Arg(0)))
	}
	o := &f.Overrides
	if o.Admin == "" {
		addr, err := envAdminAddr()
		if err != nil {
			return f, usageError("serve: " + err.Error())
		}
		o.Admin = addr
	}
	for _, a := range []struct{ name, v string }{{"http", o.HTTP}, {"https", o.HTTPS}, {"admin", o.Admin}} {
		if a.v == "" {
			continue
		}
		if err := config.CheckAddr(a.v); err != nil {
			return f, usageError(fmt.Sprintf("serve --%s: %v", a.name, err))
		}
	}
	if o.Domain != "" {
		d, ok := config.NormalizeHost(o.Domain)
		if !ok || !config.ValidHostname(d) {
			return f, usageError(fmt.Sprintf("serve --domain %q: want a DNS name such as preview.example.com", o.Domain))
		}
		o.Domain = d
	}
	return f, nil
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
