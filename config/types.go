package config

import (
	"fmt"
	"math"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// String formats d without trailing zero units: "15m", "1h30m", "90s".
func (d Duration) String() string {
	s := time.Duration(d).String()
	if strings.HasSuffix(s, "m0s") {
		s = s[:len(s)-2]
	}
	if strings.HasSuffix(s, "h0m") {
		s = s[:len(s)-2]
	}
	return s
}

// MarshalYAML writes d as a duration string.
func (d Duration) MarshalYAML() (any, error) { return d.String(), nil }

// parseScalar reads a Go duration ("90s", "15m", "1h30m"), never negative;
// a bare number needs a unit, but for 0.
func (d *Duration) parseScalar(s, tag string) error {
	if tag == intTag && s == "0" {
		*d = 0
		return nil
	}
	if tag == intTag || tag == floatTag {
		return fmt.Errorf("duration %s needs a unit (e.g. %ss)", s, s)
	}
	v, err := time.ParseDuration(strings.TrimSpace(s))
	switch {
	case err != nil:
		return fmt.Errorf("invalid duration %q (use e.g. 90s, 15m, 1h30m)", s)
	case v < 0:
		return fmt.Errorf("invalid duration %q: must not be negative", s)
	}
	*d = Duration(v)
	return nil
}

// sizeUnits are the size units, lower-cased: per power, K, Ki and KiB
// (Docker's, Kubernetes' and IEC's) count 1024s and KB 1000s.
var sizeUnits = func() map[string]int64 {
	u := map[string]int64{"": 1, "b": 1}
	bin, dec := int64(1), int64(1)
	for _, p := range []string{"k", "m", "g", "t"} {
		bin, dec = bin<<10, dec*1000
		u[p], u[p+"i"], u[p+"ib"], u[p+"b"] = bin, bin, bin, dec
	}
	return u
}()

// ParseByteSize parses a size: a non-negative number with an optional unit.
// B, KB, MB, GB, TB are powers of 1000; KiB, MiB, GiB, TiB (and the Docker
// style K, M, G, T, and the Kubernetes style Ki, Mi, Gi, Ti) are powers of
// 1024. Units are case-insensitive.
func ParseByteSize(s string) (ByteSize, error) {
	t := strings.TrimSpace(s)
	i := 0
	for i < len(t) && (t[i] >= '0' && t[i] <= '9' || t[i] == '.') {
		i++
	}
	num, unit := t[:i], strings.ToLower(strings.TrimSpace(t[i:]))
	mult, ok := sizeUnits[unit]
	if num == "" || !ok {
		return 0, fmt.Errorf("invalid size %q (use e.g. 512MiB, 1GiB, 100MB or a number of bytes)", s)
	}
	if !strings.Contains(num, ".") {
		n, err := strconv.ParseInt(num, 10, 64)
		if err != nil || n > math.MaxInt64/mult {
			return 0, fmt.Errorf("invalid size %q: too large", s)
		}
		return ByteSize(n * mult), nil
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil {
		return 0, fmt.Errorf("invalid size %q (use e.g. 512MiB, 1GiB, 100MB or a number of bytes)", s)
	}
	f *= float64(mult)
	if f >= math.MaxInt64 {
		return 0, fmt.Errorf("invalid size %q: too large", s)
	}
	return ByteSize(f), nil
}

// String formats b with the largest binary unit that divides it exactly.
func (b ByteSize) String() string {
	for _, u := range []struct {
		name string
		n    int64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if b != 0 && int64(b)%u.n == 0 {
			return strconv.FormatInt(int64(b)/u.n, 10) + u.name
		}
	}
	return strconv.FormatInt(int64(b), 10)
}

// MarshalYAML writes b as "1GiB" when a unit fits, else as a number of bytes.
func (b ByteSize) MarshalYAML() (any, error) {
	if s := b.String(); strings.HasSuffix(s, "B") {
		return s, nil
	}
	return int64(b), nil
}

func (b *ByteSize) parseScalar(s, tag string) error {
	if tag == floatTag {
		return fmt.Errorf("invalid size %s: a number of bytes must be a whole number", s)
	}
	v, err := ParseByteSize(s)
	if err != nil {
		return err
	}
	*b = v
	return nil
}

// Redacted is what a non-empty Secret shows when marshalled, printed or logged.
const Redacted = "REDACTED"

// String hides the secret; use string(s) to get the value.
func (s Secret) String() string {
	if s == "" {
		return ""
	}
	return Redacted
}

// GoString hides the secret from %#v.
func (s Secret) GoString() string { return strconv.Quote(s.String()) }

// MarshalYAML hides the secret: marshalled configs never carry it.
func (s Secret) MarshalYAML() (any, error) { return s.String(), nil }

// MarshalYAML hides every non-empty value: marshalled configs never
// carry them.
func (e Env) MarshalYAML() (any, error) {
	out := make(map[string]string, len(e))
	for k, v := range e {
		out[k] = Secret(v).String()
	}
	return out, nil
}

// ParseURL checks that s is an absolute http or https URL with a host and
// no fragment.
func ParseURL(s string) (URL, error) {
	u, err := url.Parse(s)
	if err != nil {
		return "", fmt.Errorf("invalid URL %q", s)
	}
	if u.User != nil {
		s = u.Redacted() // keep a password out of error messages and logs
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return "", fmt.Errorf("invalid URL %q: must be absolute http:// or https://", s)
	}
	if u.Host == "" || u.Hostname() == "" {
		return "", fmt.Errorf("invalid URL %q: no host", s)
	}
	if u.Fragment != "" || strings.Contains(s, "#") {
		return "", fmt.Errorf("invalid URL %q: fragment not allowed", s)
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return "", fmt.Errorf("invalid URL %q: port out of range", s)
		}
	}
	return URL(u.String()), nil
}

func (u *URL) parseScalar(s, tag string) error {
	if tag == nullTag || s == "" {
		*u = ""
		return nil
	}
	v, err := ParseURL(s)
	if err != nil {
		return err
	}
	*u = v
	return nil
}

// parseScalar reads a single string as a list of one.
func (l *StringList) parseScalar(s, _ string) error {
	*l = StringList{s}
	return nil
}

// ParsePrefix parses a CIDR ("10.0.0.0/8") or a bare IP, which means that
// single address (/32 or /128). The prefix is returned masked.
func ParsePrefix(s string) (netip.Prefix, error) {
	s = strings.TrimSpace(s)
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return netip.Prefix{}, fmt.Errorf("invalid CIDR %q", s)
		}
		return p.Masked(), nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("invalid CIDR or IP %q", s)
	}
	a = a.Unmap()
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// YAML core tags, as node.tag carries them.
const (
	strTag   = "!!str"
	intTag   = "!!int"
	floatTag = "!!float"
	boolTag  = "!!bool"
	nullTag  = "!!null"
	tsTag    = "!!timestamp"
	mergeTag = "!!merge"
)
