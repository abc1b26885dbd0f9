package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestFilename: -f takes files, directories (their own .json, .yaml and
// .yml files; with -R every one below) and - for stdin, repeated, in the
// order given, as kubectl's --filename does.
func TestFilename(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"vms/a.yaml":        testVM("a"),
		"vms/b.yml":         testVM("b"),
		"vms/c.json":        `{"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine", "metadata": {"name": "c"}, "spec": {}}`,
		"vms/notes.txt":     "not a manifest",
		"vms/nested/d.yaml": testVM("d"),
		"vms/empty/README":  "no manifests here",
		"one.manifest":      testVM("e"),
	})
	// A link to a directory, named on the command line, is followed; a link
	// inside a directory (it may lead anywhere, a kubeconfig say) is not.
	if err := os.Symlink("vms", filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(dir, "one.manifest"), filepath.Join(dir, "vms", "linked.yaml")); err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		args      []string
		stdin     string
		wantCode  int
		wantNames []string
		wantErr   string
	}{
		"a directory's own files":     {args: []string{"-f", "vms"}, wantNames: []string{"a", "b", "c"}},
		"a directory, -R":             {args: []string{"-f", "vms", "-R"}, wantNames: []string{"a", "b", "c", "d"}},
		"a directory, --recursive":    {args: []string{"--filename", "vms", "--recursive"}, wantNames: []string{"a", "b", "c", "d"}},
		"stdin":                       {args: []string{"-f", "-"}, stdin: testVM("s"), wantNames: []string{"s"}},
		"repeated, in order":          {args: []string{"-f", "one.manifest", "-f", "-", "-f", "vms/nested"}, stdin: testVM("s"), wantNames: []string{"e", "s", "d"}},
		"a file of any name":          {args: []string{"-f", "one.manifest"}, wantNames: []string{"e"}},
		"stdin twice":                 {args: []string{"-f", "-", "--objects", "-"}, wantCode: exitBadInput, wantErr: "render: stdin: - (stdin) given more than once"},
		"a directory without any":     {args: []string{"-f", "vms/empty"}, wantCode: exitBadInput, wantErr: "render: vms/empty: no .json, .yaml or .yml files in the directory (add -R to descend into its directories)"},
		"a missing file":              {args: []string{"-f", "vms/nope.yaml"}, wantCode: exitBadInput, wantErr: "render: vms/nope.yaml: open vms/nope.yaml: no such file or directory"},
		"--objects takes a directory": {args: []string{"-f", "one.manifest", "--objects", "vms", "-R"}, wantNames: []string{"e"}},
		"a link to a directory":       {args: []string{"-f", "link"}, wantNames: []string{"a", "b", "c"}},
		"a link inside is skipped":    {args: []string{"-f", "vms"}, wantNames: []string{"a", "b", "c"}, wantErr: "Warning: vms/linked.yaml: skipped: not a regular file (name it with -f to read it)"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Chdir(dir)
			args := append([]string{"render", "--no-policies"}, tc.args...)
			code, stdout, stderr := runCLI(t, tc.stdin, args...)
			if code != tc.wantCode {
				t.Fatalf("exit %d, want %d; stderr:\n%s", code, tc.wantCode, stderr)
			}
			if tc.wantErr != "" && !strings.Contains(stderr, tc.wantErr) {
				t.Fatalf("stderr lacks %q:\n%s", tc.wantErr, stderr)
			}
			if got := renderedNames(stdout); tc.wantCode == exitOK && !slices.Equal(got, tc.wantNames) {
				t.Fatalf("rendered %v, want %v", got, tc.wantNames)
			}
		})
	}
}

// TestLongFlags: every short flag has a long form that does the same.
func TestLongFlags(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"vm.yaml": testVM("a")})
	t.Chdir(dir)
	codeS, short, errS := runCLI(t, "", "render", "-f", "vm.yaml", "-n", "team-a", "-o", "json")
	codeL, long, errL := runCLI(t, "", "render", "--filename", "vm.yaml", "--namespace=team-a", "--output=json")
	if codeS != exitOK || codeL != exitOK || short != long || errS != errL {
		t.Fatalf("short: exit %d %s; long: exit %d %s", codeS, errS, codeL, errL)
	}
	if !strings.Contains(long, `"namespace": "team-a"`) {
		t.Fatalf("--namespace not applied:\n%s", long)
	}
}

// TestInputWarnings: an unknown virtstation.io/ key and a key given twice
// in a mapping are warned of on stderr, kubectl's way ("Warning: "), with
// the file (and line); the render itself is unchanged.
func TestInputWarnings(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"vm.yaml": `apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata:
  name: typo
  namespace: team-a
  labels:
    virtstation.io/managed: "true"
    virtstation.io/manged: "true"
  annotations:
    virtstation.io/data-disk: home:/home/u
    virtstation.io/managed: "true"
    virtstation.io/mac: auto
    virtstation.io/mac: "off"
    example.com/other: kept
spec: {template: {spec: {domain: {devices: {}}}}}
`,
		"clean.yaml": testVM("typo"),
	})
	t.Chdir(dir)
	code, stdout, stderr := runCLI(t, "", "render", "--no-policies", "-f", "vm.yaml")
	if code != exitOK {
		t.Fatalf("exit %d; stderr:\n%s", code, stderr)
	}
	want := []string{
		`Warning: vm.yaml:13: duplicate key "virtstation.io/mac" in metadata.annotations (first on line 12): the last value is used`,
		`Warning: vm.yaml: VirtualMachine team-a/typo: unknown annotation "virtstation.io/data-disk", which Virtstation ignores; did you mean "virtstation.io/data-disks"? (virtstation.io/data-disk is a label, not an annotation)`,
		`Warning: vm.yaml: VirtualMachine team-a/typo: unknown annotation "virtstation.io/managed", which Virtstation ignores (virtstation.io/managed is a label, not an annotation)`,
		`Warning: vm.yaml: VirtualMachine team-a/typo: unknown label "virtstation.io/manged", which Virtstation ignores; did you mean "virtstation.io/managed"?`,
	}
	if got := strings.Split(strings.TrimSuffix(stderr, "\n"), "\n"); !slices.Equal(got, want) {
		t.Fatalf("stderr:\n%s\nwant:\n%s", stderr, strings.Join(want, "\n"))
	}
	if !strings.Contains(stdout, "virtstation.io/mac: \"off\"") {
		t.Fatalf("the last value of the duplicate key is not the one rendered:\n%s", stdout)
	}
	// An object without a namespace is named in the one -n gives.
	noNamespace := "apiVersion: kubevirt.io/v1\nkind: VirtualMachine\nmetadata: {name: bare, annotations: {virtstation.io/vidoe: vga}}\nspec: {}\n"
	_, _, stderr = runCLI(t, noNamespace, "render", "--no-policies", "-n", "team-b", "-f", "-")
	if !strings.Contains(stderr, "VirtualMachine team-b/bare: unknown annotation \"virtstation.io/vidoe\"") {
		t.Fatalf("the warning does not name the VM in -n's namespace:\n%s", stderr)
	}
	if code, _, stderr := runCLI(t, "", "render", "--no-policies", "-f", filepath.Join(dir, "clean.yaml")); code != exitOK || stderr != "" {
		t.Fatalf("a clean manifest: exit %d, stderr %q", code, stderr)
	}
}
