package browser

import (
	"bytes"
	"image/color"
	"image/png"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
)

// canvasPage draws a 64x32 canvas: red on the left half, blue on the
// right. Its script is a file of its own, as the bridge's policy wants.
var canvasPage = map[string]string{
	"/": `<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>canvas</title></head>
<body><p id="label">not a canvas</p><canvas id="c" width="64" height="32"></canvas><script src="/draw.js"></script></body>
</html>
`,
	"/draw.js": `const ctx = document.getElementById('c').getContext('2d');
ctx.fillStyle = '#ff0000'; ctx.fillRect(0, 0, 32, 32);
ctx.fillStyle = '#0000ff'; ctx.fillRect(32, 0, 32, 32);
window.drawn = true;
`,
	"/favicon.ico": "", // Chromium asks; a 404 would be logged
}

// serveCanvasPage serves canvasPage under the bridge's kind of
// Content-Security-Policy.
func serveCanvasPage(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, ok := canvasPage[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Security-Policy", "default-src 'self'; script-src 'self'")
		if r.URL.Path == "/draw.js" {
			w.Header().Set("Content-Type", "text/javascript")
		}
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/"
}

func TestCanvasPNGIsTheCanvasPixels(t *testing.T) {
	artifacts := t.TempDir()
	t.Setenv("VIRTSTATION_ARTIFACTS", artifacts)
	b := Start(t)
	p := b.Open(t, "canvas", serveCanvasPage(t))
	p.WaitFor(`window.drawn === true`)

	img, err := png.Decode(bytes.NewReader(p.CanvasPNG("#c")))
	if err != nil {
		t.Fatalf("CanvasPNG is no PNG: %v", err)
	}
	if got := img.Bounds().Size(); got.X != 64 || got.Y != 32 {
		t.Fatalf("CanvasPNG is %v, want the canvas' 64x32", got)
	}
	red := color.RGBA{R: 0xff, A: 0xff}
	blue := color.RGBA{B: 0xff, A: 0xff}
	for name, tc := range map[string]struct {
		x, y int
		want color.RGBA
	}{
		"left top":     {0, 0, red},
		"left middle":  {31, 16, red},
		"right middle": {32, 16, blue},
		"right bottom": {63, 31, blue},
	} {
		t.Run(name, func(t *testing.T) {
			if got := color.RGBAModel.Convert(img.At(tc.x, tc.y)).(color.RGBA); got != tc.want {
				t.Errorf("pixel (%d,%d) = %v, want %v", tc.x, tc.y, got, tc.want)
			}
		})
	}

	// A screenshot goes to $VIRTSTATION_ARTIFACTS.
	path := p.Screenshot("canvas")
	if filepath.Dir(path) != artifacts {
		t.Errorf("screenshot at %q, want it in %s", path, artifacts)
	}
	if _, err := os.Stat(path); err != nil {
		t.Errorf("screenshot: %v", err)
	}
	p.CheckClean()
}
