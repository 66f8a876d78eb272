// Package config defines previewgate's configuration file: its types, strict
// decoding with FILE:LINE:COL errors, defaults, ${ENV} expansion, validation,
// watching the file, and the atomically swapped live config.
//
// A *Config handed out by this package is never mutated afterwards: readers
// may keep it for the length of a request without locking.
package config

import (
	"net/netip"
	"time"
)

// Config is the whole file. The zero value is not valid; use Default or Load.
type Config struct {
	// Domains under which sandbox-<id>.<domain> hosts are served. The file
	// accepts a single string or a list under the key "domain".
	Domains StringList `yaml:"domain"`
	Listen  Listen     `yaml:"listen"`
	DataDir string     `yaml:"data_dir"` // Zero means ./previewgate-data.
	// Scope names this gateway's sandboxes: it adopts only containers (or
	// pods) made in the same scope, so replicas sharing this file share
	// them and two gateways on one engine never take each other's (#21).
	// Zero means none: such a gateway adopts only sandboxes of no scope.
	Scope           string               `yaml:"scope,omitempty"`
	AdminToken      Secret               `yaml:"admin_token"`
	TLS             TLS                  `yaml:"tls"`
	Auth            Auth                 `yaml:"auth"`
	Docker          Docker               `yaml:"docker"`
	Runtime         Runtime              `yaml:"runtime,omitempty"`
	DefaultTemplate string               `yaml:"default_template"`
	Templates       map[string]*Template `yaml:"templates"`
	Routes          []Route              `yaml:"routes"`
	Limits          Limits               `yaml:"limits"`
	TrustedProxies  []netip.Prefix       `yaml:"trusted_proxies"`
	Log             Log                  `yaml:"log"`
	// APITokens are extra bearer tokens for the admin listener, each
	// limited to scopes (see APIScope*), for backends that should not hold
	// the admin token (#16).
	APITokens []APIToken `yaml:"api_tokens,omitempty"`

	// Path is the file this config was read from; empty for the embedded default.
	Path string `yaml:"-"`

	// raw is the text each secret and template env value was written as,
	// before ${VAR} expansion (see ParseUpdate); nil when not parsed.
	raw map[string]string
	// rawSrc is, by the same keys, each hidden value's scalar as it stands
	// in the file (quotes included), so a REDACTED sent back restores the
	// file's own text (redact.go).
	rawSrc map[string]string
	// src is the text this config was parsed from; nil when not parsed.
	// GET /admin/config shows it, comments and layout kept (#24, 2).
	src []byte
	// expanded maps each value a ${VAR} expansion made to the text it
	// was made from, so that Locate never echoes one (unexpand).
	expanded map[string]string
}

// Listen holds listener addresses. Changing them needs a restart.
type Listen struct {
	HTTP  string `yaml:"http"`            // Zero means ":80" (":8080" on 127.0.0.1 in the embedded default).
	HTTPS string `yaml:"https,omitempty"` // Zero means ":443". Unused when tls.mode is off (and not shown then).
	Admin string `yaml:"admin"`           // Zero means "127.0.0.1:9090".
	// Metrics serves /metrics alone, without the admin token, for
	// Prometheus scrapers. Zero means off (/metrics stays on the admin
	// listener either way).
	Metrics string `yaml:"metrics"`
}

// TLS modes.
const (
	TLSOff        = "off"
	TLSACME       = "acme"
	TLSFiles      = "files"
	TLSSelfSigned = "self-signed"
)

// TLS selects how the HTTPS listener gets certificates.
type TLS struct {
	Mode     string `yaml:"mode"` // off | acme | files | self-signed. Zero means off.
	ACME     ACME   `yaml:"acme"`
	CertFile string `yaml:"cert_file"` // mode files
	KeyFile  string `yaml:"key_file"`  // mode files
}

// ACME strategies.
const (
	StrategyOnDemand = "on-demand"
	StrategyWildcard = "wildcard"
)

// ACME configures certificate issuance.
type ACME struct {
	Email    string  `yaml:"email"`
	CA       string  `yaml:"ca"`       // directory URL. Zero means Let's Encrypt production.
	CARoot   string  `yaml:"ca_root"`  // PEM file of the CA's root, for private ACME servers.
	Strategy string  `yaml:"strategy"` // on-demand | wildcard. Zero means on-demand.
	RFC2136  RFC2136 `yaml:"rfc2136"`  // strategy wildcard
	// Ask (on-demand): a URL asked GET ?domain=<host> before a certificate
	// is ordered for a host the gateway does not know (an id that does not
	// exist and was not announced); 200 approves, as Caddy's on_demand_tls
	// ask. Zero means only known and announced names get certificates.
	Ask string `yaml:"ask,omitempty"`
	// IssuePerHour (on-demand) bounds certificate orders in any hour,
	// renewals included (#24, 7). Zero means 20.
	IssuePerHour int `yaml:"issue_per_hour"`
}

// RFC2136 is a DNS server that accepts TSIG-signed dynamic updates (DNS-01).
type RFC2136 struct {
	Server     string `yaml:"server"` // host:port
	TSIGKey    string `yaml:"tsig_key"`
	TSIGSecret Secret `yaml:"tsig_secret"` // base64
	TSIGAlg    string `yaml:"tsig_alg"`    // Zero means hmac-sha256.
}

// Auth configures token verification.
type Auth struct {
	Audience       string   `yaml:"audience"` // Zero means "previewgate".
	Issuers        []string `yaml:"issuers"`  // Empty accepts any iss.
	Keys           []Key    `yaml:"keys"`
	JWKSURL        string   `yaml:"jwks_url"`
	AllowedOrigins []string `yaml:"allowed_origins"`
	// CookieName overrides the cookie name. Zero means "previewgate_token"
	// ("__Host-previewgate_token" over TLS).
	CookieName string `yaml:"cookie_name"`
	// LinkTTL is a share link's lifetime when its request names none;
	// zero means 1h. MaxLinkTTL bounds any; zero means 24h (#23).
	LinkTTL    Duration `yaml:"link_ttl"`
	MaxLinkTTL Duration `yaml:"max_link_ttl"`
}

// Key is one verification key. Exactly one of Secret and PublicKeyFile is set
// (PrivateKeyFile may accompany PublicKeyFile for minting).
type Key struct {
	KID            string `yaml:"kid"`
	Alg            string `yaml:"alg"` // HS256 HS384 HS512 RS256 ES256 EdDSA
	Secret         Secret `yaml:"secret"`
	PublicKeyFile  string `yaml:"public_key_file"`
	PrivateKeyFile string `yaml:"private_key_file"` // optional, lets `token mint` sign
}

// Docker configures the engine connection.
type Docker struct {
	Host    string `yaml:"host"`    // Zero means DOCKER_HOST or the default socket.
	Network string `yaml:"network"` // Zero means "previewgate".
	// Replicas is deprecated: a Docker engine is served by one gateway per
	// scope. 1 is accepted and has no effect; above 1 fails validation.
	Replicas int `yaml:"replicas"`
}

// Cold start behaviours.
const (
	ColdStartWaitingPage = "waiting-page"
	ColdStartBlock       = "block"
)

// Host header policies (#22): what identity the app sees.
const (
	// HostLocal presents the app as reached on localhost:<port>: Host
	// (plain requests and upgrades), and the Origin of an upgrade from
	// the preview's own origin. Stock dev servers (Vite's host check,
	// Next.js's dev-origin check) accept it. The default.
	HostLocal = "local"
	// HostPreserve sends the preview's own Host and Origin.
	HostPreserve = "preserve"
	// HostRewrite sends the container's address as Host (an IP: Vite
	// accepts it, Next.js's origin check does not). Kept unchanged for
	// configs that name it.
	HostRewrite = "rewrite"
)

// Idle actions.
const (
	IdleStop  = "stop"
	IdlePause = "pause"
)

// Template describes how to create a sandbox container.
type Template struct {
	Name  string `yaml:"-"` // the key in templates
	Image string `yaml:"image"`
	Port  int    `yaml:"port"` // Zero means 3000.
	// Ports are the ports reachable at <port>-sandbox-<id>.<domain> (#22);
	// Port is among them and also at sandbox-<id>. Empty means [Port].
	Ports         []int    `yaml:"ports,omitempty"`
	Cmd           []string `yaml:"cmd"`
	Env           Env      `yaml:"env"`
	Memory        ByteSize `yaml:"memory"` // Zero means 1GiB.
	CPUs          float64  `yaml:"cpus"`   // Zero means 1.
	Pids          int64    `yaml:"pids"`   // Zero means 512.
	Ready         Ready    `yaml:"ready"`
	IdleTimeout   Duration `yaml:"idle_timeout"`    // Zero means 15m.
	IdleAction    string   `yaml:"idle_action"`     // stop | pause. Zero means stop.
	MaxSocketIdle Duration `yaml:"max_socket_idle"` // Zero means 1h.
	RemoveAfter   Duration `yaml:"remove_after"`    // Zero means 24h.
	// MaxKeepUp bounds a sandbox's keep_up_until set through the admin
	// API (#23), from the time it is set. Zero means 4h.
	MaxKeepUp    Duration    `yaml:"max_keep_up"`
	Pool         int         `yaml:"pool"`
	ColdStart    string      `yaml:"cold_start"`  // Zero means waiting-page.
	HostHeader   string      `yaml:"host_header"` // Zero means local.
	Public       bool        `yaml:"public"`
	MaxBodyBytes ByteSize    `yaml:"max_body"`  // Zero means 100MiB.
	ReadOnly     bool        `yaml:"read_only"` // read-only root with a tmpfs at /tmp
	CapAdd       []string    `yaml:"cap_add"`
	Limits       *RateLimits `yaml:"limits"` // per-template overrides of the global rates
	// AllowEnv names the env variables a pre-create through the admin API
	// (PUT /admin/sandboxes/{id}) may set; others are refused (#16).
	AllowEnv []string `yaml:"allow_env,omitempty"`
	// Workspace keeps a directory of each sandbox across idle stops on the
	// Kubernetes runtime (a PersistentVolumeClaim per sandbox). Nil means
	// none: an idle stop loses the pod's files.
	Workspace *Workspace `yaml:"workspace,omitempty"`
}

// Workspace is a per-sandbox volume (#15, Kubernetes runtime only): made
// with the sandbox's first pod, mounted at Path in every pod of it, kept
// when an idle stop deletes the pod, and deleted with the sandbox (admin
// remove, remove_after).
type Workspace struct {
	Size         ByteSize `yaml:"size"`                    // requested storage, at least 1MiB
	Path         string   `yaml:"path"`                    // absolute mount path in the container
	StorageClass string   `yaml:"storage_class,omitempty"` // Zero means the cluster's default class.
}

// Ready is the readiness check: TCP connect to Port, then GET Path (if set)
// answering below 500, within Timeout.
type Ready struct {
	Path    string   `yaml:"path"`
	Timeout Duration `yaml:"timeout"` // Zero means 60s.
}

// Route maps a custom host to a sandbox or to a fixed upstream. Exactly one of
// Sandbox and Upstream is set.
type Route struct {
	Host     string `yaml:"host"`
	Sandbox  string `yaml:"sandbox"`
	Template string `yaml:"template"` // for Sandbox routes; zero means default_template
	Upstream URL    `yaml:"upstream"`
	Public   bool   `yaml:"public"`
}

// Rate is a token bucket: Rate per second, Burst at once. Zero Rate disables it.
type Rate struct {
	Rate  float64 `yaml:"rate"`
	Burst int     `yaml:"burst"`
}

// RateLimits are the request rates, globally or per template.
type RateLimits struct {
	PerIP      *Rate `yaml:"per_ip"`
	PerSandbox *Rate `yaml:"per_sandbox"`
	PerSubject *Rate `yaml:"per_subject"`
}

// Limits protect the gateway and the host.
type Limits struct {
	RateLimits               `yaml:",inline"`
	MaxConcurrentStarts      int      `yaml:"max_concurrent_starts"`                       // Zero means 4.
	StartQueue               int      `yaml:"start_queue"`                                 // waiting starts beyond the cap before 503. Zero means 64.
	StartQueueTimeout        Duration `yaml:"start_queue_timeout"`                         // Zero means 30s.
	MaxRunning               int      `yaml:"max_running"`                                 // Zero means 50.
	CreatesPerSubjectPerHour int      `yaml:"creates_per_subject_per_hour" zero:"default"` // Zero means half of MaxRunning; -1 means unlimited.
	// MaxRunningPerSubject bounds how many sandboxes one token subject
	// (sub) runs at once, across replicas (#24, 9). Zero means no bound.
	MaxRunningPerSubject int      `yaml:"max_running_per_subject"`
	WebSocketsPerSandbox int      `yaml:"websockets_per_sandbox"` // Zero means 64.
	WebSocketsPerIP      int      `yaml:"websockets_per_ip"`      // Zero means 32.
	MaxHeaderBytes       ByteSize `yaml:"max_header_bytes"`       // Zero means 64KiB.
	ReadHeaderTimeout    Duration `yaml:"read_header_timeout"`    // Zero means 10s.
	IdleConnTimeout      Duration `yaml:"idle_timeout"`           // client keep-alive. Zero means 120s.
	BodyTimeout          Duration `yaml:"body_timeout"`           // longest wait for request body data, and the grace before body_min_rate. Zero means 30s.
	BodyMinRate          ByteSize `yaml:"body_min_rate"`          // bytes per second of waiting a request body must average. Zero means 1KiB.
	WriteTimeout         Duration `yaml:"write_timeout"`          // longest a write to a client may wait for the client to take bytes. Zero means 30s.
	ConnectionsPerIP     int      `yaml:"connections_per_ip"`     // open client connections per IP (IPv6: per /64). Zero means 256.
	MaxConnections       int      `yaml:"max_connections"`        // open client connections in all. Zero means derived from RLIMIT_NOFILE.
	LimiterEntries       int      `yaml:"limiter_entries"`        // LRU size per limiter. Zero means 100000.
}

// Log configures logging.
type Log struct {
	Level  string `yaml:"level"`  // debug | info | warn | error. Zero means info.
	Format string `yaml:"format"` // auto | text | json. Zero means auto.
	Access bool   `yaml:"access"` // one line per request
}

// Duration is a time.Duration written as "90s", "15m", "1h30m".
type Duration time.Duration

// D returns d as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// ByteSize is a size written as 512, "64KiB", "1GiB", "100MB".
type ByteSize int64

// Env is a template's environment. Its values are redacted when the
// config is shown: env often carries API keys and database URLs.
type Env map[string]string

// Secret is a string that is redacted when the config is shown.
type Secret string

// StringList accepts a single string or a list of strings.
type StringList []string

// URL is an absolute http or https URL; empty means unset.
type URL string
