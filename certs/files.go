package certs

import (
	"bytes"
	"crypto/tls"
	"errors"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// filesSource is tls.mode files: one certificate and key from disk, checked
// every Config.ReloadInterval and swapped atomically when either file
// changes. A half-written or mismatched pair is logged and the previous
// certificate keeps serving, so replacing the two files one after the other
// never breaks a handshake.
type filesSource struct {
	log               *slog.Logger
	certFile, keyFile string
	cur               atomic.Pointer[tls.Certificate]
	lastCert, lastKey []byte // contents of the loaded pair; owned by the poll goroutine
	stop              chan struct{}
	done              sync.WaitGroup
}

func newFiles(cfg Config, log *slog.Logger) (*filesSource, error) {
	if cfg.TLS.CertFile == "" || cfg.TLS.KeyFile == "" {
		return nil, errors.New("cert_file and key_file are required")
	}
	s := &filesSource{
		log:      log,
		certFile: cfg.TLS.CertFile,
		keyFile:  cfg.TLS.KeyFile,
		stop:     make(chan struct{}),
	}
	if _, err := s.load(); err != nil {
		return nil, err
	}
	s.done.Add(1)
	go s.poll(cfg.ReloadInterval)
	return s, nil
}

// load reads both files and, if their contents changed and form a valid
// pair, makes it current. It reports whether the certificate changed.
func (s *filesSource) load() (bool, error) {
	certPEM, keyPEM, err := readPair(s.certFile, s.keyFile)
	if err != nil {
		return false, err
	}
	if bytes.Equal(certPEM, s.lastCert) && bytes.Equal(keyPEM, s.lastKey) {
		return false, nil
	}
	cert, err := keyPair(s.certFile, s.keyFile, certPEM, keyPEM)
	if err != nil {
		return false, err
	}
	s.cur.Store(&cert)
	s.lastCert, s.lastKey = certPEM, keyPEM
	return true, nil
}

// poll compares file contents rather than mtimes: the files are small, and
// contents catch replacements within the mtime granularity and through
// symlink swaps (Kubernetes secrets) alike.
func (s *filesSource) poll(every time.Duration) {
	defer s.done.Done()
	t := time.NewTicker(every)
	defer t.Stop()
	var lastErr string
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
		changed, err := s.load()
		switch {
		case err != nil:
			// Log a persisting error once, not every second.
			if err.Error() != lastErr {
				s.log.Warn("certificate files not reloaded; serving the previous certificate", "err", err)
				lastErr = err.Error()
			}
		case changed:
			lastErr = ""
			s.log.Info("certificate reloaded", "cert_file", s.certFile, "not_after", s.cur.Load().Leaf.NotAfter)
		}
	}
}

func (s *filesSource) getCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return s.cur.Load(), nil
}

func (s *filesSource) handleHTTP(http.ResponseWriter, *http.Request) bool { return false }

func (s *filesSource) ready() error { return nil }

func (s *filesSource) close() {
	close(s.stop)
	s.done.Wait()
}
