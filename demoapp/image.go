package demoapp

import (
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/previewgate/previewgate/internal/dockerbuild"
)

// BuildContext returns a Docker build context (a tar) for a FROM scratch
// image that runs `exe demo-app`. A statically linked exe is all it needs;
// for a dynamically linked one (a cgo build) the ELF interpreter and the
// shared libraries it names are copied from the host as well.
func BuildContext(exe string) ([]byte, error) {
	files := map[string]string{"/previewgate": exe} // image path → host path
	libs, err := sharedLibs(exe)
	if err != nil {
		return nil, fmt.Errorf("demo image: %w", err)
	}
	for _, l := range libs {
		files[l] = l
	}
	var df strings.Builder
	df.WriteString("FROM scratch\n")
	var tarFiles []dockerbuild.File
	for dst, src := range files {
		data, err := os.ReadFile(src)
		if err != nil {
			return nil, fmt.Errorf("demo image: %w", err)
		}
		name := "rootfs" + dst
		tarFiles = append(tarFiles, dockerbuild.File{Name: name, Mode: 0o755, Data: data})
		fmt.Fprintf(&df, "COPY %s %s\n", name, dst)
	}
	df.WriteString("USER 65534:65534\nEXPOSE 3000\nENTRYPOINT [\"/previewgate\", \"demo-app\"]\n")
	return dockerbuild.Context(append(tarFiles, dockerbuild.File{Name: "Dockerfile", Mode: 0o644, Data: []byte(df.String())})...)
}

// libDirs are searched for DT_NEEDED libraries, as the dynamic loader would.
var libDirs = []string{"/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib/aarch64-linux-gnu",
	"/usr/lib/aarch64-linux-gnu", "/lib64", "/usr/lib64", "/lib", "/usr/lib"}

// sharedLibs returns the interpreter and the libraries exe needs; none for
// a static binary.
func sharedLibs(exe string) ([]string, error) {
	f, err := elf.Open(exe)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []string
	for _, p := range f.Progs {
		if p.Type != elf.PT_INTERP {
			continue
		}
		b := make([]byte, p.Filesz)
		if _, err := p.ReadAt(b, 0); err != nil {
			return nil, fmt.Errorf("read interpreter: %w", err)
		}
		out = append(out, strings.TrimRight(string(b), "\x00"))
	}
	needed, err := f.ImportedLibraries()
	if err != nil {
		return nil, err
	}
	for _, lib := range needed {
		found := ""
		for _, d := range libDirs {
			p := filepath.Join(d, lib)
			if _, err := os.Stat(p); err == nil {
				found = path.Clean(p)
				break
			}
		}
		if found == "" {
			return nil, errors.New("shared library " + lib + " not found; build with CGO_ENABLED=0")
		}
		out = append(out, found)
	}
	return out, nil
}
