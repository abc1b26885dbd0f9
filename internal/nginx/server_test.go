package nginx

import (
	"context"
	"io"
	"net/http"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func TestStartServesWithRelativeIncludesAndStops(t *testing.T) {
	addr, err := Reserve()
	if err != nil {
		t.Fatal(err)
	}
	s, err := Start(context.Background(), Options{
		Addr: addr,
		HTTP: "server {\n    listen " + addr + ";\n    root html;\n    include location.d/*.conf;\n}\n",
		Files: map[string][]byte{
			"html/index.html":        []byte("page\n"),
			"location.d/answer.conf": []byte("location = /answer { return 200 \"42\\n\"; }\n"),
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{"/index.html": "page\n", "/answer": "42\n"} {
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK || string(b) != want {
			t.Errorf("GET %s = %s %q (%v), want %q\n%s", path, resp.Status, b, err, want, s.Logs())
		}
	}
	// nginx runs without privilege: as the test's user, or as nobody for root.
	pid, err := os.ReadFile(filepath.Join(s.Dir, "nginx.pid"))
	if err != nil {
		t.Fatal(err)
	}
	status, err := os.ReadFile("/proc/" + strings.TrimSpace(string(pid)) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	want := strconv.Itoa(os.Geteuid())
	if want == "0" {
		u, err := user.Lookup("nobody")
		if err != nil {
			t.Fatal(err)
		}
		want = u.Uid
	}
	for _, line := range strings.Split(string(status), "\n") {
		if fields := strings.Fields(line); len(fields) > 2 && fields[0] == "Uid:" && fields[2] != want {
			t.Errorf("nginx runs as uid %s, want %s", fields[2], want)
		}
	}
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := http.Get("http://" + addr + "/answer"); err == nil {
		t.Fatal("nginx still answers after Stop")
	}
	if _, err := os.Stat(s.Dir); !os.IsNotExist(err) {
		t.Fatalf("its directory is still there: %v", err)
	}
}

func TestStartReportsNginxsConfigError(t *testing.T) {
	addr, err := Reserve()
	if err != nil {
		t.Fatal(err)
	}
	_, err = Start(context.Background(), Options{Addr: addr, HTTP: "server { listen " + addr + "; no_such_directive on; }\n"})
	if err == nil || !strings.Contains(err.Error(), `unknown directive "no_such_directive"`) {
		t.Fatalf("Start = %v, want nginx's own error", err)
	}
}
