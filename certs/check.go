package certs

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"

	"github.com/previewgate/previewgate/config"
)

// FileProblems reads the files t names for its mode, as New does, and
// reports what would make New fail: a missing or unreadable file, a
// certificate and key that are not a pair, a ca_root without a PEM
// certificate. It keeps nothing and asks no CA.
func FileProblems(t config.TLS) []config.FileProblem {
	var out []config.FileProblem
	switch t.Mode {
	case config.TLSFiles:
		certPEM, keyPEM, err := readPair(t.CertFile, t.KeyFile)
		if err == nil {
			_, err = keyPair(t.CertFile, t.KeyFile, certPEM, keyPEM)
		}
		if err != nil {
			at := "tls.cert_file"
			if errors.Is(err, errKeyFile) {
				at = "tls.key_file"
			}
			out = append(out, config.FileProblem{Path: at, Err: err})
		}
	case config.TLSACME:
		if t.ACME.CARoot != "" {
			if _, err := readRoots(t.ACME.CARoot); err != nil {
				out = append(out, config.FileProblem{Path: "tls.acme.ca_root", Err: err})
			}
		}
	}
	return out
}

// errKeyFile marks readPair's failures to read the key file.
var errKeyFile = errors.New("read key")

func readPair(certFile, keyFile string) (certPEM, keyPEM []byte, err error) {
	if certPEM, err = os.ReadFile(certFile); err != nil {
		return nil, nil, fmt.Errorf("read cert: %w", err)
	}
	if keyPEM, err = os.ReadFile(keyFile); err != nil {
		return nil, nil, fmt.Errorf("%w: %w", errKeyFile, err)
	}
	return certPEM, keyPEM, nil
}

func keyPair(certFile, keyFile string, certPEM, keyPEM []byte) (tls.Certificate, error) {
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("load %s and %s: %w", certFile, keyFile, err)
	}
	return cert, nil
}

// readRoots reads a PEM file of CA roots (tls.acme.ca_root).
func readRoots(path string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("ca_root: %w", err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("ca_root %s: no PEM certificate", path)
	}
	return roots, nil
}
