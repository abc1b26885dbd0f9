package testenv

import (
	"context"
	"fmt"

	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// StartVM does what KubeVirt does when the stored VirtualMachine
// namespace/name starts, with KubeVirt's own code (kvadmission's
// Webhook.StartVM: virt-controller's VMI, virt-api's VMI defaults), and
// creates that VirtualMachineInstance, which passes KubeVirt's VMI
// admission on the way in. A previous VMI of the VM must be deleted first,
// as virt-controller waits for it to go. The returned VMI is the stored
// one; it has no status until the caller writes what virt-handler would.
func (e *Env) StartVM(ctx context.Context, namespace, name string) (*kubevirtv1.VirtualMachineInstance, error) {
	vm := &kubevirtv1.VirtualMachine{}
	if err := e.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, vm); err != nil {
		return nil, err
	}
	vmi, err := e.KubeVirt.StartVM(ctx, vm, e.env.WebhookInstallOptions.LocalServingCAData)
	if err != nil {
		return nil, err
	}
	if err := e.Client.Create(ctx, vmi); err != nil {
		return nil, fmt.Errorf("create the VMI of %s/%s: %w", namespace, name, err)
	}
	return vmi, nil
}
