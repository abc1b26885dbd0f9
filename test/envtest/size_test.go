package envtest_test

import (
	"context"
	"strings"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestOversizedVMRefused is issue 27's finding 5 through the API server:
// an ordinary server-side dry run of a managed VM of 2 MiB (which never
// reaches etcd, so only the API server's 3 MiB request limit bounds it) is
// denied by the webhook before it decodes the VM, with a message the user
// sees naming the limit and the fix, not a webhook failure.
func TestOversizedVMRefused(t *testing.T) {
	ns := newNamespace(t, "oversized")
	vm := newVM(ns, "big", managed)
	if vm.Spec.Template.ObjectMeta.Annotations == nil {
		vm.Spec.Template.ObjectMeta.Annotations = map[string]string{}
	}
	vm.Spec.Template.ObjectMeta.Annotations["example.com/notes"] = strings.Repeat("x", 2<<20)
	err := env.Client.Create(context.Background(), vm, client.DryRunAll)
	if err == nil {
		t.Fatal("a 2 MiB managed VM was admitted")
	}
	for _, w := range []string{"over the 1.50 MiB (1572864 bytes) limit", "fix: make the object smaller"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q lacks %q", err, w)
		}
	}
}
