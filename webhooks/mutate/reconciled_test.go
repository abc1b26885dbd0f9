package mutate

import (
	"encoding/json"
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/virtstation/virtstation/sshkeys"
	"github.com/virtstation/virtstation/userdata"
)

// reconciledSecrets is what the reconcilers write for the admitted object
// once it is stored as VM in.Namespace/in.Name: the user-data Secret
// (userdata.Compute) and the SSH-key Secret (sshkeys.Desired), read from the
// Secrets in c. The webhook writes none of them.
func reconciledSecrets(t testing.TB, c *StaticCluster, in Input, obj map[string]any) []*corev1.Secret {
	t.Helper()
	if obj == nil {
		return nil
	}
	vm := &kubevirtv1.VirtualMachine{}
	if err := json.Unmarshal([]byte(mustJSON(t, obj)), vm); err != nil {
		t.Fatal(err)
	}
	if vm.Name == "" {
		vm.Name = in.Name
	}
	if vm.Namespace == "" {
		vm.Namespace = in.Namespace
	}
	keySecrets := c.KeySecrets(vm.Namespace)
	var out []*corev1.Secret
	if sshkeys.Wants(vm) && vm.Name != "" {
		keys, _ := sshkeys.Collect(keySecrets)
		out = append(out, sshkeys.Desired(vm, keys))
	}
	ud, err := userdata.Compute(vm, func(name string) (*corev1.Secret, error) {
		return c.Secret(stepContext, vm.Namespace, name)
	}, func() ([]corev1.Secret, error) { return keySecrets, nil })
	var missing *userdata.SourceMissingError
	if err != nil && !errors.As(err, &missing) {
		t.Fatalf("userdata.Compute: %v", err)
	}
	if ud != nil {
		out = append(out, ud)
	}
	return out
}

// storeSecrets writes the Secrets the reconcilers write for res into c, as
// they would once the VM is stored.
func storeSecrets(t testing.TB, c *StaticCluster, in Input, res Result) {
	t.Helper()
	for _, s := range reconciledSecrets(t, c, in, res.Object) {
		c.AddSecret(s.DeepCopy())
	}
}
