package bridgestack

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// launcherServiceAccount is the stand-in launcher pods' ServiceAccount.
const launcherServiceAccount = "default"

// LauncherNode is the node the stand-in virt-launcher pods "run" on.
const LauncherNode = "envtest-node"

// Launch does what virt-controller and the kubelet would for a stored VMI:
// it creates the VMI's virt-launcher Pod (labelled kubevirt.io/created-by
// with the VMI's uid, owned by it), reports it Running at podIP, and
// records it in vmi's status.activePods and status.nodeName, in memory:
// the caller writes the VMI (whose CRD has no status subresource here).
// The bridge's SSH dials podIP, never the VMI's status.interfaces.
// The Pod runs as the namespace's "default" ServiceAccount, which Launch
// makes when missing: no controller makes it in envtest, and the API
// server's ServiceAccount admission refuses a pod without it.
func Launch(ctx context.Context, c client.Client, vmi *kubevirtv1.VirtualMachineInstance, podIP string) error {
	if vmi.UID == "" {
		return fmt.Errorf("launch %s/%s: the VMI is not stored (no uid)", vmi.Namespace, vmi.Name)
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: vmi.Namespace, Name: launcherServiceAccount}}
	if err := c.Create(ctx, sa); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create ServiceAccount %s/%s: %w", vmi.Namespace, launcherServiceAccount, err)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: vmi.Namespace, GenerateName: "virt-launcher-" + vmi.Name + "-",
			Labels: map[string]string{kubevirtv1.CreatedByLabel: string(vmi.UID), kubevirtv1.AppLabel: "virt-launcher"},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: kubevirtv1.SchemeGroupVersion.String(), Kind: "VirtualMachineInstance",
				Name: vmi.Name, UID: vmi.UID, Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
			}},
		},
		Spec: corev1.PodSpec{
			ServiceAccountName:           launcherServiceAccount,
			AutomountServiceAccountToken: ptr.To(false),
			NodeName:                     LauncherNode,
			Containers:                   []corev1.Container{{Name: "compute", Image: "virt-launcher"}},
		},
	}
	if err := c.Create(ctx, pod); err != nil {
		return fmt.Errorf("create the launcher pod of %s/%s: %w", vmi.Namespace, vmi.Name, err)
	}
	pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: podIP, PodIPs: []corev1.PodIP{{IP: podIP}}}
	if err := c.Status().Update(ctx, pod); err != nil {
		return fmt.Errorf("report the launcher pod of %s/%s running: %w", vmi.Namespace, vmi.Name, err)
	}
	vmi.Status.NodeName = LauncherNode
	vmi.Status.ActivePods = map[types.UID]string{pod.UID: LauncherNode}
	return nil
}
