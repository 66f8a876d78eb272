package config

import "time"

// Development defaults used by Default, the embedded configuration.
const (
	DevListenHTTP  = "127.0.0.1:8080"
	DevListenAdmin = "127.0.0.1:9090"
	DevDomain      = "localhost"
	DemoTemplate   = "demo"
	// DemoImage is built locally by the gateway (no registry needed).
	DemoImage = "previewgate-demo:latest"
)

// Default returns the embedded development configuration: plain HTTP on
// 127.0.0.1:8080, domain localhost, one "demo" template. The caller supplies
// the signing key (a fresh one per run) through Auth.Keys.
func Default() *Config {
	c := &Config{
		Domains: StringList{DevDomain},
		Listen:  Listen{HTTP: DevListenHTTP, Admin: DevListenAdmin},
		TLS:     TLS{Mode: TLSOff},
		Auth:    Auth{Audience: "previewgate", Issuers: []string{"previewgate-dev"}},
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
	if c.Listen.HTTP == "" {
		c.Listen.HTTP = ":80"
	}
	if c.Listen.HTTPS == "" {
		c.Listen.HTTPS = ":443"
	}
	if c.Listen.Admin == "" {
		c.Listen.Admin = "127.0.0.1:9090"
	}
	if c.DataDir == "" {
		c.DataDir = "previewgate-data"
	}
	if c.TLS.Mode == "" {
		c.TLS.Mode = TLSOff
	}
	if c.TLS.ACME.Strategy == "" {
		c.TLS.ACME.Strategy = StrategyOnDemand
	}
	if c.TLS.ACME.CA == "" {
		c.TLS.ACME.CA = "https://acme-v02.api.letsencrypt.org/directory"
	}
	if c.TLS.ACME.RFC2136.TSIGAlg == "" {
		c.TLS.ACME.RFC2136.TSIGAlg = "hmac-sha256"
	}
	if c.Auth.Audience == "" {
		c.Auth.Audience = "previewgate"
	}
	if c.Docker.Network == "" {
		c.Docker.Network = "previewgate"
	}
	if c.Docker.Replicas == 0 {
		c.Docker.Replicas = 1
	}
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
	setInt(&l.MaxConcurrentStarts, 4)
	setInt(&l.StartQueue, 64)
	setDur(&l.StartQueueTimeout, 30*time.Second)
	setInt(&l.MaxRunning, 50)
	// On by default (#13): otherwise one subject with a sbx "*" token can
	// take every max_running slot. Half of max_running, so that within an
	// hour one subject can take at most half of the slots. Unlimited is an
	// explicit -1.
	setInt(&l.CreatesPerSubjectPerHour, max(1, l.MaxRunning/2))
	setInt(&l.WebSocketsPerSandbox, 64)
	setInt(&l.WebSocketsPerIP, 32)
	if l.MaxHeaderBytes == 0 {
		l.MaxHeaderBytes = 64 << 10
	}
	setDur(&l.ReadHeaderTimeout, 10*time.Second)
	setDur(&l.IdleConnTimeout, 120*time.Second)
	setDur(&l.BodyTimeout, 30*time.Second)
	setDur(&l.WriteTimeout, 30*time.Second)
	if l.BodyMinRate == 0 {
		l.BodyMinRate = 1 << 10
	}
	setInt(&l.ConnectionsPerIP, 256)
	// MaxConnections stays zero: the listeners derive it from the
	// descriptor limit of the process that serves (gateway.NewConnLimiter).
	setInt(&l.LimiterEntries, 100_000)
	if c.Log.Level == "" {
		c.Log.Level = "info"
	}
	if c.Log.Format == "" {
		c.Log.Format = "auto"
	}
}

func (t *Template) applyDefaults() {
	setInt(&t.Port, 3000)
	if len(t.Ports) == 0 {
		t.Ports = []int{t.Port}
	}
	if t.Memory == 0 {
		t.Memory = 1 << 30
	}
	if t.CPUs == 0 {
		t.CPUs = 1
	}
	if t.Pids == 0 {
		t.Pids = 512
	}
	setDur(&t.Ready.Timeout, 60*time.Second)
	setDur(&t.IdleTimeout, 15*time.Minute)
	if t.IdleAction == "" {
		t.IdleAction = IdleStop
	}
	setDur(&t.MaxSocketIdle, time.Hour)
	setDur(&t.RemoveAfter, 24*time.Hour)
	if t.ColdStart == "" {
		t.ColdStart = ColdStartWaitingPage
	}
	if t.HostHeader == "" {
		t.HostHeader = HostLocal
	}
	if t.MaxBodyBytes == 0 {
		t.MaxBodyBytes = 100 << 20
	}
}

// Template returns the named template, or the default template when name is
// empty; nil if there is none.
func (c *Config) Template(name string) *Template {
	if name == "" {
		name = c.DefaultTemplate
	}
	return c.Templates[name]
}

func setInt(p *int, v int) {
	if *p == 0 {
		*p = v
	}
}

func setDur(p *Duration, v time.Duration) {
	if *p == 0 {
		*p = Duration(v)
	}
}
