package certs

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math/big"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
)

const (
	caLifetime   = 10 * 365 * 24 * time.Hour
	leafLifetime = 90 * 24 * time.Hour
	// leafRenewBefore: a leaf closer than this to expiry is replaced at the
	// next handshake.
	leafRenewBefore = 30 * 24 * time.Hour
	// hostLeaves bounds the per-host leaves kept for single-label domains.
	hostLeaves = 4096
)

// CA file names under <data_dir>/ca.
const (
	caCertName = "ca.crt"
	caKeyName  = "ca.key"
)

// ExportCA returns the PEM certificate of the local CA kept in dataDir, for
// `previewgate ca export`. It never creates one: a fresh CA that no server
// uses would hide a mistyped data_dir.
func ExportCA(dataDir string) ([]byte, error) {
	ca, err := loadOrCreateCA(dataDir, false)
	if errors.Is(err, errNoCA) {
		return nil, fmt.Errorf("certs: no local CA in %s (run serve with tls.mode self-signed and this data_dir first)", filepath.Join(dataDir, "ca"))
	}
	if err != nil {
		return nil, fmt.Errorf("certs: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.cert.Raw}), nil
}

// errNoCA: dataDir holds no local CA certificate.
var errNoCA = errors.New("no local CA")

type localCA struct {
	cert *x509.Certificate
	key  crypto.Signer
}

// loadOrCreateCA reads <dataDir>/ca/ca.{crt,key} or, when the certificate is
// missing, creates an ECDSA P-256 CA valid for 10 years (errNoCA unless
// create).
func loadOrCreateCA(dataDir string, create bool) (*localCA, error) {
	dir := filepath.Join(dataDir, "ca")
	certPEM, err := os.ReadFile(filepath.Join(dir, caCertName))
	if errors.Is(err, fs.ErrNotExist) {
		if !create {
			return nil, errNoCA
		}
		return createCA(dir)
	}
	if err != nil {
		return nil, fmt.Errorf("read local ca: %w", err)
	}
	keyPEM, err := os.ReadFile(filepath.Join(dir, caKeyName))
	if err != nil {
		return nil, fmt.Errorf("read local ca key: %w", err)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("load local ca in %s: %w", dir, err)
	}
	signer, ok := pair.PrivateKey.(crypto.Signer)
	if !ok || !pair.Leaf.IsCA {
		return nil, fmt.Errorf("load local ca in %s: not a CA certificate and key", dir)
	}
	return &localCA{cert: pair.Leaf, key: signer}, nil
}

func createCA(dir string) (*localCA, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create local ca: %w", err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("create local ca: %w", err)
	}
	serial, err := randSerial()
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		// A distinct name per CA keeps browsers' trust stores readable
		// when several machines' CAs are trusted.
		Subject:               pkix.Name{Organization: []string{"previewgate"}, CommonName: "previewgate local CA " + serial.Text(16)[:8]},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(caLifetime),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, fmt.Errorf("create local ca: %w", err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("create local ca: %w", err)
	}
	// Key first: a present certificate means a complete CA.
	if err := writeFileAtomic(filepath.Join(dir, caKeyName), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		return nil, err
	}
	if err := writeFileAtomic(filepath.Join(dir, caCertName), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("create local ca: %w", err)
	}
	return &localCA{cert: cert, key: key}, nil
}

func writeFileAtomic(path string, data []byte, perm os.FileMode) error {
	f, err := os.CreateTemp(filepath.Dir(path), ".tmp-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer os.Remove(f.Name())
	cerr := f.Chmod(perm)
	_, werr := f.Write(data)
	if err = errors.Join(cerr, werr, f.Close()); err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

func randSerial() (*big.Int, error) {
	s, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("serial: %w", err)
	}
	return s.Add(s, big.NewInt(1)), nil
}

// selfSignedSource is tls.mode self-signed. Each configured domain gets a
// leaf for *.<domain> and <domain>. A single-label domain such as localhost
// additionally gets a leaf per approved host, because TLS clients (OpenSSL,
// hence curl; browsers) refuse a wildcard directly under a single label:
// "*.localhost" does not match "sandbox-x.localhost" for them, though Go
// accepts it. Leaves are minted in memory and replaced at the first
// handshake within leafRenewBefore of expiry; only the CA is stored.
type selfSignedSource struct {
	log     *slog.Logger
	ca      *localCA
	domains []string // normalized
	decide  func(string) bool
	now     func() time.Time

	mu    sync.Mutex                           // guards leafs
	leafs map[string]*tls.Certificate          // by domain
	hosts *lru.Cache[string, *tls.Certificate] // per-host leaves, single-label domains
}

func newSelfSigned(cfg Config, log *slog.Logger) (*selfSignedSource, error) {
	if len(cfg.Domains) == 0 {
		return nil, errors.New("at least one domain is required")
	}
	ca, err := loadOrCreateCA(cfg.DataDir, true)
	if err != nil {
		return nil, err
	}
	hosts, err := lru.New[string, *tls.Certificate](hostLeaves)
	if err != nil {
		return nil, err
	}
	s := &selfSignedSource{
		log:    log,
		ca:     ca,
		decide: cfg.Decide,
		now:    time.Now,
		leafs:  make(map[string]*tls.Certificate),
		hosts:  hosts,
	}
	for _, d := range cfg.Domains {
		d = normalizeHost(d)
		s.domains = append(s.domains, d)
		if _, err := s.leafFor(d); err != nil {
			return nil, err
		}
	}
	log.Info("serving certificates from the local CA; trust it with `previewgate ca export`",
		"ca", filepath.Join(cfg.DataDir, "ca", caCertName), "ca_subject", ca.cert.Subject.CommonName)
	return s, nil
}

func (s *selfSignedSource) getCertificate(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
	name := normalizeHost(hello.ServerName)
	for _, d := range s.domains {
		if name == d {
			return s.leafFor(d)
		}
		if !strings.HasSuffix(name, "."+d) {
			continue
		}
		if !strings.Contains(d, ".") && s.decide(name) {
			return s.hostLeaf(name)
		}
		return s.leafFor(d)
	}
	// Unknown or missing SNI: the first domain's leaf. The client will not
	// accept it for another name, which is the right outcome.
	return s.leafFor(s.domains[0])
}

// leafFor returns the current leaf of domain d (for *.<d> and d), minting
// one if there is none or it is due for renewal.
func (s *selfSignedSource) leafFor(d string) (*tls.Certificate, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c := s.leafs[d]; c != nil && s.fresh(c) {
		return c, nil
	}
	c, err := s.mint([]string{"*." + d, d})
	if err != nil {
		return nil, err
	}
	s.leafs[d] = c
	return c, nil
}

func (s *selfSignedSource) hostLeaf(host string) (*tls.Certificate, error) {
	if c, ok := s.hosts.Get(host); ok && s.fresh(c) {
		return c, nil
	}
	// Two first handshakes may both mint; the cost is one ECDSA signature
	// and either leaf is valid.
	c, err := s.mint([]string{host})
	if err != nil {
		return nil, err
	}
	s.hosts.Add(host, c)
	return c, nil
}

func (s *selfSignedSource) fresh(c *tls.Certificate) bool {
	return s.now().Add(leafRenewBefore).Before(c.Leaf.NotAfter)
}

func (s *selfSignedSource) mint(names []string) (*tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("leaf key: %w", err)
	}
	serial, err := randSerial()
	if err != nil {
		return nil, err
	}
	now := s.now()
	notAfter := now.Add(leafLifetime)
	if notAfter.After(s.ca.cert.NotAfter) {
		notAfter = s.ca.cert.NotAfter
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{Organization: []string{"previewgate"}},
		DNSNames:     names,
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, s.ca.cert, key.Public(), s.ca.key)
	if err != nil {
		return nil, fmt.Errorf("sign leaf for %v: %w", names, err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("sign leaf for %v: %w", names, err)
	}
	return &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, nil
}

func (s *selfSignedSource) handleHTTP(http.ResponseWriter, *http.Request) bool { return false }

func (s *selfSignedSource) ready() error { return nil }

func (s *selfSignedSource) close() {}
