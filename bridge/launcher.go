package bridge

import (
	"context"
	"errors"
	"fmt"
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Where SSH goes.
//
// The bridge dials the VMI's virt-launcher pod: the Pod's status.podIP, as
// the kubelet reports it, of the pod KubeVirt runs the VMI in (listed in the
// VMI's status.activePods by virt-controller, and labelled
// kubevirt.io/created-by=<VMI uid> by it). With the pod network's masquerade
// binding, KubeVirt's default, the pod forwards port 22 to the guest; with
// bridge or passt the guest answers on the pod's address itself.
//
// It never dials an address from the VMI's status.interfaces: those come
// from the guest agent, so a guest could point the bridge, and its network
// position, at anything it can reach.
//
// Going through KubeVirt's port-forward subresource instead (as virtctl ssh
// does) was considered and not taken: KubeVirt v1.9.0's virt-api dials
// status.interfaces[0].ip for a port-forward (getTargetInterfaceIP in
// pkg/virt-api/rest/dialers.go), the very address the guest controls. The
// bridge still authorises SSH exactly as KubeVirt authorises a
// port-forward (auth.SSH); only the dial is its own.

// ErrNoLauncher means the VMI has no running launcher pod with an address.
var ErrNoLauncher = errors.New("the VM's virt-launcher pod has no address yet")

// launcherAddress is the address of vmi's active virt-launcher pod among
// pods: a pod vmi's status.activePods names, labelled as created by vmi,
// running, not being deleted and not on the host's network. During a
// migration two pods are active; the one on the VMI's node is taken.
func launcherAddress(vmi *kubevirtv1.VirtualMachineInstance, pods []corev1.Pod) (netip.Addr, error) {
	var candidates []corev1.Pod
	for _, p := range pods {
		node, active := vmi.Status.ActivePods[p.UID]
		switch {
		case vmi.UID == "" || !active:
		case p.Labels[kubevirtv1.CreatedByLabel] != string(vmi.UID):
		case p.Namespace != vmi.Namespace:
		case p.DeletionTimestamp != nil, p.Status.Phase != corev1.PodRunning:
		case p.Spec.HostNetwork:
		case vmi.Status.NodeName != "" && node != vmi.Status.NodeName:
		default:
			candidates = append(candidates, p)
		}
	}
	if len(candidates) != 1 {
		return netip.Addr{}, ErrNoLauncher
	}
	addr, err := netip.ParseAddr(candidates[0].Status.PodIP)
	if err != nil || !addr.IsValid() || addr.IsUnspecified() {
		return netip.Addr{}, ErrNoLauncher
	}
	return addr, nil
}

// findLauncher reads vmi's launcher pods with the bridge's identity and
// returns the address launcherAddress picks.
func findLauncher(ctx context.Context, c client.Reader, vmi *kubevirtv1.VirtualMachineInstance) (netip.Addr, error) {
	if len(vmi.Status.ActivePods) == 0 || vmi.UID == "" {
		return netip.Addr{}, ErrNoLauncher
	}
	var pods corev1.PodList
	if err := c.List(ctx, &pods, client.InNamespace(vmi.Namespace),
		client.MatchingLabels{kubevirtv1.CreatedByLabel: string(vmi.UID)}); err != nil {
		return netip.Addr{}, fmt.Errorf("list the launcher pods of VMI %s/%s: %w", vmi.Namespace, vmi.Name, err)
	}
	return launcherAddress(vmi, pods.Items)
}
