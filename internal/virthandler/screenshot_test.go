package virthandler

import (
	"bytes"
	"encoding/json"
	"image/png"
	"io"
	"net/http"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/virtstation/virtstation/internal/qemu"
)

func TestScreenshotIsQEMUsDisplay(t *testing.T) {
	f := newFixture(t)
	vm, err := qemu.Start(t.Context(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = vm.Stop() })
	f.srv.Register("default", "real", Target{Console: vm.SerialSocket, VNC: vm.VNCSocket, QMP: vm.QMPSocket})
	f.srv.Register("default", "headless", Target{Console: f.target.Console, QMP: vm.QMPSocket})
	// vm1's sockets are echo servers: no monitor behind them.

	screenshot := func(name, query string) string {
		return basePath + "/namespaces/default/virtualmachineinstances/" + name + "/vnc/screenshot" + query
	}
	cases := map[string]struct {
		path       string
		want       int
		moveCursor bool
	}{
		"running VMI":              {screenshot("real", "?moveCursor=false"), http.StatusOK, false},
		"moveCursor is recorded":   {screenshot("real", "?moveCursor=true"), http.StatusOK, true},
		"unknown VMI":              {screenshot("nope", ""), http.StatusNotFound, false},
		"VMI without a display":    {screenshot("headless", ""), http.StatusBadRequest, false},
		"no monitor to ask":        {screenshot("vm1", ""), http.StatusInternalServerError, false},
		"POST is not a screenshot": {screenshot("real", ""), http.StatusMethodNotAllowed, false},
	}
	w, h, err := vm.ScreenSize(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			method := http.MethodGet
			if tc.want == http.StatusMethodNotAllowed {
				method = http.MethodPost
			}
			req, err := http.NewRequestWithContext(t.Context(), method, "https://"+f.srv.Addr()+tc.path, nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("X-Remote-User", "system:serviceaccount:virtstation-system:virtstation-bridge")
			resp, err := f.client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = resp.Body.Close() }()
			body, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != tc.want {
				t.Fatalf("status %d (%s), want %d", resp.StatusCode, body, tc.want)
			}
			if tc.want == http.StatusMethodNotAllowed {
				return
			}
			if tc.want != http.StatusOK {
				var st metav1.Status
				if err := json.Unmarshal(body, &st); err != nil || int(st.Code) != tc.want {
					t.Fatalf("refusal body %s is not a Status with code %d (%v)", body, tc.want, err)
				}
				return
			}
			if ct := resp.Header.Get("Content-Type"); ct != "image/png" {
				t.Errorf("Content-Type %q, want image/png", ct)
			}
			img, err := png.Decode(bytes.NewReader(body))
			if err != nil {
				t.Fatalf("body is not a PNG: %v", err)
			}
			if got := img.Bounds().Size(); got.X != int(w) || got.Y != int(h) {
				t.Errorf("screenshot is %v, QEMU's display %dx%d", got, w, h)
			}
			calls := f.srv.Calls()
			last := calls[len(calls)-1]
			if last.Kind != Screenshot || last.Name != "real" || last.Status != http.StatusOK || last.MoveCursor != tc.moveCursor ||
				last.User != "system:serviceaccount:virtstation-system:virtstation-bridge" {
				t.Errorf("recorded call %+v, want a screenshot of real by the bridge, moveCursor %v, answered 200", last, tc.moveCursor)
			}
		})
	}
}

func TestVersion(t *testing.T) {
	f := newFixture(t)
	resp, err := f.client().Get("https://" + f.srv.Addr() + basePath + "/version")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	var info VersionInfo
	dec := json.NewDecoder(resp.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&info); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || info.GitVersion != "v1.9.0" || info.Platform == "" {
		t.Fatalf("version %d %+v, want 200 and KubeVirt's version.Info for v1.9.0", resp.StatusCode, info)
	}
}
