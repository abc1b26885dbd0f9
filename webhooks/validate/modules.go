package validate

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"sort"

	"k8s.io/apimachinery/pkg/types"

	"github.com/virtstation/virtstation/policies"
)

// Module is one Rego file.
type Module struct {
	// Name is the file name, such as mount_path.rego or x_test.rego; it is
	// the file in compiler messages, and an operator module replaces the
	// shipped one of the same name.
	Name string
	// Source is the Rego text.
	Source string
	// ConfigMap is the policy ConfigMap the module came from; zero for a
	// shipped module. It does not count towards the Revision.
	ConfigMap types.NamespacedName
}

// ShippedModules returns the policies embedded from policies/, tests
// included, sorted by name.
func ShippedModules() []Module {
	names, err := fs.Glob(policies.FS, "*.rego")
	if err != nil {
		panic(fmt.Sprintf("embedded policies: %v", err)) // a constant pattern cannot be malformed
	}
	out := make([]Module, 0, len(names))
	for _, n := range names {
		b, err := policies.FS.ReadFile(n)
		if err != nil {
			panic(fmt.Sprintf("embedded policy %s: %v", n, err)) // embedded files are always readable
		}
		out = append(out, Module{Name: n, Source: string(b)})
	}
	return out
}

// Merge returns the shipped modules with the operator ones added, sorted by
// name. An operator module replaces the shipped module of the same name; of
// two operator modules with one name, the later wins.
func Merge(shipped, operator []Module) []Module {
	byName := make(map[string]Module, len(shipped)+len(operator))
	for _, m := range shipped {
		byName[m.Name] = m
	}
	for _, m := range operator {
		byName[m.Name] = m
	}
	out := make([]Module, 0, len(byName))
	for _, m := range byName {
		out = append(out, m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Revision is a short hash of the modules' names and sources, independent
// of their order.
func Revision(modules []Module) string {
	sorted := append([]Module(nil), modules...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })
	h := sha256.New()
	for _, m := range sorted {
		fmt.Fprintf(h, "%d:%s%d:%s", len(m.Name), m.Name, len(m.Source), m.Source)
	}
	return hex.EncodeToString(h.Sum(nil))[:12]
}
