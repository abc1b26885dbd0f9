package auth

import "testing"

// TestKubeVirtAccessCoversEveryAction keeps the table whole: every action
// asks at least one question, in KubeVirt's group, of a namespaced object.
func TestKubeVirtAccessCoversEveryAction(t *testing.T) {
	for _, a := range []Action{Console, VNC, Screenshot, SSH, Restart} {
		attrs := KubeVirtAccess(a, "ns", "vm")
		if len(attrs) == 0 {
			t.Fatalf("%s asks nothing", a)
		}
		for _, at := range attrs {
			if at.Group != subresourcesGroup || at.Namespace != "ns" || at.Name != "vm" || at.Subresource == "" || at.Path != "" {
				t.Fatalf("%s: %+v", a, at)
			}
		}
	}
}
