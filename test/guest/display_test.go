package guest

import (
	"bytes"
	"context"
	"image"
	"image/color"
	"image/png"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/virtstation/virtstation/internal/browser"
	"github.com/virtstation/virtstation/internal/qemu"
)

// Display comparison: the canvas noVNC paints in Chromium must be the
// guest's screen as QEMU renders it (its screendump), up to the blinking
// text cursor.
const (
	// maxDifferingFraction tolerates the cursor cell and a line that
	// scrolled between the two captures.
	maxDifferingFraction = 0.02
	// minTextPixels: the console's text covers at least this many pixels;
	// getty clears tty1, leaving its banner and "ws-alice login:" (about
	// 1,200 pixels of the framebuffer console's font).
	minTextPixels = 500
	// displayMatchTimeout bounds the wait for the two to agree.
	displayMatchTimeout = 30 * time.Second
)

// checkDisplay opens the built-in client's display page for vm in
// Chromium and waits until its canvas shows the guest's console as QEMU's
// own screendump does. The page's screenshot is kept as an artefact.
func checkDisplay(t *testing.T, g *guest, namespace, vm string) {
	b := browser.Start(t)
	page := b.Open(t, "display-"+vm, bridgeS.URL+"/ui/namespaces/"+namespace+"/virtualmachines/"+vm+
		"#mode=display&token="+url.QueryEscape(tokens[namespace]))
	page.WaitState("connected")
	deadline := time.Now().Add(displayMatchTimeout)
	for {
		canvas := decodePNG(t, page.CanvasPNG("#screen canvas"))
		ctx, cancel := context.WithTimeout(context.Background(), ioTimeout)
		dump, err := qemu.Screendump(ctx, g.QMPSocket)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		screen := decodePNG(t, dump)
		text := textPixels(screen)
		differ, size := differing(canvas, screen)
		if size && text >= minTextPixels && differ <= maxDifferingFraction {
			t.Logf("the canvas (%v) matches QEMU's screen up to %.2f%% of its pixels; %d text pixels", canvas.Bounds().Size(), differ*100, text)
			break
		}
		if time.Now().After(deadline) {
			keep(t, vm+"-screendump.png", dump)
			page.Screenshot("display-mismatch")
			t.Fatalf("the browser's display does not show the guest's console: canvas %v, screen %v, %.1f%% of pixels differ, %d text pixels",
				canvas.Bounds().Size(), screen.Bounds().Size(), differ*100, text)
		}
		time.Sleep(time.Second)
	}
	page.Screenshot("display")
	page.CheckClean()
}

func decodePNG(t *testing.T, b []byte) image.Image {
	t.Helper()
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("decode PNG: %v", err)
	}
	return img
}

// differing is the fraction of pixels whose colours differ noticeably,
// and whether the sizes agree.
func differing(a, b image.Image) (float64, bool) {
	if a.Bounds().Size() != b.Bounds().Size() {
		return 1, false
	}
	n, total := 0, 0
	ab, bb := a.Bounds(), b.Bounds()
	for y := 0; y < ab.Dy(); y++ {
		for x := 0; x < ab.Dx(); x++ {
			total++
			if !similar(a.At(ab.Min.X+x, ab.Min.Y+y), b.At(bb.Min.X+x, bb.Min.Y+y)) {
				n++
			}
		}
	}
	return float64(n) / float64(total), true
}

// similar compares two colours channel by channel, with room for the
// colour conversion of the VNC encoding.
func similar(a, b color.Color) bool {
	r1, g1, b1, _ := a.RGBA()
	r2, g2, b2, _ := b.RGBA()
	const tolerance = 0x1800 // of 0xffff
	return diff(r1, r2) < tolerance && diff(g1, g2) < tolerance && diff(b1, b2) < tolerance
}

func diff(x, y uint32) uint32 {
	if x > y {
		return x - y
	}
	return y - x
}

// textPixels counts the pixels that differ from the screen's background
// (its top-right corner, which a console line rarely reaches).
func textPixels(img image.Image) int {
	bg := img.At(img.Bounds().Max.X-1, img.Bounds().Min.Y)
	n := 0
	for y := img.Bounds().Min.Y; y < img.Bounds().Max.Y; y++ {
		for x := img.Bounds().Min.X; x < img.Bounds().Max.X; x++ {
			if !similar(img.At(x, y), bg) {
				n++
			}
		}
	}
	return n
}

// keep writes an artefact.
func keep(t *testing.T, name string, b []byte) {
	path := filepath.Join(artifacts, strings.NewReplacer("/", "-").Replace(t.Name())+"-"+name)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Logf("keep %s: %v", name, err)
		return
	}
	t.Logf("artefact: %s", path)
}
