package config

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// The rules below are the only definition of each: config validation,
// routing (gateway), certificates (certs), tokens (auth) and the runtime
// (sandboxmgr) all call them, so they cannot diverge (#14).

// MaxIDLen is the longest sandbox id: "sandbox-" plus the id must fit one
// 63-byte DNS label.
const MaxIDLen = 55

// ValidID reports whether id is a valid sandbox id: 1–55 lowercase letters,
// digits and inner hyphens. Such an id is always safe in a DNS label, a
// container name and a Docker label.
func ValidID(id string) bool { return len(id) <= MaxIDLen && dnsLabel(id) }

// ValidScope reports whether s may name a gateway's scope (config key
// scope): a DNS label, so it is a valid Docker and Kubernetes label value.
func ValidScope(s string) bool { return dnsLabel(s) }

// ValidHostname reports whether h is a lowercase DNS hostname, such as a
// domain a config may serve under: dot-separated labels of letters, digits
// and inner hyphens, at most 253 bytes, no trailing dot and no wildcard.
// It is also a Kubernetes object name (an RFC 1123 subdomain).
func ValidHostname(h string) bool {
	if len(h) > 253 {
		return false
	}
	for _, label := range strings.Split(h, ".") {
		if !dnsLabel(label) {
			return false
		}
	}
	return true
}

// dnsLabel reports whether s is one lowercase DNS label: 1-63 letters,
// digits and inner hyphens.
func dnsLabel(s string) bool {
	if len(s) == 0 || len(s) > 63 || s[0] == '-' || s[len(s)-1] == '-' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// SandboxPrefix starts the first label of every sandbox host:
// sandbox-<id>.<domain>.
const SandboxPrefix = "sandbox-"

// NormalizeHost returns host lower-cased without one trailing dot; ok is
// false if host has a byte outside printable ASCII. Such a host is refused
// before any case folding: Unicode lower-casing could turn it into a
// served name (the Kelvin sign lower-cases to "k"), SNI carries A-labels
// only, and HTTP/2's :authority arrives without the checks net/http
// applies to an HTTP/1.1 Host header.
func NormalizeHost(host string) (h string, ok bool) {
	upper := false
	for i := 0; i < len(host); i++ {
		c := host[i]
		if c <= ' ' || c >= 0x7f {
			return "", false
		}
		upper = upper || ('A' <= c && c <= 'Z')
	}
	h = strings.TrimSuffix(host, ".")
	if upper { // printable ASCII without A-Z is its own lower case
		h = strings.ToLower(h)
	}
	return h, true
}

// MaxLabelLen is the longest DNS label.
const MaxLabelLen = 63

// SandboxPortFromHost reads host, as NormalizeHost returns it, as
// sandbox-<id>.<domain> for one of domains (lower-case, as a validated
// config holds them), or as a port host, <port>-sandbox-<id>.<domain>
// (#22): one label, so the one wildcard certificate covers it, with the
// port in decimal (1–65535, no leading zero) first; a label that starts
// with a digit is never a plain sandbox-<id>. port is 0 for a plain
// sandbox host, -1 for a port label whose port is not valid. ok: it is
// one, with a valid id. malformed: the shape is a sandbox host's but the
// id or port is not valid, or the label is longer than MaxLabelLen (an id
// longer than PortIDMax(port) has no port hosts). Neither: not a sandbox
// host.
func SandboxPortFromHost(host string, domains []string) (id string, port int, ok, malformed bool) {
	for _, d := range domains {
		label, found := strings.CutSuffix(host, "."+d)
		if !found || d == "" || strings.IndexByte(label, '.') >= 0 {
			continue // another host under d, or under a subdomain of d
		}
		if label != "" && label[0] >= '0' && label[0] <= '9' {
			digits, rest, cut := strings.Cut(label, "-")
			id, sandbox := strings.CutPrefix(rest, SandboxPrefix)
			p, err := strconv.Atoi(digits)
			if !cut || !sandbox || err != nil || len(digits) > 5 {
				continue // "3000-foo": not a sandbox host
			}
			if digits[0] == '0' || p < 1 || p > 65535 {
				return id, -1, false, true
			}
			if !ValidID(id) || len(label) > MaxLabelLen {
				return id, p, false, true
			}
			return id, p, true, false
		}
		rest, sandbox := strings.CutPrefix(label, SandboxPrefix)
		if !sandbox {
			continue
		}
		if !ValidID(rest) {
			return "", 0, false, true
		}
		return rest, 0, true, false
	}
	return "", 0, false, false
}

// PortIDMax is the longest id that has a port host for port: the label
// <port>-sandbox-<id> must fit MaxLabelLen. With a 4-digit port ids of up
// to 50 characters have one, with a 5-digit port 49.
func PortIDMax(port int) int {
	return MaxLabelLen - len(strconv.Itoa(port)) - 1 - len(SandboxPrefix)
}

// Algorithms are the JWT algorithms a key in auth.keys may name.
var Algorithms = []string{"HS256", "HS384", "HS512", "RS256", "ES256", "EdDSA"}

// JWKSAlgorithms are the asymmetric JWT algorithms: those accepted from a
// JWKS (never HMAC, since a JWKS is public) and those auth checks a public
// or private key against.
var JWKSAlgorithms = []string{"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}

// hmacMinLen is the shortest secret per HMAC algorithm: RFC 7518 §3.2
// requires a key at least as long as the hash output.
var hmacMinLen = map[string]int{"HS256": 32, "HS384": 48, "HS512": 64}

// IsHMAC reports whether alg is a JWT algorithm keyed by a shared secret.
func IsHMAC(alg string) bool {
	_, ok := hmacMinLen[alg]
	return ok
}

// HMACMinLen is the shortest secret alg accepts (0 if alg is no HMAC
// algorithm): the one rule for config validation, token checks and
// minting.
func HMACMinLen(alg string) int { return hmacMinLen[alg] }

// TSIGAlgorithms are the accepted tsig_alg values (RFC 8945 names).
// HMAC-MD5 is left out on purpose: MD5 is broken.
var TSIGAlgorithms = []string{"hmac-sha1", "hmac-sha224", "hmac-sha256", "hmac-sha384", "hmac-sha512"}

// TSIGAlgorithm returns the algorithm name for tsig_alg, lower-cased and
// without a trailing dot; empty means hmac-sha256.
func TSIGAlgorithm(alg string) (string, error) {
	name := strings.ToLower(strings.TrimSuffix(alg, "."))
	switch {
	case name == "":
		return "hmac-sha256", nil
	case name == "hmac-md5":
		return "", fmt.Errorf("tsig_alg %s is not allowed: MD5 is broken (use hmac-sha256)", alg)
	case !slices.Contains(TSIGAlgorithms, name):
		return "", fmt.Errorf("invalid tsig_alg %q (want one of %s)", alg, strings.Join(TSIGAlgorithms, ", "))
	}
	return name, nil
}
