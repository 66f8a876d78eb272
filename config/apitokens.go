package config

import (
	"fmt"
	"slices"
)

// APIToken is a scoped token for the admin listener.
type APIToken struct {
	Token  Secret   `yaml:"token"`  // at least 16 characters
	Scopes []string `yaml:"scopes"` // APIScope* values
}

// Scopes an API token can hold.
const (
	// APIScopeSandboxes: list, pre-create, read logs of, stop and remove
	// sandboxes; not the config, not metrics.
	APIScopeSandboxes = "sandboxes"
)

func (d *decoder) validateAPITokens(c *Config) {
	for i := range c.APITokens {
		t, tp := &c.APITokens[i], fmt.Sprintf("api_tokens[%d]", i)
		if len(t.Token) < 16 {
			d.fail("api token is too short (use at least 16 random characters)", tp+".token", tp)
		}
		if t.Token != "" && t.Token == c.AdminToken {
			d.fail("api token must differ from admin_token", tp+".token")
		}
		if len(t.Scopes) == 0 {
			d.fail("api token needs scopes (e.g. [sandboxes])", tp+".scopes", tp)
		}
		for _, s := range t.Scopes {
			if !slices.Contains([]string{APIScopeSandboxes}, s) {
				d.fail(fmt.Sprintf("unknown scope %q (want sandboxes)", s), tp+".scopes")
			}
		}
	}
}
