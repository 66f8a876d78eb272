package config

import (
	"errors"
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"
)

func (d *decoder) validateTemplates(c *Config) {
	for _, name := range slices.Sorted(maps.Keys(c.Templates)) {
		t, tp := c.Templates[name], "templates."+name
		if !validName(name) {
			d.failKey(fmt.Sprintf("invalid template name %q (letters, digits, _ . -)", name), tp)
		}
		if t.Image == "" {
			d.fail("template needs an image", tp+".image", tp)
		}
		if t.Port < 1 || t.Port > 65535 {
			d.fail(fmt.Sprintf("port %d out of range 1-65535", t.Port), tp+".port")
		}
		seenPort := make(map[int]bool, len(t.Ports))
		for _, p := range t.Ports {
			switch {
			case p != t.Port && (p < 1 || p > 65535):
				// port itself is checked above: without a ports key,
				// ports is [port], and a second error would point at 1:1.
				d.fail(fmt.Sprintf("ports: %d out of range 1-65535", p), tp+".ports")
			case seenPort[p]:
				d.fail(fmt.Sprintf("ports: %d listed twice", p), tp+".ports")
			}
			seenPort[p] = true
		}
		if len(t.Ports) > 0 && !seenPort[t.Port] {
			d.fail(fmt.Sprintf("ports must include port (%d), the one sandbox-<id> reaches", t.Port), tp+".ports")
		}
		for k := range t.Env {
			if k == "" || strings.ContainsAny(k, "=\x00") {
				d.fail(fmt.Sprintf("invalid environment variable name %q", k), tp+".env")
			}
		}
		for _, k := range t.AllowEnv {
			if k == "" || strings.ContainsAny(k, "=\x00") {
				d.fail(fmt.Sprintf("invalid environment variable name %q", k), tp+".allow_env")
			}
		}
		if t.Memory < 6<<20 {
			d.fail("memory must be at least 6MiB (Docker's minimum)", tp+".memory")
		}
		if t.CPUs < 0.01 || t.CPUs > 1024 {
			d.fail(fmt.Sprintf("cpus %g out of range 0.01-1024", t.CPUs), tp+".cpus")
		}
		if t.Pids < 1 {
			d.fail(fmt.Sprintf("pids must be positive, got %d", t.Pids), tp+".pids")
		}
		if t.Ready.Path != "" && !strings.HasPrefix(t.Ready.Path, "/") {
			d.fail(fmt.Sprintf("ready path %q must start with /", t.Ready.Path), tp+".ready.path")
		}
		if t.IdleAction != IdleStop && t.IdleAction != IdlePause {
			d.fail(fmt.Sprintf("invalid idle_action %q (want stop or pause)", t.IdleAction), tp+".idle_action")
		}
		if t.ColdStart != ColdStartWaitingPage && t.ColdStart != ColdStartBlock {
			d.fail(fmt.Sprintf("invalid cold_start %q (want waiting-page or block)", t.ColdStart), tp+".cold_start")
		}
		if t.HostHeader != HostLocal && t.HostHeader != HostPreserve && t.HostHeader != HostRewrite {
			d.fail(fmt.Sprintf("invalid host_header %q (want local, preserve or rewrite)", t.HostHeader), tp+".host_header")
		}
		if t.Pool < 0 {
			d.fail(fmt.Sprintf("pool must not be negative, got %d", t.Pool), tp+".pool")
		}
		for i, capName := range t.CapAdd {
			if err := checkCapability(capName); err != nil {
				d.fail(err.Error(), fmt.Sprintf("%s.cap_add[%d]", tp, i))
			}
		}
		if t.Limits != nil {
			d.validateRates(t.Limits, tp+".limits")
		}
		d.validateWorkspace(c, t, tp)
	}
	if c.DefaultTemplate != "" && c.Templates[c.DefaultTemplate] == nil {
		d.fail(fmt.Sprintf("template %q is not defined in templates", c.DefaultTemplate), "default_template")
	}
}

// validateWorkspace checks t's workspace (#15): a volume only the
// Kubernetes runtime makes (a stopped Docker container keeps its files
// anyway), and no warm pool with it: a pool pod starts before it knows
// which sandbox's volume to mount.
func (d *decoder) validateWorkspace(c *Config, t *Template, tp string) {
	w, wp := t.Workspace, tp+".workspace"
	if w == nil {
		return
	}
	if c.Runtime.Kind != RuntimeKubernetes {
		d.fail("workspace needs runtime kind kubernetes (a stopped Docker container keeps its files without one)", wp)
	}
	if w.Size < 1<<20 {
		d.fail(fmt.Sprintf("workspace size must be at least 1MiB, got %s", w.Size), wp+".size", wp)
	}
	if err := checkMountPath(w.Path, t.ReadOnly); err != nil {
		d.fail(err.Error(), wp+".path", wp)
	}
	if w.StorageClass != "" && !ValidHostname(w.StorageClass) {
		d.fail(fmt.Sprintf("invalid storage_class %q (a DNS subdomain: lowercase letters, digits, - and .)", w.StorageClass), wp+".storage_class", wp)
	}
	if t.Pool > 0 {
		d.fail("pool cannot be used with a workspace: a warm pod starts before it knows which sandbox's volume to mount", tp+".pool", wp)
	}
}

// checkMountPath accepts a clean absolute path that is not the root, not
// in a kernel filesystem and not the /tmp a read-only root gets.
func checkMountPath(p string, readOnly bool) error {
	switch {
	case p == "":
		return errors.New("workspace needs a path (where the volume is mounted, e.g. /workspace)")
	case len(p) > 1024 || strings.IndexFunc(p, func(r rune) bool { return r < 0x20 || r == 0x7f }) >= 0:
		return fmt.Errorf("invalid workspace path %q", p)
	case !strings.HasPrefix(p, "/") || path.Clean(p) != p:
		return fmt.Errorf("workspace path %q must be absolute and clean (like /workspace)", p)
	case p == "/":
		return errors.New("workspace path must not be / (mount it on a directory)")
	case readOnly && p == "/tmp":
		return errors.New("workspace path /tmp is taken by the tmpfs of read_only")
	}
	for _, k := range []string{"/proc", "/sys", "/dev"} {
		if p == k || strings.HasPrefix(p, k+"/") {
			return fmt.Errorf("workspace path %q is in %s, a kernel filesystem", p, k)
		}
	}
	return nil
}

// Capabilities is what a template's cap_add may add back (#13): Docker's
// default set, which Docker considers safe inside a container, less
// NET_RAW (raw sockets let a sandbox spoof traffic on the shared bridge).
// Anything else, and ALL, would let code in a sandbox reach past it: load
// kernel modules, mount, trace or read other processes, change the
// network, the clock or security policy.
var Capabilities = []string{
	"AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD",
	"NET_BIND_SERVICE", "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT",
}

// isolationBreaking names the capabilities refused with a reason rather
// than as merely unknown.
var isolationBreaking = []string{
	"ALL", "AUDIT_CONTROL", "AUDIT_READ", "BLOCK_SUSPEND", "BPF", "CHECKPOINT_RESTORE",
	"DAC_READ_SEARCH", "IPC_LOCK", "IPC_OWNER", "LEASE", "LINUX_IMMUTABLE", "MAC_ADMIN",
	"MAC_OVERRIDE", "NET_ADMIN", "NET_BROADCAST", "NET_RAW", "PERFMON", "SYS_ADMIN",
	"SYS_BOOT", "SYS_MODULE", "SYS_NICE", "SYS_PACCT", "SYS_PTRACE", "SYS_RAWIO",
	"SYS_RESOURCE", "SYS_TIME", "SYS_TTY_CONFIG", "SYSLOG", "WAKE_ALARM",
}

// checkCapability accepts a name from Capabilities, with or without CAP_.
func checkCapability(name string) error {
	bare := strings.TrimPrefix(name, "CAP_")
	switch {
	case slices.Contains(Capabilities, bare):
		return nil
	case bare == "ALL":
		return fmt.Errorf("capability ALL is not allowed: it would give sandboxes every capability (allowed: %s)", strings.Join(Capabilities, " "))
	case slices.Contains(isolationBreaking, bare):
		return fmt.Errorf("capability %s is not allowed: it would let a sandbox break out of its isolation (allowed: %s)", bare, strings.Join(Capabilities, " "))
	}
	return fmt.Errorf("invalid capability %q (allowed: %s)", name, strings.Join(Capabilities, " "))
}
