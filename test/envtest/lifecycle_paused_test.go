package envtest_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/virtstation/virtstation/api"
	"github.com/virtstation/virtstation/lifecycle"
)

// TestIdleNeverStopsAPausedVM: a paused VMI (virtctl pause) holds its
// user's work in memory. Its disks are safe, yet the stop is skipped with
// the reason recorded, and KubeVirt's stop is never called. Unpaused, it
// is stopped when idle again.
func TestIdleNeverStopsAPausedVM(t *testing.T) {
	kv := subresourceAPI(t)
	t.Parallel()
	ns := newNamespace(t, "idle-paused")
	// A grace period long enough for the pause to be written first.
	idleVM(t, ns, "ws", map[string]string{api.AnnotationIdleTimeout: "1s", api.AnnotationIdleGracePeriod: "3s"})
	// virt-handler reports the pause as a condition on the VMI.
	vmi := &kubevirtv1.VirtualMachineInstance{}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "ws"}, vmi); err != nil {
		t.Fatal(err)
	}
	vmi.Status.Conditions = append(vmi.Status.Conditions, kubevirtv1.VirtualMachineInstanceCondition{
		Type: kubevirtv1.VirtualMachineInstancePaused, Status: corev1.ConditionTrue, Reason: "PausedByUser",
	})
	if err := env.Client.Update(context.Background(), vmi); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, func() error {
		rec := vmNow(t, ns, "ws").Annotations[api.AnnotationIdleStop]
		if !strings.Contains(rec, `"action":"skipped"`) || !strings.Contains(rec, "paused") {
			return fmt.Errorf("record %q", rec)
		}
		return idleEvent(t, ns, "ws", lifecycle.ReasonIdleStopSkipped, "paused")
	})
	if vm := vmNow(t, ns, "ws"); halted(vm) {
		t.Error("a paused VM was stopped")
	}
	if n := len(stopsOf(kv, ns, "ws")); n != 0 {
		t.Errorf("%d stop calls, want none", n)
	}

	// Unpaused (KubeVirt drops the condition), it is idle again from the
	// unpause: notice, grace, stop.
	if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "ws"}, vmi); err != nil {
		t.Fatal(err)
	}
	vmi.Status.Conditions = vmi.Status.Conditions[:len(vmi.Status.Conditions)-1]
	if err := env.Client.Update(context.Background(), vmi); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, func() error {
		if !halted(vmNow(t, ns, "ws")) {
			return fmt.Errorf("not stopped after the unpause")
		}
		return nil
	})
}
