package deploy

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// binaries are the images' commands: the Dockerfile, the package it builds
// and the Deployment container that runs it.
var binaries = map[string]string{"webhook": "./cmd/webhook", "bridge": "./cmd/bridge"}

// TestDockerfiles checks each image's recipe, since no Docker engine is
// at hand to build it: a static (CGO_ENABLED=0) build of the right command
// in a builder stage, a distroless non-root final stage running the binary
// it copies, and a .dockerignore that keeps every source file and embedded
// file of the command's packages in the build context.
func TestDockerfiles(t *testing.T) {
	root := repoRoot(t)
	ignore := readDockerignore(t, filepath.Join(root, ".dockerignore"))
	for name, pkg := range binaries {
		t.Run(name, func(t *testing.T) {
			b, err := os.ReadFile(filepath.Join(root, "Dockerfile."+name))
			if err != nil {
				t.Fatal(err)
			}
			df := string(b)
			froms := regexp.MustCompile(`(?m)^FROM\s+(.+)$`).FindAllStringSubmatch(df, -1)
			if len(froms) != 2 {
				t.Fatalf("want a builder and a final stage, got FROM %v", froms)
			}
			if final := strings.TrimSpace(froms[1][1]); final != "gcr.io/distroless/static:nonroot" {
				t.Errorf("final stage FROM %s, want gcr.io/distroless/static:nonroot", final)
			}
			bin := "/virtstation-" + name
			for _, want := range []string{
				"CGO_ENABLED=0",
				"-o /out/virtstation-" + name + " " + pkg + "\n",
				"COPY --from=build /out/virtstation-" + name + " " + bin + "\n",
				"USER 65532:65532\n",
				`ENTRYPOINT ["` + bin + `"]`,
			} {
				if !strings.Contains(df, want) {
					t.Errorf("Dockerfile.%s lacks %q", name, want)
				}
			}
			for _, f := range packageFiles(t, pkg) {
				if ignore(f) {
					t.Errorf(".dockerignore leaves %s out of the build context; %s needs it", f, pkg)
				}
			}
		})
	}
}

// packageFiles lists, relative to the repository, the Go and embedded
// files of the repository's packages that pkg depends on, and go.mod/go.sum.
func packageFiles(t *testing.T, pkg string) []string {
	t.Helper()
	root := repoRoot(t)
	out, err := command(root, nil, "go", "list", "-deps",
		"-f", `{{if .Module}}{{if .Module.Main}}{{$d := .Dir}}{{range .GoFiles}}{{$d}}/{{.}}{{"\n"}}{{end}}{{range .EmbedFiles}}{{$d}}/{{.}}{{"\n"}}{{end}}{{end}}{{end}}`, pkg)
	if err != nil {
		t.Fatal(err)
	}
	files := []string{"go.mod", "go.sum"}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		rel, err := filepath.Rel(root, l)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, filepath.ToSlash(rel))
	}
	if len(files) < 3 {
		t.Fatalf("go list found no files for %s", pkg)
	}
	return files
}

// readDockerignore returns a matcher for the patterns this repository's
// .dockerignore uses: paths from the context root (a directory excludes
// everything below it) and "**/" patterns that match at any depth.
func readDockerignore(t *testing.T, path string) func(string) bool {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var patterns []string
	s := bufio.NewScanner(bytes.NewReader(b))
	for s.Scan() {
		l := strings.TrimSpace(s.Text())
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		if strings.HasPrefix(l, "!") {
			t.Fatalf(".dockerignore: exceptions (%s) are not understood by this test", l)
		}
		patterns = append(patterns, strings.TrimPrefix(l, "/"))
	}
	return func(rel string) bool {
		parts := strings.Split(rel, "/")
		for _, p := range patterns {
			if rest, ok := strings.CutPrefix(p, "**/"); ok {
				for i := range parts {
					for j := i + 1; j <= len(parts); j++ {
						if m, _ := filepath.Match(rest, strings.Join(parts[i:j], "/")); m {
							return true
						}
					}
				}
				continue
			}
			for j := 1; j <= len(parts); j++ {
				if m, _ := filepath.Match(p, strings.Join(parts[:j], "/")); m {
					return true
				}
			}
		}
		return false
	}
}

// TestDeploymentArgsAreFlags builds both commands and checks that every
// flag the chart (in both certificate modes, with every option) and
// config/default pass is one the binary defines: a renamed flag would
// otherwise only show as a crash-looping pod.
func TestDeploymentArgsAreFlags(t *testing.T) {
	root := repoRoot(t)
	flags := map[string][]string{}
	dir := t.TempDir()
	for name, pkg := range binaries {
		bin := filepath.Join(dir, name)
		if _, err := command(root, nil, "go", "build", "-o", bin, pkg); err != nil {
			t.Fatal(err)
		}
		// -help prints the flags to stderr and exits 0 (flag.ExitOnError).
		out, err := exec.Command(bin, "-help").CombinedOutput()
		if err != nil {
			t.Fatalf("%s -help: %v\n%s", name, err, out)
		}
		help := string(out)
		for _, m := range regexp.MustCompile(`(?m)^\s+-([a-z0-9-]+)`).FindAllStringSubmatch(help, -1) {
			flags[name] = append(flags[name], m[1])
		}
		if len(flags[name]) == 0 {
			t.Fatalf("%s -help listed no flags:\n%s", name, help)
		}
	}
	renderings := map[string][]*unstructured.Unstructured{
		"chart":                            renderChart(t),
		"chart certManager.enabled=false":  renderChart(t, certManagerOff, "bridge.allowedOrigins={https://a.example}", "bridge.tls.existingSecret=x"),
		"config/default":                   renderKustomize(t, "config/default"),
		"chart webhook.clientCA":           renderChart(t, append(clientCAValues, "webhook.clientCA.allowedNames={a}")...),
		"config/default webhook-client-ca": renderClientCAOverlay(t),
	}
	for rname, objs := range renderings {
		for _, u := range ofKind(objs, "Deployment") {
			d := convert[appsv1.Deployment](t, u)
			for _, c := range d.Spec.Template.Spec.Containers {
				known, ok := flags[c.Name]
				if !ok {
					t.Errorf("%s %s: container %q runs no known binary", rname, key(u), c.Name)
					continue
				}
				if len(c.Command) > 0 {
					t.Errorf("%s %s: container %q overrides the image's entrypoint", rname, key(u), c.Name)
				}
				for _, a := range c.Args {
					f, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
					if !strings.HasPrefix(a, "-") || !slices.Contains(known, f) {
						t.Errorf("%s %s: argument %q is not a flag of virtstation-%s (%v)", rname, key(u), a, c.Name, known)
					}
				}
			}
		}
	}
}
