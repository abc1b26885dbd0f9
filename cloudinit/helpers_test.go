package cloudinit

import (
	"bufio"
	"bytes"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// testParts are the parts the golden, schema and cloud-init tests share.
var testParts = map[string]Part{
	"mounts-only": {
		Mounts: []Mount{{Serial: "vs-data", Path: "/data"}, {Serial: "vs-scratch", Path: "/scratch"}},
	},
	"owner": {
		Mounts: []Mount{{Serial: "vs-home", Path: "/home/alice/work"}},
		Owner:  "alice",
	},
	"keys-default-user": {
		AuthorizedKeys: []string{testKeyA, testKeyB},
	},
	"keys-owner": {
		Owner:          "alice",
		AuthorizedKeys: []string{testKeyA},
	},
	"everything": {
		Mounts:         []Mount{{Serial: "vs-data", Path: "/data"}, {Serial: "a.b+c-d_e", Path: "/srv/projects"}},
		Owner:          "alice",
		AuthorizedKeys: []string{testKeyA, testKeyB},
	},
}

const (
	testKeyA = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl alice@example"
	testKeyB = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBM5y7ZBAd3sXSdCkTZ1aQH0N7uVr2Sx6jRcRbd1hvuS laptop"
)

// mustRender renders p or fails the test.
func mustRender(t testing.TB, p Part) []byte {
	t.Helper()
	b, err := p.Render()
	if err != nil {
		t.Fatalf("Render: %v", err)
	}
	return b
}

// golden compares got with testdata/name, or rewrites it under -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./cloudinit -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file (run go test ./cloudinit -update after checking the diff)\n--- got ---\n%s\n--- want ---\n%s", path, got, want)
	}
}

// requireTool returns the path of a command the tests need, failing (never
// skipping) with the Debian package that provides it.
func requireTool(t testing.TB, name, debPackage string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		// sbin is not on every PATH, though root's tools live there.
		for _, dir := range []string{"/usr/sbin", "/sbin"} {
			if _, serr := os.Stat(filepath.Join(dir, name)); serr == nil {
				return filepath.Join(dir, name)
			}
		}
		t.Fatalf("%s not found: install Debian's %s (apt-get install -y %s)", name, debPackage, debPackage)
	}
	return p
}

// cloudInitPython returns cloud-init's own interpreter (the shebang of the
// cloud-init command), which imports the cloudinit modules the tests drive.
func cloudInitPython(t testing.TB) string {
	t.Helper()
	ci := requireTool(t, "cloud-init", "cloud-init")
	f, err := os.Open(ci)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }() // read-only
	line, err := bufio.NewReader(f).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "#!") {
		t.Fatalf("%s has no #! line (%v): install Debian's cloud-init (apt-get install -y cloud-init)", ci, err)
	}
	fields := strings.Fields(strings.TrimPrefix(line, "#!"))
	if len(fields) == 0 {
		t.Fatalf("%s: empty #! line", ci)
	}
	return fields[0]
}
