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
// text places them at 1:1.
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
	for _, p := range problems {
		d.fail(p.Err.Error(), p.Path)
	}
	d.errs.sort()
	return d.errs
}
