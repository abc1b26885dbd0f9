package bridge

import (
	"errors"
	"net/netip"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
)

func TestLauncherAddressIsTheActivePodsNeverTheGuests(t *testing.T) {
	vmi := func(active map[types.UID]string) *kubevirtv1.VirtualMachineInstance {
		return &kubevirtv1.VirtualMachineInstance{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "vm", UID: "vmi-uid"},
			Status: kubevirtv1.VirtualMachineInstanceStatus{
				NodeName:   "node-a",
				ActivePods: active,
				// What a guest agent could report: never dialled.
				Interfaces: []kubevirtv1.VirtualMachineInstanceNetworkInterface{{Name: "default", IP: "169.254.169.254"}},
			},
		}
	}
	pod := func(uid types.UID, ip string, change ...func(*corev1.Pod)) corev1.Pod {
		p := corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "virt-launcher-vm-" + string(uid), UID: uid,
				Labels: map[string]string{kubevirtv1.CreatedByLabel: "vmi-uid"}},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip},
		}
		for _, c := range change {
			c(&p)
		}
		return p
	}
	active := map[types.UID]string{"p1": "node-a"}
	cases := map[string]struct {
		vmi  *kubevirtv1.VirtualMachineInstance
		pods []corev1.Pod
		want string // "" means ErrNoLauncher
	}{
		"the active pod":        {vmi: vmi(active), pods: []corev1.Pod{pod("p1", "10.244.0.7")}, want: "10.244.0.7"},
		"IPv6":                  {vmi: vmi(active), pods: []corev1.Pod{pod("p1", "fd00::7")}, want: "fd00::7"},
		"no active pods":        {vmi: vmi(nil), pods: []corev1.Pod{pod("p1", "10.244.0.7")}},
		"no pods":               {vmi: vmi(active)},
		"a pod not active":      {vmi: vmi(active), pods: []corev1.Pod{pod("p2", "10.244.0.8")}},
		"created by another":    {vmi: vmi(active), pods: []corev1.Pod{pod("p1", "10.244.0.7", func(p *corev1.Pod) { p.Labels[kubevirtv1.CreatedByLabel] = "other" })}},
		"in another namespace":  {vmi: vmi(active), pods: []corev1.Pod{pod("p1", "10.244.0.7", func(p *corev1.Pod) { p.Namespace = "other" })}},
		"not running":           {vmi: vmi(active), pods: []corev1.Pod{pod("p1", "10.244.0.7", func(p *corev1.Pod) { p.Status.Phase = corev1.PodPending })}},
		"being deleted":         {vmi: vmi(active), pods: []corev1.Pod{pod("p1", "10.244.0.7", func(p *corev1.Pod) { p.DeletionTimestamp = &metav1.Time{} })}},
		"on the host's network": {vmi: vmi(active), pods: []corev1.Pod{pod("p1", "10.0.0.1", func(p *corev1.Pod) { p.Spec.HostNetwork = true })}},
		"no address yet":        {vmi: vmi(active), pods: []corev1.Pod{pod("p1", "")}},
		"unspecified address":   {vmi: vmi(active), pods: []corev1.Pod{pod("p1", "0.0.0.0")}},
		"migrating: the VMI's node": {
			vmi:  vmi(map[types.UID]string{"p1": "node-a", "p2": "node-b"}),
			pods: []corev1.Pod{pod("p2", "10.244.1.9"), pod("p1", "10.244.0.7")}, want: "10.244.0.7",
		},
		"two on the VMI's node": {
			vmi:  vmi(map[types.UID]string{"p1": "node-a", "p2": "node-a"}),
			pods: []corev1.Pod{pod("p2", "10.244.1.9"), pod("p1", "10.244.0.7")},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := launcherAddress(tc.vmi, tc.pods)
			if tc.want == "" {
				if !errors.Is(err, ErrNoLauncher) {
					t.Fatalf("got %v, %v; want ErrNoLauncher", got, err)
				}
				return
			}
			if err != nil || got != netip.MustParseAddr(tc.want) {
				t.Fatalf("got %v, %v; want %s", got, err, tc.want)
			}
		})
	}
}
