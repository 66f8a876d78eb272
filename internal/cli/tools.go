package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/previewgate/previewgate/auth"
	"github.com/previewgate/previewgate/certs"
	"github.com/previewgate/previewgate/config"
	"github.com/previewgate/previewgate/internal/app"
)

// The small subcommands: config validate, token mint, ca export, healthcheck.

// validate checks one file: its errors on stderr (FILE:LINE:COL: message,
// one a line) and the error errReported, or "FILE: ok" on stdout. The
// file is its argument, else --config, else $PREVIEWGATE_CONFIG, as every
// command that reads the file finds it; none is a usage error.
func validate(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("config validate", validateSynopsis, args, stdout, stderr)
	var cfgPath string
	configFlag(fs, &cfgPath, "config `file` to check when no FILE is given", "give FILE")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	path, err := validatePath(fs, cfgPath)
	if err != nil {
		return err
	}
	cfg, err := config.Load(path)
	if err == nil {
		err = app.CheckFiles(cfg) // what serve would refuse beyond the text
	}
	if err != nil {
		fmt.Fprintln(stderr, err)
		return errReported
	}
	fmt.Fprintln(stdout, path+": ok")
	warnMintKeys(cfg, stderr)
	app.WarnMissingImages(cfg, path, stderr)
	return nil
}

const validateSynopsis = "config validate [FILE]   (FILE, else --config, else $" + configEnv + "; exit 0 if valid; else FILE:LINE:COL: message and exit 1)"

// validatePath is the file config validate checks: fs's one argument,
// else cfgPath (--config, default $PREVIEWGATE_CONFIG). More than one
// argument, an argument beside a different --config, or no file at all is
// a usage error (exit 2).
func validatePath(fs *flag.FlagSet, cfgPath string) (string, error) {
	switch {
	case fs.NArg() > 1:
		fs.Usage()
		return "", errFlags
	case fs.NArg() == 1 && isSet(fs, "config") && cfgPath != fs.Arg(0):
		// Checking one and ignoring the other would say "ok" of a file
		// the user did not mean.
		return "", usageError(fmt.Sprintf("config validate: FILE %s and --config %s name different files: give one", fs.Arg(0), cfgPath))
	case fs.NArg() == 1:
		return fs.Arg(0), nil
	case cfgPath == "":
		fmt.Fprintf(fs.Output(), "config validate: no file to check: give FILE, --config FILE or $%s\n", configEnv)
		fs.Usage()
		return "", errFlags
	}
	return cfgPath, nil
}

// warnMintKeys warns, without failing validation, about private keys
// that only token mint reads and that it could not load.
func warnMintKeys(cfg *config.Config, stderr io.Writer) {
	var list config.ErrorList
	if errors.As(cfg.Locate(auth.MintKeyProblems(cfg.Auth)), &list) {
		for _, e := range list {
			fmt.Fprintf(stderr, "%s:%d:%d: warning: %s (token mint cannot sign with this key; the gateway does not read it)\n", e.File, e.Line, e.Col, e.Msg)
		}
	}
}

func mint(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("token mint", "token mint --sandbox ID [flags]", args, stdout, stderr)
	sandbox := fs.String("sandbox", "", "sandbox id, or * for all (required)")
	ttl := fs.Duration("ttl", 15*time.Minute, "token lifetime")
	tpl := fs.String("template", "", "template to create the sandbox from")
	sub := fs.String("subject", "cli", "who the token is for (sub)")
	kid := fs.String("kid", "", "key to sign with (default: the first key that can sign)")
	url := fs.Bool("url", false, "print the preview URL to open (with the token) instead of the bare token")
	var cfgPath string
	configFlag(fs, &cfgPath, "config `file` whose auth keys sign the token", "the development key in "+config.Default().DataDir+"/"+app.DevKeyFile+", relative to the current directory")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *sandbox == "" || (*sandbox != "*" && !config.ValidID(*sandbox)) {
		return errors.New("token mint: --sandbox must be a valid sandbox id or *")
	}
	switch {
	case *url && *sandbox == "*":
		// A script reading stdout as the URL would get the bare token.
		return usageError("token mint: --url needs one sandbox id: a token for * has no single preview URL")
	case *ttl <= 0:
		// auth.Mint would sign its default lifetime instead.
		return usageError("token mint: --ttl must be a positive duration such as 15m")
	}
	cfg, key, devKey, err := mintKey(cfgPath, *kid)
	if err != nil && fromConfigEnv(fs, cfgPath) {
		return configEnvError(cfgPath, err)
	}
	if err != nil {
		return err
	}
	if *tpl != "" && cfg.Templates[*tpl] == nil {
		// Its first request would answer 400 unknown_template.
		return fmt.Errorf("token mint: --template %s: no such template in the config (templates: %s)",
			*tpl, strings.Join(slices.Sorted(maps.Keys(cfg.Templates)), ", "))
	}
	iss := ""
	if len(cfg.Auth.Issuers) > 0 {
		iss = cfg.Auth.Issuers[0]
	}
	tok, err := auth.Mint(key, auth.MintOptions{Subject: *sub, Sandbox: *sandbox, Template: *tpl,
		Issuer: iss, Audience: cfg.Auth.Audience, TTL: *ttl})
	if err != nil {
		return fmt.Errorf("token mint: %w", err)
	}
	switch {
	case devKey != "":
		fmt.Fprintf(stderr, "token mint: signed with the development key in %s\n", devKey)
	case fromConfigEnv(fs, cfgPath):
		// Which file signed is not on the command line: say it.
		fmt.Fprintf(stderr, "token mint: signed with key %s of %s ($%s)\n", key.KID, cfgPath, configEnv)
	}
	// The token alone on stdout stays what scripts read; the URL to open
	// goes beside it on stderr, or to stdout with --url (#24, 5).
	if *sandbox == "*" {
		fmt.Fprintln(stdout, tok)
		return nil
	}
	link := app.PreviewBase(cfg, *sandbox) + "?access_token=" + tok
	if *url {
		fmt.Fprintln(stdout, link)
		return nil
	}
	fmt.Fprintln(stdout, tok)
	fmt.Fprintf(stderr, "open: %s\n", link)
	return nil
}

// mintKey returns the config and key token mint signs with: from the file
// at path, or without one the development default's key, kept in its data
// dir by serve (relative to the working directory, as serve keeps it;
// devKey is then its file, said once the token is signed). Environment
// variables the command does not need (admin_token's) may be unset.
func mintKey(path, kid string) (_ *config.Config, _ config.Key, devKey string, _ error) {
	if path == "" {
		cfg := config.Default()
		key, err := app.ReadDevKey(cfg.DataDir)
		if errors.Is(err, fs.ErrNotExist) {
			return nil, config.Key{}, "", fmt.Errorf("token mint: no --config nor $%s, and no development key in %s: run `%s serve` (the development default) in this directory first, or pass --config FILE",
				configEnv, filepath.Join(cfg.DataDir, app.DevKeyFile), invokedAs())
		}
		if err != nil {
			return nil, config.Key{}, "", fmt.Errorf("token mint: %w", err)
		}
		if kid != "" && kid != key.KID {
			return nil, config.Key{}, "", fmt.Errorf("token mint: the development key is %q, not %q", key.KID, kid)
		}
		app.ReadDevListen(cfg)
		abs, _ := filepath.Abs(filepath.Join(cfg.DataDir, app.DevKeyFile))
		return cfg, key, abs, nil
	}
	cfg, err := loadPartial(path)
	if err != nil {
		return nil, config.Key{}, "", err
	}
	key, err := signingKey(cfg, kid)
	return cfg, key, "", err
}

// signingKey picks the key named kid, or the first one able to sign.
func signingKey(cfg *config.Config, kid string) (config.Key, error) {
	var kids []string
	for _, k := range cfg.Auth.Keys {
		kids = append(kids, k.KID)
		if kid != "" && k.KID != kid {
			continue
		}
		if k.Secret != "" || k.PrivateKeyFile != "" {
			return k, nil
		}
		if kid != "" {
			return config.Key{}, fmt.Errorf("token mint: key %s cannot sign (it needs a secret or private_key_file)", kid)
		}
	}
	if kid != "" {
		return config.Key{}, fmt.Errorf("token mint: no key %q in the config (kids: %s)", kid, strings.Join(kids, ", "))
	}
	return config.Key{}, errors.New("token mint: no key in the config can sign (need a secret or private_key_file)")
}

func caExport(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("ca export", "ca export [--config FILE]", args, stdout, stderr)
	var cfgPath string
	configFlag(fs, &cfgPath, "config `file` whose data_dir holds the CA", "the development default's "+config.Default().DataDir)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	cfg := config.Default()
	if cfgPath != "" {
		var err error
		cfg, err = config.Load(cfgPath)
		if err != nil && fromConfigEnv(fs, cfgPath) {
			return configEnvError(cfgPath, err)
		}
		if err != nil {
			return err
		}
	}
	pem, err := certs.ExportCA(cfg.DataDir)
	if err != nil {
		return fmt.Errorf("ca export: %w", err)
	}
	_, err = stdout.Write(pem)
	return err
}

// healthcheck asks the admin listener's /healthz: at --url, else at
// listen.admin of the config file (--config, default $PREVIEWGATE_CONFIG,
// which the image sets), else at the development default's address.
func healthcheck(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("healthcheck", "healthcheck [--config FILE] [--url URL]   (exit 0 if the admin /healthz answers 200)", args, stdout, stderr)
	url := fs.String("url", "", "health endpoint (default: /healthz on --config's listen.admin if given, else on $"+adminEnv+" if set, else on $PREVIEWGATE_CONFIG's listen.admin)")
	var cfgPath string
	configFlag(fs, &cfgPath, "config `file` whose listen.admin to ask", config.DevListenAdmin)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *url == "" {
		addr, _, err := findAdmin(fs, cfgPath)
		if err != nil {
			return fmt.Errorf("healthcheck: %w", err)
		}
		*url = "http://" + dialAddr(addr) + "/healthz"
	}
	c := &http.Client{Timeout: 3 * time.Second}
	resp, err := c.Get(*url)
	if err != nil {
		return fmt.Errorf("healthcheck: %w", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("healthcheck: %s answered %s", *url, resp.Status)
	}
	return nil
}
