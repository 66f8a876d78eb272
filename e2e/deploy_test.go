package e2e

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"net"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/goccy/go-yaml"

	"github.com/previewgate/previewgate/config"
)

// The files in deploy/ as an operator applies them (#26): the shipped
// ConfigMap had `secret: ${PREVIEWGATE_JWT_SECRET}` unquoted inside a flow
// mapping, which is invalid YAML, and every replica crash-looped on it
// while no test read the file. These tests read every file there and load
// each config the way the gateway will, with the variables the manifests
// pass in set to secrets that unquoted YAML would break on.

// deploySecrets are values an operator may well put in the Secret or the
// environment: `openssl rand -hex`, a password manager's punctuation,
// YAML's flow and comment indicators, quotes, a literal ${...} and
// surrounding spaces. Each variable gets the value plus its own name, so
// two variables never share a value and every value is long enough for
// an HS256 key (32 bytes) and an admin token (16).
var deploySecrets = []struct{ name, value string }{
	{"hex", "6f1c0e9a4b2d8c7e5a3f1b9d0c2e4a6f8b1d3c5e7a9f0b2d4c6e8a1f3b5d7c9e"},
	{"flow indicators", "s3cr3t, with} {flow] [indicators, and: colons #not-a-comment"},
	{"quotes and escapes", `it's "quoted" \n \\ 'single' ${NOT_A_VAR} $HOME %s`},
	{"yaml punctuation", "- ? : ~ & * ! | > ' \" % @ ` #, }{][ ---"},
	{"surrounding spaces", "  padded secret with spaces 0123456789  "},
}

func deploySecret(value, env string) string { return value + "/" + env }

// TestDeployFilesParse reads every file in deploy/ as (multi-document)
// YAML, and checks that the kustomization lists exactly the manifests next
// to it, each with a kind and a name.
func TestDeployFilesParse(t *testing.T) {
	var files []string
	err := filepath.WalkDir("deploy", func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			files = append(files, p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no files in deploy/")
	}
	for _, f := range files {
		if ext := filepath.Ext(f); ext != ".yaml" {
			t.Errorf("%s: got a %q file, want only .yaml in deploy/ (add a check for it here)", f, ext)
			continue
		}
		docs := readYAMLDocs[any](t, f)
		if len(docs) == 0 {
			t.Errorf("%s: no YAML document", f)
		}
	}

	kdir := filepath.Join("deploy", "kubernetes")
	kust := readYAMLDocs[manifest](t, filepath.Join(kdir, "kustomization.yaml"))
	if len(kust) != 1 || kust[0].Kind != "Kustomization" {
		t.Fatalf("kustomization.yaml: got %d documents, want one Kustomization", len(kust))
	}
	var want []string
	for _, f := range files {
		if filepath.Dir(f) == kdir && filepath.Base(f) != "kustomization.yaml" {
			want = append(want, filepath.Base(f))
		}
	}
	got := slices.Sorted(slices.Values(kust[0].Resources))
	if !slices.Equal(got, want) {
		t.Errorf("kustomization.yaml resources: got %q, want the files next to it %q", got, want)
	}
	for _, name := range want {
		for i, m := range readYAMLDocs[manifest](t, filepath.Join(kdir, name)) {
			if m.APIVersion == "" || m.Kind == "" || m.Metadata.Name == "" {
				t.Errorf("%s document %d: got apiVersion %q kind %q name %q, want all three", name, i+1, m.APIVersion, m.Kind, m.Metadata.Name)
			}
		}
	}
}

// TestDeployKubernetesConfig loads the config.yaml of the shipped
// ConfigMap, as the Deployment mounts it, with every variable the
// Deployment sets from the Secret docs/kubernetes.md tells operators to
// create, and checks that the manifests agree with that config
// (namespaces, labels, ports, data_dir).
func TestDeployKubernetesConfig(t *testing.T) {
	kdir := filepath.Join("deploy", "kubernetes")
	var all []manifest
	for _, name := range readYAMLDocs[manifest](t, filepath.Join(kdir, "kustomization.yaml"))[0].Resources {
		for _, m := range readYAMLDocs[manifest](t, filepath.Join(kdir, name)) {
			m.file = name
			all = append(all, m)
		}
	}
	find := func(kind, name string) *manifest {
		for i := range all {
			if all[i].Kind == kind && (name == "" || all[i].Metadata.Name == name) {
				return &all[i]
			}
		}
		t.Fatalf("deploy/kubernetes: no %s %q", kind, name)
		return nil
	}
	dep := find("Deployment", "")
	pod := dep.Spec.Template.Spec
	if len(pod.Containers) != 1 {
		t.Fatalf("%s: got %d containers, want 1", dep.file, len(pod.Containers))
	}
	ctr := pod.Containers[0]

	// The file serve reads: --config in a volume of the ConfigMap.
	cfgPath := configArg(ctr.Args)
	if cfgPath == "" {
		t.Fatalf("%s: args %q have no --config FILE", dep.file, ctr.Args)
	}
	var cmName string
	for _, vm := range ctr.VolumeMounts {
		if vm.MountPath != path.Dir(cfgPath) {
			continue
		}
		for _, v := range pod.Volumes {
			if v.Name == vm.Name && v.ConfigMap != nil {
				cmName = v.ConfigMap.Name
			}
		}
	}
	if cmName == "" {
		t.Fatalf("%s: --config %s is not in a mounted ConfigMap", dep.file, cfgPath)
	}
	cm := find("ConfigMap", cmName)
	key := path.Base(cfgPath)
	text, ok := cm.Data[key]
	if !ok {
		t.Fatalf("%s: ConfigMap %s has no key %q (the Deployment's --config %s)", cm.file, cmName, key, cfgPath)
	}
	name := "deploy/kubernetes/" + cm.file + " data." + key

	// The variables: plain values and Secret keys, the latter as
	// documented.
	var secretName string
	for _, e := range ctr.Env {
		if ref := e.ValueFrom.SecretKeyRef; ref != nil && secretName == "" {
			secretName = ref.Name
		}
	}
	if secretName == "" {
		t.Fatalf("%s: no variable comes from a Secret", dep.file)
	}
	docKeys := documentedSecret(t, dep.Metadata.Namespace, secretName)
	env := map[string]string{} // name → plain value, or "" for a secret
	var secretEnv []string
	for _, e := range ctr.Env {
		switch ref := e.ValueFrom.SecretKeyRef; {
		case ref != nil:
			if ref.Name != secretName || !slices.Contains(docKeys, ref.Key) {
				t.Errorf("%s: %s comes from Secret %s key %q; docs/kubernetes.md creates Secret %s with keys %q", dep.file, e.Name, ref.Name, ref.Key, secretName, docKeys)
			}
			secretEnv = append(secretEnv, e.Name)
			env[e.Name] = ""
		case e.ValueFrom.ConfigMapKeyRef != nil || e.ValueFrom.FieldRef != nil:
			t.Errorf("%s: %s: only value and secretKeyRef are checked here", dep.file, e.Name)
		default:
			env[e.Name] = e.Value
		}
	}
	for _, k := range docKeys {
		used := false
		for _, e := range ctr.Env {
			used = used || e.ValueFrom.SecretKeyRef != nil && e.ValueFrom.SecretKeyRef.Key == k
		}
		if !used {
			t.Errorf("docs/kubernetes.md: Secret key %q is not used by %s", k, dep.file)
		}
	}
	checkEnvProvided(t, name, text, env)

	var cfg *config.Config
	for _, s := range deploySecrets {
		t.Run(s.name, func(t *testing.T) {
			want := map[string]string{}
			for n, v := range env {
				if slices.Contains(secretEnv, n) {
					v = deploySecret(s.value, n)
					want[n] = v
				}
				t.Setenv(n, v)
			}
			c, err := config.Parse(name, []byte(text))
			if err != nil {
				t.Fatalf("%s (its line 1 is line %d of the file):\n%v", name, blockLine(filepath.Join(kdir, cm.file), key), err)
			}
			checkSecretsIntact(t, name, c, want)
			cfg = c
		})
	}
	if cfg == nil {
		return
	}

	// The rest of the manifests against the config they run.
	k := cfg.Runtime.Kubernetes
	if cfg.Runtime.Kind != config.RuntimeKubernetes || !k.InCluster {
		t.Errorf("%s: got runtime %q in_cluster %v, want kubernetes in cluster", name, cfg.Runtime.Kind, k.InCluster)
	}
	gwNS := dep.Metadata.Namespace
	if k.GatewayNamespace != gwNS {
		t.Errorf("%s: gateway_namespace %q, want the Deployment's namespace %q", name, k.GatewayNamespace, gwNS)
	}
	for lk, lv := range k.Labels() {
		if dep.Spec.Template.Metadata.Labels[lk] != lv {
			t.Errorf("%s: gateway label %s=%s is not on the Deployment's pods (%v)", name, lk, lv, dep.Spec.Template.Metadata.Labels)
		}
	}
	namespaces := map[string]bool{}
	for _, m := range all {
		if m.Kind == "Namespace" {
			namespaces[m.Metadata.Name] = true
		}
	}
	for _, ns := range []string{gwNS, k.Namespace} {
		if !namespaces[ns] {
			t.Errorf("namespace %q is not made by deploy/kubernetes (%v)", ns, namespaces)
		}
	}
	role, binding := find("Role", ""), find("RoleBinding", "")
	if role.Metadata.Namespace != k.Namespace || binding.Metadata.Namespace != k.Namespace {
		t.Errorf("%s: Role in %q and RoleBinding in %q, want the sandbox namespace %q", role.file, role.Metadata.Namespace, binding.Metadata.Namespace, k.Namespace)
	}
	for _, sub := range binding.Subjects {
		if sub.Kind == "ServiceAccount" && (sub.Name != pod.ServiceAccountName || sub.Namespace != gwNS) {
			t.Errorf("%s: binds %s/%s, want the Deployment's %s/%s", binding.file, sub.Namespace, sub.Name, gwNS, pod.ServiceAccountName)
		}
	}
	ports := map[string]int{}
	for _, p := range ctr.Ports {
		ports[p.Name] = p.ContainerPort
	}
	for _, l := range []struct{ name, addr string }{{"http", cfg.Listen.HTTP}, {"admin", cfg.Listen.Admin}} {
		_, p, _ := net.SplitHostPort(l.addr)
		if strconv.Itoa(ports[l.name]) != p {
			t.Errorf("%s: listen.%s %q, want the Deployment's %s port %d", name, l.name, l.addr, l.name, ports[l.name])
		}
	}
	if !slices.ContainsFunc(ctr.VolumeMounts, func(vm volumeMount) bool { return vm.MountPath == cfg.DataDir }) {
		t.Errorf("%s: data_dir %s is not a volume of the Deployment (the root filesystem is read-only)", name, cfg.DataDir)
	}
}

// TestDeployComposeConfig loads deploy/config.yaml, the file compose.yaml
// mounts where the image's CMD reads it, with the variables compose passes
// in.
func TestDeployComposeConfig(t *testing.T) {
	compose := readYAMLDocs[composeFile](t, filepath.Join("deploy", "compose.yaml"))
	if len(compose) != 1 || len(compose[0].Services) != 1 {
		t.Fatalf("compose.yaml: want one document with one service")
	}
	cfgPath := imageConfigArg(t)
	for svcName, svc := range compose[0].Services {
		if svc.Command != nil {
			t.Fatalf("compose.yaml: %s sets command; check its --config here", svcName)
		}
		var src string
		var dataVol bool
		for _, v := range svc.Volumes {
			parts := strings.Split(v, ":")
			if len(parts) >= 2 && parts[1] == cfgPath {
				src = parts[0]
			}
			dataVol = dataVol || len(parts) >= 2 && parts[1] == "/var/lib/previewgate"
		}
		if src == "" {
			t.Fatalf("compose.yaml: nothing mounted at %s, where the image's CMD reads its config", cfgPath)
		}
		file := filepath.Join("deploy", filepath.FromSlash(src))
		raw, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		env := map[string]string{}
		for n := range svc.Environment {
			env[n] = ""
		}
		checkEnvProvided(t, file, string(raw), env)
		for _, s := range deploySecrets {
			t.Run(s.name, func(t *testing.T) {
				want := map[string]string{}
				for n := range env {
					want[n] = deploySecret(s.value, n)
					t.Setenv(n, want[n])
				}
				cfg, err := config.Load(file)
				if err != nil {
					t.Fatal(err)
				}
				checkSecretsIntact(t, file, cfg, want)
				if cfg.DataDir != "/var/lib/previewgate" || !dataVol {
					t.Errorf("%s: data_dir %s; compose.yaml keeps /var/lib/previewgate in a volume: %v", file, cfg.DataDir, dataVol)
				}
			})
		}
	}
}

// manifest holds the fields of Kubernetes objects (and the kustomization)
// that these tests read; the decoder ignores the rest.
type manifest struct {
	file       string
	APIVersion string `yaml:"apiVersion"`
	Kind       string `yaml:"kind"`
	Metadata   struct {
		Name      string            `yaml:"name"`
		Namespace string            `yaml:"namespace"`
		Labels    map[string]string `yaml:"labels"`
	} `yaml:"metadata"`
	Data      map[string]string `yaml:"data"`
	Resources []string          `yaml:"resources"`
	Subjects  []struct {
		Kind      string `yaml:"kind"`
		Name      string `yaml:"name"`
		Namespace string `yaml:"namespace"`
	} `yaml:"subjects"`
	Spec struct {
		Template struct {
			Metadata struct {
				Labels map[string]string `yaml:"labels"`
			} `yaml:"metadata"`
			Spec struct {
				ServiceAccountName string `yaml:"serviceAccountName"`
				Containers         []struct {
					Args  []string `yaml:"args"`
					Ports []struct {
						Name          string `yaml:"name"`
						ContainerPort int    `yaml:"containerPort"`
					} `yaml:"ports"`
					Env []struct {
						Name      string    `yaml:"name"`
						Value     string    `yaml:"value"`
						ValueFrom valueFrom `yaml:"valueFrom"`
					} `yaml:"env"`
					VolumeMounts []volumeMount `yaml:"volumeMounts"`
				} `yaml:"containers"`
				Volumes []struct {
					Name      string `yaml:"name"`
					ConfigMap *struct {
						Name string `yaml:"name"`
					} `yaml:"configMap"`
				} `yaml:"volumes"`
			} `yaml:"spec"`
		} `yaml:"template"`
	} `yaml:"spec"`
}

type valueFrom struct {
	SecretKeyRef *struct {
		Name string `yaml:"name"`
		Key  string `yaml:"key"`
	} `yaml:"secretKeyRef"`
	ConfigMapKeyRef any `yaml:"configMapKeyRef"`
	FieldRef        any `yaml:"fieldRef"`
}

type volumeMount struct {
	Name      string `yaml:"name"`
	MountPath string `yaml:"mountPath"`
}

type composeFile struct {
	Services map[string]struct {
		Command     any               `yaml:"command"`
		Environment map[string]string `yaml:"environment"`
		Volumes     []string          `yaml:"volumes"`
	} `yaml:"services"`
}

// readYAMLDocs decodes every document of file with the YAML library the
// config package uses.
func readYAMLDocs[T any](t *testing.T, file string) []T {
	t.Helper()
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	var docs []T
	for {
		var v T
		err := dec.Decode(&v)
		if errors.Is(err, io.EOF) {
			return docs
		}
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		docs = append(docs, v)
	}
}

// documentedSecret returns the keys of the Secret name in namespace ns as
// docs/kubernetes.md creates it (kubectl -n NS create secret generic NAME
// --from-literal=KEY=...), and checks that every key the docs read back
// from it (-n NS get secret NAME ... {.data.KEY}) is one of them.
func documentedSecret(t *testing.T, ns, name string) (keys []string) {
	t.Helper()
	raw, err := os.ReadFile("docs/kubernetes.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := strings.ReplaceAll(string(raw), "\\\n", " ")
	q := regexp.QuoteMeta
	m := regexp.MustCompile(`-n `+q(ns)+` create secret generic `+q(name)+`\s([^\n]*)`).FindAllStringSubmatch(doc, -1)
	if len(m) != 1 {
		t.Fatalf("docs/kubernetes.md: got %d `kubectl -n %s create secret generic %s` commands, want 1", len(m), ns, name)
	}
	for _, k := range regexp.MustCompile(`--from-literal=([^=\s]+)=`).FindAllStringSubmatch(m[0][1], -1) {
		keys = append(keys, k[1])
	}
	if len(keys) == 0 {
		t.Fatalf("docs/kubernetes.md: %q sets no --from-literal key", m[0][0])
	}
	for _, r := range regexp.MustCompile(`-n `+q(ns)+` get secret `+q(name)+`\s[^\n]*?\{\.data\.([^}]+)\}`).FindAllStringSubmatch(doc, -1) {
		if k := strings.ReplaceAll(r[1], `\.`, "."); !slices.Contains(keys, k) {
			t.Errorf("docs/kubernetes.md reads {.data.%s} of Secret %s; it creates keys %q", r[1], name, keys)
		}
	}
	return keys
}

// checkEnvProvided fails when text refers to a variable (${NAME}, without
// a default) that env does not set: the gateway would refuse to start.
func checkEnvProvided(t *testing.T, name, text string, env map[string]string) {
	t.Helper()
	for _, m := range regexp.MustCompile(`(^|[^$])\$\{([A-Za-z_][A-Za-z0-9_]*)(:-)?`).FindAllStringSubmatch(text, -1) {
		if _, ok := env[m[2]]; !ok && m[3] == "" {
			t.Errorf("%s refers to ${%s}, which is not set for it (set: %v)", name, m[2], slices.Sorted(maps.Keys(env)))
		}
	}
}

// checkSecretsIntact checks that each variable's value arrived in some
// config.Secret of cfg byte for byte.
func checkSecretsIntact(t *testing.T, name string, cfg *config.Config, want map[string]string) {
	t.Helper()
	var got []string
	collectSecrets(reflect.ValueOf(cfg), &got, 0)
	for n, v := range want {
		if !slices.Contains(got, v) {
			t.Errorf("%s: ${%s} = %q is in no secret of the loaded config (got %d secrets)", name, n, v, len(got))
		}
	}
}

func collectSecrets(v reflect.Value, out *[]string, depth int) {
	if depth > 20 {
		return
	}
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			collectSecrets(v.Elem(), out, depth+1)
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				collectSecrets(v.Field(i), out, depth+1)
			}
		}
	case reflect.Slice, reflect.Array:
		for i := range v.Len() {
			collectSecrets(v.Index(i), out, depth+1)
		}
	case reflect.Map:
		for it := v.MapRange(); it.Next(); {
			collectSecrets(it.Value(), out, depth+1)
		}
	case reflect.String:
		if v.Type() == reflect.TypeFor[config.Secret]() {
			*out = append(*out, v.String())
		}
	}
}

// configArg returns the FILE of "--config FILE" or "--config=FILE".
func configArg(args []string) string {
	for i, a := range args {
		if a == "--config" && i+1 < len(args) {
			return args[i+1]
		}
		if f, ok := strings.CutPrefix(a, "--config="); ok {
			return f
		}
	}
	return ""
}

// imageConfigArg is the config file the image's CMD serves.
func imageConfigArg(t *testing.T) string {
	t.Helper()
	raw, err := os.ReadFile("Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^CMD (\[.*\])\s*$`).FindAllSubmatch(raw, -1)
	if len(m) == 0 {
		t.Fatal("Dockerfile: no CMD [...]")
	}
	var args []string
	if err := json.Unmarshal(m[len(m)-1][1], &args); err != nil {
		t.Fatalf("Dockerfile CMD: %v", err)
	}
	p := configArg(args)
	if p == "" {
		t.Fatalf("Dockerfile CMD %q has no --config", args)
	}
	return p
}

// blockLine is the line of file on which the block scalar under key
// starts its text.
func blockLine(file, key string) int {
	raw, _ := os.ReadFile(file)
	for i, l := range strings.Split(string(raw), "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), key+":") {
			return i + 2
		}
	}
	return 0
}
