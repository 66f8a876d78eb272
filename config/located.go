package config

// FileProblem is a problem with a file the config names (a key, a
// certificate), found by the package that reads such files (auth,
// certs): config reads no file but its own, yet an operator wants every
// reason the gateway would refuse a config from one `config validate`.
type FileProblem struct {
	Path string // the YAML path of the key naming the file, as in errors ("auth.keys[1].public_key_file")
	Err  error
}

// Locate returns problems as an ErrorList placed at their keys in the
// text c was read from ("FILE:LINE:COL: path: message"), like
// validation's errors; nil if there are none. A config not read from
// text places them at 1:1. A file path a ${VAR} expansion made (maybe a
// key pasted in place of a path) is shown as the text it was made from,
// never as itself, as in every config error (unexpand): the admin API
// shows these to whoever sent the text, a failed reload logs them.
func (c *Config) Locate(problems []FileProblem) error {
	if len(problems) == 0 {
		return nil
	}
	d := &decoder{file: c.Path, locs: map[string]loc{}}
	if c.src != nil {
		// Positions do not depend on ${VAR} values; any will do.
		if _, dd, err := decodeOnly(c.Path, c.src, func(string) (string, bool) { return "set", true }); err == nil {
			d.locs = dd.locs
		}
	}
	hide := make(map[string]string)
	for _, f := range c.filePaths() {
		if raw, ok := c.expanded[f]; ok {
			hide[f] = raw
		}
	}
	for _, p := range problems {
		d.fail(unexpand(p.Err.Error(), hide, func(s string) string { return s }), p.Path)
	}
	d.errs.sort()
	return d.errs
}

// filePaths are the values of the settings that name files, those
// FileProblems are about.
func (c *Config) filePaths() []string {
	out := []string{c.TLS.CertFile, c.TLS.KeyFile, c.TLS.ACME.CARoot}
	for _, k := range c.Auth.Keys {
		out = append(out, k.PublicKeyFile, k.PrivateKeyFile)
	}
	return out
}
