package qemu

import (
	"bytes"
	"context"
	"image/png"
	"io"
	"net"
	"path/filepath"
	"strings"
	"testing"
)

func TestScreendumpIsAPNGOfTheDisplay(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), ioTimeout)
	defer cancel()
	b, err := Screendump(ctx, testVM.QMPSocket)
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("the screendump is not a PNG: %v", err)
	}
	w, h, err := testVM.ScreenSize(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := img.Bounds().Size(); got.X != int(w) || got.Y != int(h) {
		t.Fatalf("screendump is %v, the VNC display %dx%d", got, w, h)
	}
	// The monitor serves the next client once the first has gone.
	if _, err := Screendump(ctx, testVM.QMPSocket); err != nil {
		t.Fatalf("second screendump: %v", err)
	}
}

func TestScreendumpErrors(t *testing.T) {
	cases := map[string]struct {
		socket string
		want   string
	}{
		"no monitor":   {filepath.Join(t.TempDir(), "none.sock"), "dial QMP"},
		"not QMP":      {testVM.SerialSocket, "no QMP greeting"},
		"VNC, not QMP": {testVM.VNCSocket, "no QMP greeting"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 3*ioTimeout/10)
			defer cancel()
			_, err := Screendump(ctx, tc.socket)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Screendump: %v, want an error with %q", err, tc.want)
			}
		})
	}
}

// FuzzQMPExecute feeds execute arbitrary monitor output: it must end with
// a reply, an error or the end of input, never hang or panic.
func FuzzQMPExecute(f *testing.F) {
	for _, seed := range []string{
		`{"return": {}}` + "\r\n",
		`{"event": "RESUME", "data": {}}` + "\n" + `{"return": {}}` + "\n",
		`{"error": {"class": "GenericError", "desc": "no screen"}}` + "\n",
		`{"return"`, "\n", "{}\n", "null\n", `{"return": null}` + "\n", "\xff\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, out []byte) {
		client, server := net.Pipe()
		go func() {
			defer func() { _ = server.Close() }()
			go func() { _, _ = io.Copy(io.Discard, server) }()
			_, _ = server.Write(out)
		}()
		m := &qmp{conn: client, r: newQMPReader(client), stop: func() bool { return true }}
		defer func() { _ = m.Close() }()
		_ = m.execute("screendump", map[string]string{"filename": "/dev/null"})
	})
}
