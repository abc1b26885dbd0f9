package deploy

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"github.com/virtstation/virtstation/internal/testenv"
)

// The release the chart is rendered as, so that its object names are the
// ones config/ uses.
const (
	releaseName      = "virtstation"
	releaseNamespace = testenv.InstallNamespace
)

// certManagerOff renders the chart with the webhook managing its own
// certificates.
const certManagerOff = "certManager.enabled=false"

// openReportsOn renders the chart writing openreports.io Reports besides
// PolicyReports, as config/ grants.
const openReportsOn = "audit.openReports.enabled=true"

var (
	rootOnce sync.Once
	rootDir  string
	rootErr  error

	helmOnce sync.Once
	helmPath string
	helmErr  error
)

// repoRoot is the repository the chart and config/ are read from.
func repoRoot(t *testing.T) string {
	t.Helper()
	rootOnce.Do(func() { rootDir, rootErr = testenv.RepoRoot() })
	if rootErr != nil {
		t.Fatal(rootErr)
	}
	return rootDir
}

// helmBinary returns bin/helm, building it with hack/build-helm.sh when it
// is missing or not the version hack/tools/go.mod pins (as test/envtest
// builds the control plane with hack/envtest-bins.sh).
func helmBinary(t *testing.T) string {
	t.Helper()
	root := repoRoot(t)
	helmOnce.Do(func() { helmPath, helmErr = ensureHelm(root) })
	if helmErr != nil {
		t.Fatal(helmErr)
	}
	return helmPath
}

func ensureHelm(root string) (string, error) {
	bin := filepath.Join(root, "bin", "helm")
	want, err := command(root, nil, "go", "list", "-modfile=hack/tools/go.mod", "-m", "-f", "{{.Version}}", "helm.sh/helm/v3")
	if err != nil {
		return "", fmt.Errorf("read helm's version from hack/tools/go.mod: %w", err)
	}
	if got, err := command(root, nil, bin, "version", "--template", "{{.Version}}"); err == nil && strings.TrimSpace(got) == strings.TrimSpace(want) {
		return bin, nil
	}
	if _, err := command(root, nil, filepath.Join(root, "hack", "build-helm.sh"), bin); err != nil {
		return "", fmt.Errorf("build helm with hack/build-helm.sh: %w", err)
	}
	return bin, nil
}

// command runs name in dir and returns its stdout; the error carries stderr.
func command(dir string, env []string, name string, args ...string) (string, error) {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("%s %s: %w\n%s%s", name, strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String(), nil
}

// runHelm runs bin/helm with a private Helm home, so no user configuration
// or repository cache takes part.
func runHelm(t *testing.T, args ...string) (string, error) {
	t.Helper()
	home := t.TempDir()
	env := []string{"HELM_CACHE_HOME=" + filepath.Join(home, "cache"), "HELM_CONFIG_HOME=" + filepath.Join(home, "config"),
		"HELM_DATA_HOME=" + filepath.Join(home, "data"), "KUBECACHEDIR=" + filepath.Join(home, "kube-cache")}
	return command(repoRoot(t), env, helmBinary(t), args...)
}

// chartDir is the chart's directory.
func chartDir(t *testing.T) string {
	return filepath.Join(repoRoot(t), "charts", "virtstation")
}

// renderChart runs helm template as release virtstation in
// virtstation-system, with each value given as a --set.
func renderChart(t *testing.T, values ...string) []*unstructured.Unstructured {
	t.Helper()
	return renderChartAs(t, releaseName, releaseNamespace, values...)
}

// renderChartAs runs helm template as the given release and namespace.
func renderChartAs(t *testing.T, release, namespace string, values ...string) []*unstructured.Unstructured {
	t.Helper()
	args := []string{"template", release, chartDir(t), "--namespace", namespace}
	for _, v := range values {
		args = append(args, "--set", v)
	}
	out, err := runHelm(t, args...)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := decodeObjects([]byte(out))
	if err != nil {
		t.Fatalf("helm template %v: %v", values, err)
	}
	return objs
}

// renderKustomize builds a kustomization under config/ the way
// `kubectl kustomize` does.
func renderKustomize(t *testing.T, dir string) []*unstructured.Unstructured {
	t.Helper()
	b, err := kustomizeYAML(filepath.Join(repoRoot(t), dir))
	if err != nil {
		t.Fatal(err)
	}
	objs, err := decodeObjects(b)
	if err != nil {
		t.Fatalf("kustomize %s: %v", dir, err)
	}
	return objs
}

func kustomizeYAML(dir string) ([]byte, error) {
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	m, err := k.Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		return nil, fmt.Errorf("kustomize build %s: %w", dir, err)
	}
	return m.AsYaml()
}

// readManifests decodes a YAML file of the repository.
func readManifests(t *testing.T, path string) []*unstructured.Unstructured {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot(t), path))
	if err != nil {
		t.Fatal(err)
	}
	objs, err := decodeObjects(b)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return objs
}

// decodeObjects splits a multi-document YAML stream into objects, skipping
// empty documents.
func decodeObjects(b []byte) ([]*unstructured.Unstructured, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(b)))
	var objs []*unstructured.Unstructured
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return objs, nil
		}
		if err != nil {
			return nil, err
		}
		var m map[string]any
		if err := yaml.Unmarshal(doc, &m); err != nil {
			return nil, fmt.Errorf("decode %q: %w", firstLine(doc), err)
		}
		if len(m) == 0 {
			continue
		}
		u := &unstructured.Unstructured{Object: m}
		if u.GetKind() == "" || u.GetAPIVersion() == "" || u.GetName() == "" {
			return nil, fmt.Errorf("document without apiVersion, kind or name: %s", doc)
		}
		objs = append(objs, u)
	}
}

func firstLine(b []byte) string {
	s := strings.TrimSpace(string(b))
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// key names an object in messages and maps.
func key(u *unstructured.Unstructured) string {
	if ns := u.GetNamespace(); ns != "" {
		return u.GetKind() + " " + ns + "/" + u.GetName()
	}
	return u.GetKind() + " " + u.GetName()
}

// find returns the object of kind and name, or nil.
func find(objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	for _, u := range objs {
		if u.GetKind() == kind && u.GetName() == name {
			return u
		}
	}
	return nil
}

// mustFind is find that fails the test when the object is missing.
func mustFind(t *testing.T, objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	t.Helper()
	u := find(objs, kind, name)
	if u == nil {
		t.Fatalf("no %s %s among %v", kind, name, keys(objs))
	}
	return u
}

// ofKind returns the objects of kind.
func ofKind(objs []*unstructured.Unstructured, kind string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, u := range objs {
		if u.GetKind() == kind {
			out = append(out, u)
		}
	}
	return out
}

func keys(objs []*unstructured.Unstructured) []string {
	out := make([]string, 0, len(objs))
	for _, u := range objs {
		out = append(out, key(u))
	}
	slices.Sort(out)
	return out
}

// convert decodes u into a typed object, failing on fields the type does
// not know.
func convert[T any](t *testing.T, u *unstructured.Unstructured) *T {
	t.Helper()
	out := new(T)
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(u.Object, out, true); err != nil {
		t.Fatalf("%s: %v", key(u), err)
	}
	return out
}
