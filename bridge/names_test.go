package bridge

import (
	"strings"
	"testing"
)

func TestInvalidName(t *testing.T) {
	cases := map[string]struct {
		namespace, name string
		want            string // a part of the explanation; empty for valid names
	}{
		"valid":                {"team-a", "ws1", ""},
		"dotted VM name":       {"team-a", "ws1.dev", ""},
		"dot-dot":              {"team-a", "..", "not a valid VM name"},
		"dot":                  {"team-a", ".", "not a valid VM name"},
		"slash":                {"team-a", "a/b", "not a valid VM name"},
		"upper case":           {"team-a", "WS1", "not a valid VM name"},
		"too long":             {"team-a", strings.Repeat("a", 254), "not a valid VM name"},
		"namespace with a dot": {"team.a", "ws1", "not a valid namespace name"},
		"empty namespace":      {"", "ws1", "not a valid namespace name"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := invalidName(tc.namespace, tc.name)
			if tc.want == "" && got != "" || !strings.Contains(got, tc.want) {
				t.Fatalf("invalidName(%q, %q) = %q, want %q", tc.namespace, tc.name, got, tc.want)
			}
			if len(got) > 2*maxLoggedName+400 {
				t.Fatalf("the explanation is %d bytes: the name was not clipped", len(got))
			}
		})
	}
}

// FuzzInvalidName holds the name check to what the API server and a URL
// path can take: whatever it lets through names one object, at one path.
func FuzzInvalidName(f *testing.F) {
	for _, s := range [][2]string{{"team-a", "ws1"}, {"team-a", ".."}, {"a", "b.c"}, {"", "x"}, {"ns", "a/b"}, {"ns", "%2e"}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, namespace, name string) {
		if invalidName(namespace, name) != "" {
			return
		}
		if name == "." || name == ".." || strings.ContainsAny(name+namespace, "/%?#\\ \x00") || len(name) > 253 || len(namespace) > 63 {
			t.Fatalf("invalidName(%q, %q) let it through", namespace, name)
		}
	})
}
