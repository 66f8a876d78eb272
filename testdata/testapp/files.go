package main

import (
	"errors"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
)

// maxFile bounds what /file stores and returns.
const maxFile = 64 << 10

// file serves small files in the directory $FILES_DIR (a sandbox's
// workspace in the tests): GET /file?name=N returns N's content (404 if
// there is none), PUT /file?name=N stores the body (at most 64 KiB) as N.
// Names are one path element of letters, digits, . _ - (not starting with
// a dot): nothing outside the directory is reachable.
func file(w http.ResponseWriter, r *http.Request) {
	dir := os.Getenv("FILES_DIR")
	if dir == "" {
		http.Error(w, "FILES_DIR is not set", http.StatusNotFound)
		return
	}
	name := r.URL.Query().Get("name")
	if !fileName(name) {
		http.Error(w, "invalid ?name= (letters, digits, . _ -; at most 64)", http.StatusBadRequest)
		return
	}
	p := filepath.Join(dir, name)
	switch r.Method {
	case http.MethodGet:
		f, err := os.Open(p)
		if errors.Is(err, fs.ErrNotExist) {
			http.Error(w, "no such file", http.StatusNotFound)
			return
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		defer f.Close()
		w.Header().Set("Content-Type", "application/octet-stream")
		_, _ = io.Copy(w, io.LimitReader(f, maxFile))
	case http.MethodPut:
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxFile))
		if err != nil {
			http.Error(w, err.Error(), http.StatusRequestEntityTooLarge)
			return
		}
		if err := os.WriteFile(p, body, 0o644); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	default:
		http.Error(w, "GET or PUT", http.StatusMethodNotAllowed)
	}
}

func fileName(s string) bool {
	if len(s) == 0 || len(s) > 64 || s[0] == '.' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}
