package cloudinit

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestCloudInitSchema validates rendered parts with the installed cloud-init's
// own validator (`cloud-init schema --config-file`), and proves the validator
// rejects what it should. cloud-init 22.4's schema does not describe
// merge_how: it accepts the key as an unknown top-level key, which the schema
// allows, and does not check its value (the "merge_how is not validated" case).
// The list form used here is the one later schemas define.
func TestCloudInitSchema(t *testing.T) {
	ci := requireTool(t, "cloud-init", "cloud-init")
	type tc struct {
		doc   []byte
		valid bool
		why   string // a substring of the validator's complaint, for invalid documents
	}
	cases := map[string]tc{
		"bootcmd not a list": {
			doc: []byte("#cloud-config\nbootcmd: 5\n"),
			why: "bootcmd: 5 is not of type 'array'",
		},
		"user keys not a list": {
			doc: []byte("#cloud-config\nusers:\n- default\n- name: alice\n  ssh_authorized_keys: 5\n"),
			why: "users.1",
		},
		"top-level keys a string": {
			doc: []byte("#cloud-config\nssh_authorized_keys: " + testKeyA + "\n"),
			why: "ssh_authorized_keys",
		},
		"no #cloud-config header": {
			doc: []byte("bootcmd: [[sh, -c, 'true']]\n"),
			why: "#cloud-config",
		},
		"merge_how is not validated": {
			doc:   []byte("#cloud-config\nmerge_how: 5\n"),
			valid: true,
		},
	}
	for name, p := range testParts {
		cases["rendered "+name] = tc{doc: mustRender(t, p), valid: true}
	}
	dir := t.TempDir()
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			file := filepath.Join(dir, strings.ReplaceAll(name, " ", "-")+".yaml")
			if err := os.WriteFile(file, c.doc, 0o644); err != nil {
				t.Fatal(err)
			}
			out, err := exec.Command(ci, "schema", "--config-file", file).CombinedOutput()
			switch {
			case c.valid && err != nil:
				t.Errorf("cloud-init schema rejected it: %v\n%s\n%s", err, out, c.doc)
			case c.valid && !strings.Contains(string(out), "Valid cloud-config"):
				t.Errorf("cloud-init schema did not say valid:\n%s", out)
			case !c.valid && err == nil:
				t.Errorf("cloud-init schema accepted an invalid document:\n%s\n%s", out, c.doc)
			case !c.valid && !strings.Contains(string(out), c.why):
				t.Errorf("cloud-init schema output does not mention %q:\n%s", c.why, out)
			}
		})
	}
}
