package session

import (
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
)

// FuzzParseHolder: parsing never panics, and what parses formats back to
// the same holder identity.
func FuzzParseHolder(f *testing.F) {
	for _, s := range []string{"", "/", "a/", "/b", "replica-0/ABC", "reserved/alice", "reserved/", "a/b/c", "reserved/system:serviceaccount:ns:sa"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		h, ok := parseHolder(s)
		if !ok {
			return
		}
		if got := h.String(); got != s {
			t.Errorf("parseHolder(%q) = %+v, formats as %q", s, h, got)
		}
		if (h.ReservedFor == "") == (h.Replica == "" || h.Session == "") {
			t.Errorf("parseHolder(%q) = %+v: neither a session nor a reservation", s, h)
		}
	})
}

// FuzzLeaseName: every valid key has a Lease name the API server accepts.
func FuzzLeaseName(f *testing.F) {
	f.Add("default", "ws", "console")
	f.Add("a", "b.c-d", "vnc")
	f.Fuzz(func(t *testing.T, namespace, name, mode string) {
		k := Key{Namespace: namespace, Name: name, Mode: mode}
		if k.validate() != nil {
			return
		}
		if errs := validation.IsDNS1123Label(leaseName(k)); len(errs) > 0 {
			t.Errorf("lease name %q for %v: %v", leaseName(k), k, errs)
		}
	})
}
