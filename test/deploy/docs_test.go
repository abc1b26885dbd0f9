package deploy

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// docCommandTimeout bounds one command of the docs: helm install and
// kubectl apply against a local API server take seconds.
const docCommandTimeout = 3 * time.Minute

// installHeading is the README section whose commands TestDocsCommands runs
// when README.md has it.
const installHeading = "## Install on a cluster"

// commandDocs are the pages whose ```sh blocks TestDocsCommands runs, in
// order, each on a cluster cleaned of Virtstation after the page before.
var commandDocs = []struct {
	path    string
	section string // a "## " heading; "" is the whole page
	// optional: the page or section may be absent.
	optional bool
	// setup runs before the page's commands: what the page assumes.
	setup []string
}{
	{path: "README.md", section: installHeading, optional: true},
	{path: "docs/install.md"},
	{path: "docs/upgrade.md", setup: []string{"helm install virtstation charts/virtstation -n virtstation-system --create-namespace"}},
	{path: "docs/gitops.md"},
}

// docCommand is one shell command of a page: continuation lines joined,
// comments left out.
type docCommand struct {
	line int // of the page, where the command starts
	text string
}

// TestDocsCommands runs every command of the install, upgrade and GitOps
// pages (and of README's install section, when it has one) against a real
// kube-apiserver with the cert-manager, KubeVirt and CDI CRDs: `helm` is
// bin/helm, `kubectl` the one in $KUBEBUILDER_ASSETS, through a kubeconfig for that
// API server. The commands install for real; nothing runs the images
// (envtest has no kubelet), so what is checked is what the API server and
// Helm accept. Two adaptations, because envtest has no controllers: deleted
// namespaces are emptied and finalized by the test, as the namespace
// controller would; and `make` commands other than `make images` are
// printed (make -n), not run, since they build with Docker. A `docker`
// command is not run either (no engine here); its image names are checked
// by TestImageNamesAgree.
func TestDocsCommands(t *testing.T) {
	// kubectl v1.37 as envtest's binary sets carry it, built by
	// hack/envtest-bins.sh next to the API server.
	kubectl := filepath.Join(os.Getenv("KUBEBUILDER_ASSETS"), "kubectl")
	if _, err := os.Stat(kubectl); err != nil {
		t.Fatalf("no kubectl in KUBEBUILDER_ASSETS (make envtest-bins builds it): %v", err)
	}
	p := installPlane(t)
	sh := newDocShell(t, kubectl, writeKubeconfig(t, p.Config))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); finalizeNamespaces(ctx, t, p) }()
	defer func() { cancel(); <-done }()

	for _, doc := range commandDocs {
		t.Run(doc.path, func(t *testing.T) {
			cmds, err := docCommands(filepath.Join(repoRoot(t), doc.path), doc.section)
			if errors.Is(err, errNoSection) && doc.optional {
				t.Skipf("%s has no %q section", doc.path, doc.section)
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(cmds) == 0 && !doc.optional {
				t.Fatalf("%s has no ```sh commands", doc.path)
			}
			defer sh.cleanUp(t)
			for _, c := range doc.setup {
				if out, err := sh.run(c); err != nil {
					t.Fatalf("setup %q: %v\n%s", c, err, out)
				}
			}
			for _, c := range cmds {
				out, err := sh.run(c.text)
				if err != nil {
					t.Fatalf("%s:%d: %s\n%v\n%s", doc.path, c.line, c.text, err, out)
				}
				t.Logf("%s:%d: %s: ok", doc.path, c.line, firstLine([]byte(c.text)))
			}
		})
	}
}

// docShell runs the docs' commands with bash, `helm` and `kubectl` on PATH
// and KUBECONFIG pointing at the test's API server.
type docShell struct {
	t   *testing.T
	dir string
	env []string
}

func newDocShell(t *testing.T, kubectl, kubeconfig string) *docShell {
	t.Helper()
	bin := t.TempDir()
	for name, target := range map[string]string{"helm": helmBinary(t), "kubectl": kubectl} {
		if err := os.Symlink(target, filepath.Join(bin, name)); err != nil {
			t.Fatal(err)
		}
	}
	home := t.TempDir()
	return &docShell{t: t, dir: repoRoot(t), env: []string{
		"PATH=" + bin + string(os.PathListSeparator) + os.Getenv("PATH"),
		"KUBECONFIG=" + kubeconfig,
		"HELM_CACHE_HOME=" + filepath.Join(home, "cache"), "HELM_CONFIG_HOME=" + filepath.Join(home, "config"),
		"HELM_DATA_HOME=" + filepath.Join(home, "data"), "KUBECACHEDIR=" + filepath.Join(home, "kube-cache"),
	}}
}

// run runs one command of a page and returns its combined output.
func (s *docShell) run(cmd string) (string, error) {
	fields := strings.Fields(cmd)
	switch {
	case len(fields) == 0:
		return "", nil
	case fields[0] == "helm" || fields[0] == "kubectl":
	case fields[0] == "make" && len(fields) > 1 && fields[1] != "images":
		cmd = "make -n " + strings.Join(fields[1:], " ")
	case fields[0] == "make":
	case fields[0] == "docker":
		s.t.Logf("not run (no Docker engine here): %s", cmd)
		return "", nil
	default:
		return "", fmt.Errorf("%q is not a command this test runs (helm, kubectl, make, docker)", fields[0])
	}
	ctx, cancel := context.WithTimeout(context.Background(), docCommandTimeout)
	defer cancel()
	c := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", cmd)
	c.Dir = s.dir
	c.Env = append(os.Environ(), s.env...)
	out, err := c.CombinedOutput()
	return string(out), err
}

// cleanUp uninstalls every Helm release and what config/default installs,
// so that the next page starts from a cluster without Virtstation.
func (s *docShell) cleanUp(t *testing.T) {
	t.Helper()
	out, err := s.run("helm list -A -o json")
	if err != nil {
		t.Fatalf("helm list: %v\n%s", err, out)
	}
	var releases []struct{ Name, Namespace string }
	if err := json.Unmarshal([]byte(out), &releases); err != nil {
		t.Fatalf("helm list: %v\n%s", err, out)
	}
	for _, r := range releases {
		if out, err := s.run("helm uninstall " + r.Name + " -n " + r.Namespace); err != nil {
			t.Errorf("clean up: %v\n%s", err, out)
		}
	}
	if out, err := s.run("kubectl delete -k config/default --ignore-not-found"); err != nil {
		t.Errorf("clean up: %v\n%s", err, out)
	}
}

// errNoSection is returned for a page without the section asked for.
var errNoSection = errors.New("no such section")

// docCommands returns the commands of the ```sh blocks of a page, or of one
// of its "## " sections.
func docCommands(path, section string) ([]docCommand, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	var (
		cmds                  []docCommand
		fence, inBlock, found bool
		inSection             = section == ""
		cur                   *docCommand
	)
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		if !fence && section != "" && strings.HasPrefix(line, "## ") {
			inSection = line == section
			found = found || inSection
		}
		switch {
		case strings.HasPrefix(trimmed, "```"):
			fence = !fence
			inBlock = fence && trimmed == "```sh" && inSection
			continue
		case !inBlock || trimmed == "" || strings.HasPrefix(trimmed, "#"):
			continue
		}
		if cur == nil {
			cur = &docCommand{line: n}
		}
		text, more := strings.CutSuffix(trimmed, `\`)
		cur.text = strings.TrimSpace(cur.text + " " + text)
		if !more {
			cmds = append(cmds, *cur)
			cur = nil
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if section != "" && !found {
		return nil, errNoSection
	}
	return cmds, nil
}

// TestDocCommandsParsing checks what TestDocsCommands takes from a page:
// only ```sh blocks, only in the section asked for, continuation lines
// joined, comments left out; and a missing section is errNoSection.
func TestDocCommandsParsing(t *testing.T) {
	page := "# T\n```sh\nmake images\n```\n## Install on a cluster\n```yaml\n## not a heading\nkey: v\n```\n" +
		"```sh\n# a comment\nhelm install a b \\\n  --set x=y\n\nkubectl get pods\n```\n## Next\n```sh\nkubectl delete ns x\n```\n"
	path := filepath.Join(t.TempDir(), "page.md")
	if err := os.WriteFile(path, []byte(page), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		section string
		want    []docCommand
		err     error
	}{
		"whole page": {want: []docCommand{{3, "make images"}, {12, "helm install a b --set x=y"}, {15, "kubectl get pods"}, {19, "kubectl delete ns x"}}},
		"a section":  {section: installHeading, want: []docCommand{{12, "helm install a b --set x=y"}, {15, "kubectl get pods"}}},
		"no section": {section: "## Missing", err: errNoSection},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := docCommands(path, tc.section)
			if !errors.Is(err, tc.err) || !slices.Equal(got, tc.want) {
				t.Errorf("docCommands: %v, %v; want %v, %v", got, err, tc.want, tc.err)
			}
		})
	}
}
