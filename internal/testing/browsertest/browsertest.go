// Package browsertest starts headless Chromium for tests and saves what it
// shows. It is for tests only: nothing but _test.go files may import it.
//
// A test that needs the browser fails (not skips) without Debian's
// chromium on PATH; .ci/run installs it. Under go test -short it is
// skipped. The browser ends when the test does.
package browsertest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// New starts headless chromium and returns the context that drives it,
// for at most timeout from when the browser is up: its start, slow on a
// loaded machine, is not the test's time. opts (a window size) come after
// the defaults. Call it after the test's builds (images, binaries), so
// the timeout covers the test alone.
func New(t *testing.T, timeout time.Duration, opts ...chromedp.ExecAllocatorOption) context.Context {
	t.Helper()
	if testing.Short() {
		t.Skip("browser test: skipped under -short")
	}
	path, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatalf("chromium not found (apt-get install chromium): %v", err)
	}
	all := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.NoSandbox, // CI runs as root
		chromedp.Flag("disable-dev-shm-usage", true),
	)
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), append(all, opts...)...)
	ctx, cancelC := chromedp.NewContext(actx)
	t.Cleanup(func() { cancelC(); cancelA() })
	// The first action starts the browser, which lives as long as the context
	// it runs with: this one, without the deadline.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	ctx, cancelT := context.WithTimeout(ctx, timeout)
	t.Cleanup(cancelT)
	return ctx
}

// ScreenshotDir returns $PREVIEWGATE_SCREENSHOTS, where the screenshot
// tests write the README's docs/ images, and skips the test without it.
func ScreenshotDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("PREVIEWGATE_SCREENSHOTS")
	if dir == "" {
		t.Skip("set PREVIEWGATE_SCREENSHOTS=DIR to write the page screenshots")
	}
	return dir
}

// SaveScreenshot writes what the browser of ctx shows to dir/name as a PNG.
func SaveScreenshot(t *testing.T, ctx context.Context, dir, name string) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), png, 0o644); err != nil {
		t.Fatal(err)
	}
}
