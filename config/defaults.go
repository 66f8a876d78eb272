package config

import (
	"fmt"
	"reflect"
	"time"
)

// Development defaults used by Default, the embedded configuration.
const (
	DevListenHTTP  = "127.0.0.1:8080"
	DevListenAdmin = "127.0.0.1:9090"
	DevDomain      = "localhost"
	DemoTemplate   = "demo"
	// DemoImage is built locally by the gateway (no registry needed).
	DemoImage = "previewgate-demo:latest"
)

// Defaults that packages below config read rather than define (#21: one
// definition of each default). Everything else a file leaves zero is
// filled by ApplyDefaults; DefaultLimits and DefaultTemplateSettings hand
// out its values to callers that build their settings without a file.
const (
	DefaultAudience = "previewgate"
	DefaultNetwork  = "previewgate"
	// DefaultSandboxNamespace holds the sandboxes when the gateway runs
	// outside a cluster and runtime.kubernetes.namespace is unset.
	DefaultSandboxNamespace = "previewgate-sandboxes"
	// DefaultGatewayLabel selects the gateway's pods for the sandboxes'
	// NetworkPolicy.
	DefaultGatewayLabel  = "app.kubernetes.io/name=previewgate"
	DefaultRunAsUser     = 1000
	DefaultActivityEvery = 10 * time.Second
)

// DefaultLimits returns the limits of a file that sets none.
func DefaultLimits() Limits {
	var c Config
	c.ApplyDefaults()
	return c.Limits
}

// DefaultTemplateSettings returns a template's settings where a file sets
// none (port, resources, ready timeout, idle, ...).
func DefaultTemplateSettings() Template {
	var t Template
	t.applyDefaults()
	return t
}

// Default returns the embedded development configuration: plain HTTP on
// 127.0.0.1:8080, domain localhost, one "demo" template. The caller supplies
// the signing key (a fresh one per run) through Auth.Keys.
func Default() *Config {
	c := &Config{
		Domains: StringList{DevDomain},
		Listen:  Listen{HTTP: DevListenHTTP, Admin: DevListenAdmin},
		TLS:     TLS{Mode: TLSOff},
		Auth:    Auth{Audience: DefaultAudience, Issuers: []string{"previewgate-dev"}},
		Templates: map[string]*Template{
			DemoTemplate: {Image: DemoImage, Ready: Ready{Path: "/", Timeout: Duration(30 * time.Second)}},
		},
		DefaultTemplate: DemoTemplate,
	}
	c.ApplyDefaults()
	return c
}

// ApplyDefaults fills every zero field that has a documented default, so
// consumers never interpret zero values themselves. It is idempotent.
func (c *Config) ApplyDefaults() {
	setDefault(&c.Listen.HTTP, ":80")
	setDefault(&c.Listen.HTTPS, ":443")
	setDefault(&c.Listen.Admin, "127.0.0.1:9090")
	setDefault(&c.DataDir, "previewgate-data")
	setDefault(&c.TLS.Mode, TLSOff)
	setDefault(&c.TLS.ACME.Strategy, StrategyOnDemand)
	// 20 an hour: a public CA's weekly per-domain budget (Let's Encrypt:
	// 50 certificates per registered domain) lasts a few hours of abuse,
	// not minutes, while a team's new previews are rarely more (#24, 7).
	setDefault(&c.TLS.ACME.IssuePerHour, 20)
	setDefault(&c.TLS.ACME.CA, "https://acme-v02.api.letsencrypt.org/directory")
	setDefault(&c.TLS.ACME.RFC2136.TSIGAlg, "hmac-sha256")
	setDur(&c.Auth.LinkTTL, time.Hour)
	setDur(&c.Auth.MaxLinkTTL, 24*time.Hour)
	setDefault(&c.Auth.Audience, DefaultAudience)
	setDefault(&c.Docker.Network, DefaultNetwork)
	setDefault(&c.Docker.Replicas, 1)
	if c.DefaultTemplate == "" && len(c.Templates) == 1 {
		for name := range c.Templates {
			c.DefaultTemplate = name // a single template is the default
		}
	}
	for name, t := range c.Templates {
		if t == nil {
			t = &Template{}
			c.Templates[name] = t
		}
		t.Name = name
		t.applyDefaults()
	}
	l := &c.Limits
	setDefault(&l.MaxConcurrentStarts, 4)
	setDefault(&l.StartQueue, 64)
	setDur(&l.StartQueueTimeout, 30*time.Second)
	setDefault(&l.MaxRunning, 50)
	// On by default (#13): otherwise one subject with a sbx "*" token can
	// take every max_running slot. Half of max_running, so that within an
	// hour one subject can take at most half of the slots. Unlimited is an
	// explicit -1.
	setDefault(&l.CreatesPerSubjectPerHour, max(1, l.MaxRunning/2))
	setDefault(&l.WebSocketsPerSandbox, 64)
	setDefault(&l.WebSocketsPerIP, 32)
	setDefault(&l.MaxHeaderBytes, 64<<10)
	setDur(&l.ReadHeaderTimeout, 10*time.Second)
	setDur(&l.IdleConnTimeout, 120*time.Second)
	setDur(&l.BodyTimeout, 30*time.Second)
	setDur(&l.WriteTimeout, 30*time.Second)
	setDefault(&l.BodyMinRate, 1<<10)
	setDefault(&l.ConnectionsPerIP, 256)
	// MaxConnections stays zero: the listeners derive it from the
	// descriptor limit of the process that serves (gateway.NewConnLimiter).
	setDefault(&l.LimiterEntries, 100_000)
	setDefault(&c.Log.Level, "info")
	setDefault(&c.Log.Format, "auto")
}

// A number written as 0 whose 0 the defaults then replace (a template's
// idle_timeout, limits.max_running, auth.link_ttl, ...) reads like "off"
// or "never", as a rate's 0 does, yet ran as the default: idle_timeout: 0
// stopped sandboxes after 15m, max_keep_up: 0 still let a backend keep one
// up 4h. Written out, such a 0 is therefore an error; leaving the key out
// (or "key:") still means the default. A field tagged `zero:"default"`
// (creates_per_subject_per_hour) documents its 0 as the default and takes
// it. The decoder notes each number written as 0 (decodeMapping), and the
// defaults say which they replace: no list of keys to keep in step.

// writtenZero is a number the file writes as 0: its key's path and its
// field in the decoded config.
type writtenZero struct {
	path string
	v    reflect.Value
}

// refuseDefaultedZeros reports each written 0 that ApplyDefaults, run
// just before, replaced, with the default it would have meant.
func (d *decoder) refuseDefaultedZeros() {
	for _, z := range d.zeros {
		if !z.v.IsZero() {
			d.fail(fmt.Sprintf("0 is not off or unlimited here: it would mean the default (%v); leave the key out for that, or write the value you want", z.v.Interface()), z.path)
		}
	}
}

func (t *Template) applyDefaults() {
	setDefault(&t.Port, 3000)
	if len(t.Ports) == 0 {
		t.Ports = []int{t.Port}
	}
	setDefault(&t.Memory, 1<<30)
	setDefault(&t.CPUs, 1)
	setDefault(&t.Pids, 512)
	setDur(&t.Ready.Timeout, 60*time.Second)
	setDur(&t.IdleTimeout, 15*time.Minute)
	setDefault(&t.IdleAction, IdleStop)
	setDur(&t.MaxSocketIdle, time.Hour)
	setDur(&t.RemoveAfter, 24*time.Hour)
	setDur(&t.MaxKeepUp, 4*time.Hour)
	setDefault(&t.ColdStart, ColdStartWaitingPage)
	setDefault(&t.HostHeader, HostLocal)
	setDefault(&t.MaxBodyBytes, 100<<20)
}

// Template returns the named template, or the default template when name is
// empty; nil if there is none.
func (c *Config) Template(name string) *Template {
	setDefault(&name, c.DefaultTemplate)
	return c.Templates[name]
}

func setDefault[T comparable](p *T, v T) {
	var zero T
	if *p == zero {
		*p = v
	}
}

func setDur(p *Duration, v time.Duration) { setDefault(p, Duration(v)) }
