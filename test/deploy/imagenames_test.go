package deploy

import (
	"errors"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestImageNamesAgree checks that the images `make images` names (and
// `make docker-build` builds) are the ones the chart and config/default
// pull, by default and with another registry and tag, and that the
// Dockerfiles' and the install docs' build commands use the same names: an
// image built under one name and pulled under another is an
// ImagePullBackOff.
func TestImageNamesAgree(t *testing.T) {
	cases := map[string]struct {
		makeVars, chartValues []string
		kustomize             bool
	}{
		"defaults": {kustomize: true},
		"another registry and tag": {
			makeVars:    []string{"REGISTRY=registry.example.com/virtstation", "VERSION=v0.1.0"},
			chartValues: []string{"image.registry=registry.example.com/virtstation", "image.tag=v0.1.0"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			built := makeImages(t, tc.makeVars...)
			if got := deploymentImages(t, renderChart(t, tc.chartValues...)); !maps.Equal(got, built) {
				t.Errorf("the chart pulls %v, make images names %v", got, built)
			}
			if tc.kustomize {
				if got := deploymentImages(t, renderKustomize(t, "config/default")); !maps.Equal(got, built) {
					t.Errorf("config/default pulls %v, make images names %v", got, built)
				}
			}
		})
	}
	defaults := makeImages(t)
	for component := range binaries {
		b, err := os.ReadFile(filepath.Join(repoRoot(t), "Dockerfile."+component))
		if err != nil {
			t.Fatal(err)
		}
		m := regexp.MustCompile(`-t (\S+)`).FindSubmatch(b)
		if m == nil || string(m[1]) != defaults[component] {
			t.Errorf("Dockerfile.%s's build command tags %q, make images names %q", component, m, defaults[component])
		}
	}
	install, err := os.ReadFile(filepath.Join(repoRoot(t), "docs", "install.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, ref := range defaults {
		if !strings.Contains(string(install), "\n"+ref+"\n") {
			t.Errorf("docs/install.md does not show %s, which make images prints", ref)
		}
	}
	checkDocImageNames(t)
}

// wrongImageName is an image reference of the form <registry>/virtstation/
// <component>, the README's old naming, instead of
// <registry>/virtstation-<component>.
var wrongImageName = regexp.MustCompile(`[\w.:-]+(/[\w.-]+)*/virtstation/(webhook|bridge)([:@\s` + "`" + `]|$)`)

// checkDocImageNames fails for every image reference in the install pages
// (docs/*.md and README's install section) that does not follow make
// images' naming.
func checkDocImageNames(t *testing.T) {
	t.Helper()
	root := repoRoot(t)
	pages, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	texts := map[string]string{}
	for _, p := range pages {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		texts[p] = string(b)
	}
	readme, err := sectionText(filepath.Join(root, "README.md"), installHeading)
	switch {
	case errors.Is(err, errNoSection):
		t.Logf("README.md has no %q section yet", installHeading)
	case err != nil:
		t.Fatal(err)
	default:
		texts["README.md "+installHeading] = readme
	}
	for page, text := range texts {
		for _, m := range wrongImageName.FindAllString(text, -1) {
			t.Errorf("%s: image %q: the images are <registry>/virtstation-webhook and <registry>/virtstation-bridge (make images)", page, strings.TrimSpace(m))
		}
	}
}

// sectionText returns the lines of a page's "## " section, heading
// included.
func sectionText(path, heading string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	_, rest, ok := strings.Cut("\n"+string(b), "\n"+heading+"\n")
	if !ok {
		return "", errNoSection
	}
	if i := strings.Index(rest, "\n## "); i >= 0 {
		rest = rest[:i]
	}
	return heading + "\n" + rest, nil
}

// makeImages runs `make images` with vars and maps each component to the
// reference it prints.
func makeImages(t *testing.T, vars ...string) map[string]string {
	t.Helper()
	out, err := command(repoRoot(t), nil, "make", append([]string{"-s", "images"}, vars...)...)
	if err != nil {
		t.Fatal(err)
	}
	refs := map[string]string{}
	for _, ref := range strings.Fields(out) {
		for component := range binaries {
			if strings.Contains(ref, "/virtstation-"+component+":") {
				refs[component] = ref
			}
		}
	}
	if len(refs) != len(binaries) {
		t.Fatalf("make images printed %q, want one reference per component %v", out, binaries)
	}
	return refs
}

// deploymentImages maps each Deployment's container (webhook, bridge) to
// its image.
func deploymentImages(t *testing.T, objs []*unstructured.Unstructured) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, u := range ofKind(objs, "Deployment") {
		cs, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "containers")
		for _, c := range cs {
			m := c.(map[string]any)
			out[m["name"].(string)], _ = m["image"].(string)
		}
	}
	return out
}
