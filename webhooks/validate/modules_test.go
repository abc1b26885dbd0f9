package validate

import (
	"slices"
	"strings"
	"testing"
)

func TestMerge(t *testing.T) {
	shipped := []Module{{Name: "b.rego", Source: "b"}, {Name: "a.rego", Source: "a"}}
	operator := []Module{{Name: "c.rego", Source: "c1"}, {Name: "a.rego", Source: "a2"}, {Name: "c.rego", Source: "c2"}}
	got := Merge(shipped, operator)
	want := []Module{{Name: "a.rego", Source: "a2"}, {Name: "b.rego", Source: "b"}, {Name: "c.rego", Source: "c2"}}
	if !slices.Equal(got, want) {
		t.Errorf("Merge = %v, want %v", got, want)
	}
	if Revision(got) != Revision([]Module{want[2], want[0], want[1]}) {
		t.Error("Revision depends on order")
	}
	if Revision(got) == Revision(shipped) || len(Revision(got)) != 12 {
		t.Errorf("Revision %q", Revision(got))
	}
	// Name and source boundaries matter.
	if Revision([]Module{{Name: "ab", Source: "c"}}) == Revision([]Module{{Name: "a", Source: "bc"}}) {
		t.Error("Revision ignores the name/source boundary")
	}
}

func TestShippedModules(t *testing.T) {
	var names []string
	for _, m := range ShippedModules() {
		names = append(names, m.Name)
		if strings.TrimSpace(m.Source) == "" {
			t.Errorf("%s is empty", m.Name)
		}
	}
	for _, rule := range []string{"mount_path", "disk_claim", "shared_memory", "virtstation"} {
		for _, f := range []string{rule + ".rego", rule + "_test.rego"} {
			if !slices.Contains(names, f) {
				t.Errorf("shipped modules %v lack %s", names, f)
			}
		}
	}
}
