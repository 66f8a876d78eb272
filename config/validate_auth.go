package config

import (
	"fmt"
	"net/url"
	"slices"
	"strings"
)

func (d *decoder) validateAuth(c *Config) {
	a := &c.Auth
	for i := range a.Issuers {
		if a.Issuers[i] == "" {
			d.fail("empty issuer", fmt.Sprintf("auth.issuers[%d]", i))
		}
	}
	if len(a.Keys) == 0 && a.JWKSURL == "" {
		d.fail("auth needs at least one of keys and jwks_url: without them no token can be verified", "auth", "")
	}
	kids := map[string]bool{}
	for i := range a.Keys {
		k, kp := &a.Keys[i], fmt.Sprintf("auth.keys[%d]", i)
		if k.KID == "" {
			d.fail("key needs a kid", kp+".kid", kp)
		} else if kids[k.KID] {
			d.fail(fmt.Sprintf("duplicate kid %q", k.KID), kp+".kid")
		}
		kids[k.KID] = true
		switch {
		case k.Alg == "":
			d.fail(fmt.Sprintf("key needs an alg (one of %s)", strings.Join(Algorithms, " ")), kp)
			continue
		case !slices.Contains(Algorithms, k.Alg):
			d.fail(fmt.Sprintf("invalid alg %q (want one of %s)", k.Alg, strings.Join(Algorithms, " ")), kp+".alg")
			continue
		}
		if minLen := HMACMinLen(k.Alg); minLen > 0 {
			switch {
			case k.Secret == "":
				d.fail(fmt.Sprintf("alg %s needs a secret", k.Alg), kp+".secret", kp+".alg")
			case len(k.Secret) < minLen:
				// Never echo the secret, only its length.
				d.fail(fmt.Sprintf("secret for %s must be at least %d bytes, got %d", k.Alg, minLen, len(k.Secret)), kp+".secret")
			}
			if k.PublicKeyFile != "" || k.PrivateKeyFile != "" {
				d.fail(fmt.Sprintf("alg %s uses a shared secret, not key files", k.Alg), kp+".public_key_file", kp+".private_key_file")
			}
		} else {
			if k.Secret != "" {
				d.fail(fmt.Sprintf("alg %s uses public_key_file, not a secret", k.Alg), kp+".secret")
			}
			if k.PublicKeyFile == "" {
				d.fail(fmt.Sprintf("alg %s needs public_key_file", k.Alg), kp+".alg")
			}
		}
	}
	if a.JWKSURL != "" {
		if _, err := ParseURL(a.JWKSURL); err != nil {
			d.fail(err.Error(), "auth.jwks_url")
		}
	}
	for i, o := range a.AllowedOrigins {
		if err := checkOrigin(o); err != nil {
			d.fail(err.Error(), fmt.Sprintf("auth.allowed_origins[%d]", i))
		}
	}
	if a.CookieName != "" && strings.IndexFunc(a.CookieName, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' || r == '.')
	}) >= 0 {
		d.fail(fmt.Sprintf("invalid cookie_name %q (letters, digits, _ - . only)", a.CookieName), "auth.cookie_name")
	}
	if lt, mt := a.LinkTTL.D(), a.MaxLinkTTL.D(); lt > mt { // defaults applied
		d.fail(fmt.Sprintf("link_ttl %s is longer than max_link_ttl %s", lt, mt), "auth.link_ttl")
	}
}

// checkOrigin accepts a browser origin: scheme://host[:port], nothing more.
func checkOrigin(o string) error {
	u, err := url.Parse(o)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" ||
		(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return fmt.Errorf("invalid origin %q (want scheme://host[:port])", o)
	}
	return nil
}
