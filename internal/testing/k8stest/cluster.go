package k8stest

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/previewgate/previewgate/internal/testing/dockertest"
)

// Cluster is a running kube-apiserver with its etcd, both on loopback.
type Cluster struct {
	URL        string
	CAData     []byte // PEM of the CA that signed the serving certificate
	AdminToken string // a token of a system:masters member
}

// shared is the control plane of this test binary: started by the first
// Start, stopped when the binary's tests end (dockertest.Main's AtExit).
var shared struct {
	once sync.Once
	c    *Cluster
	err  error
}

// nsSeq numbers the namespaces NewNamespace makes in this process.
var nsSeq atomic.Int64

// Start returns the control plane this test binary shares: etcd and
// kube-apiserver, built (or found cached) and started by the first caller,
// stopped by pid when the binary's tests end. Tests share it the way
// gateway replicas share a cluster: each works in a namespace of its own
// (NewNamespace), so starting one per test (~5 s of CPU each on two cores)
// buys nothing. It fails t if either program cannot be built or does not
// become ready, and every later caller with the same error: the Kubernetes
// tests never skip.
//
// The package's TestMain must call dockertest.Main, which stops the
// control plane; Start fails t otherwise, rather than leak the processes.
//
// Under go test -short (tests that need nothing outside the process) it
// skips, like every test that needs Docker.
func Start(t testing.TB) *Cluster {
	t.Helper()
	if testing.Short() {
		t.Skip("needs kube-apiserver, etcd and Docker (not under -short)")
	}
	shared.once.Do(func() {
		var stop func() // set below; AtExit's function runs after the tests
		if !dockertest.AtExit(func() {
			if stop != nil {
				stop()
			}
		}) {
			shared.err = errors.New("the package's TestMain must call dockertest.Main, which stops the shared control plane")
			return
		}
		shared.c, stop, shared.err = startShared(t.Logf)
	})
	if shared.err != nil {
		t.Fatalf("kube-apiserver unavailable: %v", shared.err)
	}
	return shared.c
}

func startShared(logf func(string, ...any)) (*Cluster, func(), error) {
	// The binaries are cached before the tests (.ci/run runs prebuild):
	// this bounds a cold build, not a test.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	b, err := Build(ctx, logf)
	if err != nil {
		return nil, nil, err
	}
	dir, err := os.MkdirTemp("", "previewgate-k8stest-")
	if err != nil {
		return nil, nil, err
	}
	c, stop, err := start(b, dir)
	if err != nil {
		os.RemoveAll(dir)
		return nil, nil, fmt.Errorf("did not start: %w", err)
	}
	return c, func() { stop(); os.RemoveAll(dir) }, nil
}

// start runs etcd and kube-apiserver with their files in dir and returns
// a function that stops both.
func start(b Binaries, dir string) (_ *Cluster, stop func(), err error) {
	var stops []func()
	stop = func() {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
	}
	defer func() {
		if err != nil {
			stop()
		}
	}()
	c := &Cluster{AdminToken: rand.Text()}
	caPEM, certPEM, keyPEM, err := servingCert()
	if err != nil {
		return nil, nil, err
	}
	c.CAData = caPEM
	saKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, nil, fmt.Errorf("service account key: %w", err)
	}
	saDER, err := x509.MarshalPKCS8PrivateKey(saKey)
	if err != nil {
		return nil, nil, fmt.Errorf("service account key: %w", err)
	}
	files := map[string][]byte{
		"tls.crt": certPEM,
		"tls.key": keyPEM,
		"sa.key":  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: saDER}),
		"tokens":  []byte(c.AdminToken + ",admin,admin,system:masters\n"),
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			return nil, nil, err
		}
	}

	ports, err := freePorts(3)
	if err != nil {
		return nil, nil, err
	}
	etcdURL := "http://127.0.0.1:" + strconv.Itoa(ports[0])
	etcd := exec.Command(b.Etcd, "-data-dir", filepath.Join(dir, "etcd"),
		"-listen-client", etcdURL, "-listen-peer", "http://127.0.0.1:"+strconv.Itoa(ports[1]))
	stopEtcd, err := run(etcd, filepath.Join(dir, "etcd.log"))
	if err != nil {
		return nil, nil, err
	}
	stops = append(stops, stopEtcd)
	if err := waitHTTP(http.DefaultClient, etcdURL+"/health", "", 30*time.Second); err != nil {
		return nil, nil, fmt.Errorf("etcd: %w (log: %s)", err, logTail(filepath.Join(dir, "etcd.log")))
	}

	c.URL = "https://127.0.0.1:" + strconv.Itoa(ports[2])
	api := exec.Command(b.APIServer,
		"--etcd-servers="+etcdURL,
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--secure-port="+strconv.Itoa(ports[2]),
		"--tls-cert-file="+filepath.Join(dir, "tls.crt"),
		"--tls-private-key-file="+filepath.Join(dir, "tls.key"),
		"--token-auth-file="+filepath.Join(dir, "tokens"),
		"--authorization-mode=RBAC",
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-account-key-file="+filepath.Join(dir, "sa.key"),
		"--service-account-signing-key-file="+filepath.Join(dir, "sa.key"),
		"--service-cluster-ip-range=10.96.0.0/16",
		// No controller manager runs: nothing else would reconcile the
		// kubernetes Service's endpoints to a loopback address.
		"--endpoint-reconciler-type=none",
		"--enable-priority-and-fairness=false",
		"--profiling=false",
		"--cert-dir="+filepath.Join(dir, "certs"),
		"--v=0",
	)
	stopAPI, err := run(api, filepath.Join(dir, "apiserver.log"))
	if err != nil {
		return nil, nil, err
	}
	stops = append(stops, stopAPI)
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	if err := waitHTTP(hc, c.URL+"/readyz", c.AdminToken, 90*time.Second); err != nil {
		return nil, nil, fmt.Errorf("kube-apiserver: %w (log: %s)", err, logTail(filepath.Join(dir, "apiserver.log")))
	}
	return c, stop, nil
}

// run starts cmd with its output in logFile and returns a function that
// stops it by pid (SIGTERM, then SIGKILL after 10 s) and waits for it.
func run(cmd *exec.Cmd, logFile string) (stop func(), err error) {
	f, err := os.Create(logFile)
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = f, f
	// If the test process dies without cleanup, so does the child.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("start %s: %w", filepath.Base(cmd.Path), err)
	}
	done := make(chan struct{})
	go func() { // owned by stop: ends when the process does, which stop ensures
		_ = cmd.Wait()
		f.Close()
		close(done)
	}()
	return func() {
		_ = syscall.Kill(cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = syscall.Kill(cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
	}, nil
}

func waitHTTP(hc *http.Client, url, token string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var last error
	for time.Now().Before(deadline) {
		req, _ := http.NewRequest("GET", url, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := hc.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return nil
			}
			err = fmt.Errorf("GET %s: %s", url, resp.Status)
		}
		last = err
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("not ready after %s: %v", timeout, last)
}

func logTail(p string) string {
	b, _ := os.ReadFile(p)
	return tail(string(b), 3000)
}

// Config returns a client config for token (AdminToken for full access).
func (c *Cluster) Config(token string) *rest.Config {
	return &rest.Config{
		Host:            c.URL,
		BearerToken:     token,
		TLSClientConfig: rest.TLSClientConfig{CAData: c.CAData},
		QPS:             1000,
		Burst:           2000,
	}
}

// Admin returns a clientset with full access.
func (c *Cluster) Admin(t testing.TB) kubernetes.Interface {
	t.Helper()
	cs, err := kubernetes.NewForConfig(c.Config(c.AdminToken))
	if err != nil {
		t.Fatalf("clientset: %v", err)
	}
	return cs
}

// NewNamespace creates a namespace that no other test of this process
// uses (the control plane is shared) and returns its name; see Namespace.
func (c *Cluster) NewNamespace(t testing.TB) string {
	t.Helper()
	name := fmt.Sprintf("pg-%s-%d", dockertest.RunID(), nsSeq.Add(1))
	c.Namespace(t, name)
	return name
}

// Namespace creates a namespace with the "default" ServiceAccount that the
// ServiceAccount admission plugin requires of every pod (the controller
// manager would make it; none runs here), and deletes it when t ends.
// Without a controller manager a deleted namespace stays Terminating with
// its objects: nothing can be created in it any more, and nothing of it
// is seen by another test's namespace-scoped clients. Register it before
// the node agent, so the agent (which removes its containers) stops first.
func (c *Cluster) Namespace(t testing.TB, name string) {
	t.Helper()
	cs := c.Admin(t)
	ctx := context.Background()
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create namespace %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := cs.CoreV1().Namespaces().Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete namespace %s: %v", name, err)
		}
	})
	if _, err := cs.CoreV1().ServiceAccounts(name).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create default service account in %s: %v", name, err)
	}
}

func servingCert() (caPEM, certPEM, keyPEM []byte, err error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, nil, err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "previewgate k8stest CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, nil, nil, err
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "kube-apiserver"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, DNSNames: []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, nil, nil, err
	}
	kd, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kd}), nil
}

func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	var out []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		out = append(out, l.Addr().(*net.TCPAddr).Port)
	}
	return out, nil
}
