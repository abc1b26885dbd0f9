package cloudinit

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"testing"

	"sigs.k8s.io/yaml"
)

// cloudInitView is what cloud-init's own code makes of user-data
// (testdata/cloudinit_userdata.py).
type cloudInitView struct {
	Parts []struct {
		Type    string `json:"type"`
		Payload []byte `json:"payload"` // base64 in the JSON
	} `json:"parts"`
	CloudConfig map[string]any `json:"cloud_config"`
	// dir holds cloud-config.txt, the merged cloud-config cloud-init wrote.
	dir string
}

// readWithCloudInit runs data through cloud-init's UserDataProcessor, part
// walker and cloud-config merger.
func readWithCloudInit(t *testing.T, python string, data []byte) cloudInitView {
	t.Helper()
	dir := t.TempDir()
	file := filepath.Join(dir, "user-data")
	if err := os.WriteFile(file, data, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(python, filepath.Join("testdata", "cloudinit_userdata.py"), file, dir)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("cloud-init's user-data code failed: %v\n%s\nuser-data:\n%s", err, stderr.Bytes(), data)
	}
	var v cloudInitView
	if err := json.Unmarshal(out, &v); err != nil {
		t.Fatalf("decoding %s: %v", out, err)
	}
	v.dir = dir
	return v
}

// TestCloudInitReadsMergedUserData hands Merge output to cloud-init's own
// code: every part the user's data yields standalone comes out, byte for
// byte and typed the same, followed by Virtstation's cloud-config part.
func TestCloudInitReadsMergedUserData(t *testing.T) {
	python := cloudInitPython(t)
	part := mustRender(t, testParts["everything"])
	for name, tc := range userDataCases() {
		t.Run(name, func(t *testing.T) {
			got := readWithCloudInit(t, python, Merge(tc.data, part))
			want := tc.parts
			if want == nil {
				want = []userPart{{tc.ctype, string(tc.data)}}
			}
			want = append(append([]userPart(nil), want...), userPart{typeCloudConfig, string(part)})
			if len(got.Parts) != len(want) {
				t.Fatalf("cloud-init found %d parts, want %d: %+v", len(got.Parts), len(want), got.Parts)
			}
			for i, w := range want {
				if got.Parts[i].Type != w.ctype {
					t.Errorf("part %d: type %q, want %q", i, got.Parts[i].Type, w.ctype)
				}
				if string(got.Parts[i].Payload) != w.payload {
					t.Errorf("part %d: payload\n%q\nwant\n%q", i, got.Parts[i].Payload, w.payload)
				}
			}
			bootcmd, _ := got.CloudConfig["bootcmd"].([]any)
			if len(bootcmd) == 0 || !reflect.DeepEqual(bootcmd[len(bootcmd)-1], []any{"sh", "-c", MountScript(testParts["everything"].Mounts, "alice")}) {
				t.Errorf("merged cloud-config does not end its bootcmd with the mount script: %v", got.CloudConfig["bootcmd"])
			}
		})
	}
}

// TestCloudInitMergesCloudConfig checks, with cloud-init's own merger, that
// merge_how appends our lists to the user's and keeps the user's values; and
// validates the merged cloud-config with cloud-init's schema.
func TestCloudInitMergesCloudConfig(t *testing.T) {
	python := cloudInitPython(t)
	ci := requireTool(t, "cloud-init", "cloud-init")
	everything := testParts["everything"]
	userCC := "#cloud-config\n" +
		"hostname: user-host\n" +
		"bootcmd:\n- echo user-boot\n" +
		"runcmd:\n- [echo, user-run]\n" +
		"users:\n- default\n- name: bob\n" +
		"ssh_authorized_keys:\n- ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIUserKey user\n"
	mountEntry := []any{"sh", "-c", MountScript(everything.Mounts, everything.Owner)}
	chownEntry := []any{"sh", "-c", chownPendingScript(everything.Mounts, everything.Owner)}
	cases := map[string]struct {
		user string
		part Part
		want map[string]any
	}{
		"user cloud-config, everything": {
			user: userCC,
			part: everything,
			want: map[string]any{
				"hostname":            "user-host",
				"bootcmd":             []any{"echo user-boot", mountEntry},
				"runcmd":              []any{[]any{"echo", "user-run"}, chownEntry},
				"users":               []any{"default", map[string]any{"name": "bob"}, "default", map[string]any{"name": "alice", "ssh_authorized_keys": []any{testKeyA, testKeyB}}},
				"ssh_authorized_keys": []any{"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIUserKey user"},
			},
		},
		"user cloud-config, keys for the default user": {
			user: userCC,
			part: testParts["keys-default-user"],
			want: map[string]any{
				"hostname":            "user-host",
				"bootcmd":             []any{"echo user-boot"},
				"runcmd":              []any{[]any{"echo", "user-run"}},
				"users":               []any{"default", map[string]any{"name": "bob"}},
				"ssh_authorized_keys": []any{"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIUserKey user", testKeyA, testKeyB},
			},
		},
		"user shell script": {
			user: "#!/bin/sh\necho hi\n",
			part: everything,
			want: map[string]any{
				"bootcmd": []any{mountEntry},
				"runcmd":  []any{chownEntry},
				"users":   []any{"default", map[string]any{"name": "alice", "ssh_authorized_keys": []any{testKeyA, testKeyB}}},
			},
		},
		"no user data": {
			part: testParts["mounts-only"],
			want: map[string]any{
				"bootcmd": []any{[]any{"sh", "-c", MountScript(testParts["mounts-only"].Mounts, "")}},
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := readWithCloudInit(t, python, Merge([]byte(tc.user), mustRender(t, tc.part)))
			if !reflect.DeepEqual(got.CloudConfig, tc.want) {
				gotY, _ := yaml.Marshal(got.CloudConfig)
				wantY, _ := yaml.Marshal(tc.want)
				t.Fatalf("cloud-init merged\n%s\nwant\n%s", gotY, wantY)
			}
			out, err := exec.Command(ci, "schema", "--config-file", filepath.Join(got.dir, "cloud-config.txt")).CombinedOutput()
			if err != nil {
				t.Errorf("cloud-init schema rejects the merged cloud-config: %v\n%s", err, out)
			}
		})
	}
}

// TestDetectTypeMatchesCloudInit compares detectType with cloud-init's
// handlers.type_from_starts_with, which re-types a text/plain part.
func TestDetectTypeMatchesCloudInit(t *testing.T) {
	python := cloudInitPython(t)
	inputs := []string{
		"", " ", "\n\n", "hello",
		"#cloud-config", "#cloud-config\n", "#cloud-config-archive\n", "#cloud-config-jsonp\n",
		"#cloud-boothook\n", "#include\n", "#include-once\n", "#!", "#!/bin/bash\n", "#part-handler\n",
		"## template: jinja\n", "## template:jinja\n", "text/x-shellscript-per-boot\n",
		"text/x-shellscript-per-instance\n", "text/x-shellscript-per-once\n",
		"#CLOUD-CONFIG\n", "#Cloud-Config-JSONP\n", " \t\r\n\v\f#cloud-config\n",
		"\x1c\x1d\x1e\x1f#!/bin/sh\n", "\u00a0\u3000\u2028\u0085#cloud-config\n",
		"\u200b#cloud-config\n",  // zero-width space is not white space
		"#cloud-boothoo\u212a\n", // KELVIN SIGN lower-cases to k
		"#\u0130nclude\n",        // U+0130 lower-cases to i and a combining dot
		"\xff#cloud-config\n", "#cloud-config\xff\n", "#!\xff",
		"# cloud-config\n", "#cloud-conf", "#\n", "##", "#includ",
	}
	payloads := make([]string, len(inputs))
	for i, in := range inputs {
		payloads[i] = base64.StdEncoding.EncodeToString([]byte(in))
	}
	req, err := json.Marshal(payloads)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(python, filepath.Join("testdata", "cloudinit_userdata.py"), "--detect")
	cmd.Stdin = bytes.NewReader(req)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("cloud-init detection failed: %v\n%s", err, stderr.Bytes())
	}
	var want []*string
	if err := json.Unmarshal(out, &want); err != nil || len(want) != len(inputs) {
		t.Fatalf("decoding %s: %v", out, err)
	}
	for i, in := range inputs {
		w := typePlain
		if want[i] != nil {
			w = *want[i]
		}
		if got := detectType([]byte(in)); got != w {
			t.Errorf("detectType(%q) = %q, cloud-init says %q", in, got, w)
		}
	}
}
