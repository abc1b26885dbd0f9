package render

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/virtstation/virtstation/sshkeys"
	"github.com/virtstation/virtstation/userdata"
	"github.com/virtstation/virtstation/vmsecret"
	"github.com/virtstation/virtstation/webhooks/mutate"
)

// reconciledSecrets are the Secrets the reconcilers write for the admitted
// vm once it is stored (sshkeys.Desired, userdata.Compute), from the
// Secrets among the objects, and the Warning Events they would emit instead
// of writing: a missing user-data Secret of the user's, a name held
// by a Secret that is not Virtstation's or that belongs to another VM.
func reconciledSecrets(ctx context.Context, c *mutate.StaticCluster, vm *kubevirtv1.VirtualMachine, vms map[string]*kubevirtv1.VirtualMachine) ([]Object, []string, error) {
	get := func(name string) (*corev1.Secret, error) { return c.Secret(ctx, vm.Namespace, name) }
	var want []*corev1.Secret
	if sshkeys.Wants(vm) && vm.Name != "" {
		keys, err := c.SSHKeys(ctx, vm.Namespace)
		if err != nil {
			return nil, nil, err
		}
		want = append(want, sshkeys.Desired(vm, keys))
	}
	var warnings []string
	ud, err := userdata.Compute(vm, get, func() ([]corev1.Secret, error) { return c.KeySecrets(vm.Namespace), nil })
	var missing *userdata.SourceMissingError
	switch {
	case errors.As(err, &missing):
		warnings = append(warnings, fmt.Sprintf("%v; the VM's Secret %s, and its start, wait for it", err, userdata.SecretName(vm.Name)))
	case err != nil:
		warnings = append(warnings, fmt.Sprintf("Secret %s would not be written: %v", userdata.SecretName(vm.Name), err))
	case ud != nil:
		want = append(want, ud)
	}
	var out []Object
	for _, s := range want {
		cur, err := get(s.Name)
		if err != nil {
			return nil, nil, err
		}
		if cur != nil {
			if w := takenWarning(cur, vm, vms); w != "" {
				warnings = append(warnings, w)
				continue
			}
		}
		obj, err := toObject(readableSecret(s))
		if err != nil {
			return nil, nil, err
		}
		out = append(out, obj)
	}
	return out, warnings, nil
}

// takenWarning says why the reconciler would leave cur, the Secret of the
// name it writes for vm, alone; "" when it would write it.
func takenWarning(cur *corev1.Secret, vm *kubevirtv1.VirtualMachine, vms map[string]*kubevirtv1.VirtualMachine) string {
	owner := vm
	if stored, ok := vms[vm.Namespace+"/"+vm.Name]; ok && owner.UID == "" {
		owner = vm.DeepCopy()
		owner.UID = stored.UID
	}
	switch own, why := vmsecret.Classify(cur, owner); own {
	case vmsecret.Foreign:
		return fmt.Sprintf("Secret %s exists and is not this VM's (%s): the reconciler leaves it alone and the VM's start waits for it; rename or remove that Secret, or rename the VM",
			cur.Name, why)
	case vmsecret.PreviousVM:
		return fmt.Sprintf("Secret %s belongs to an earlier VM of this name: it is written once garbage collection removes it", cur.Name)
	}
	return ""
}
