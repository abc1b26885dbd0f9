package envtest_test

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/virtstation/virtstation/internal/kvadmission"
)

// TestKubeVirtsOwnAdmissionJudgesEveryVM shows KubeVirt v1.9.0's own
// VirtualMachine admission is live in the test control plane: a VM KubeVirt
// refuses is refused by the API server, with KubeVirt's own message, whether
// Virtstation manages it or not.
func TestKubeVirtsOwnAdmissionJudgesEveryVM(t *testing.T) {
	ctx := context.Background()
	c, _ := newClient(t)
	ns := newNamespace(t, "kubevirt")
	sataReadOnly := func(vm *kubevirtv1.VirtualMachine) {
		vm.Spec.Template.Spec.Domain.Devices.Disks[0].Disk = &kubevirtv1.DiskTarget{Bus: kubevirtv1.DiskBusSATA, ReadOnly: true}
	}
	noMemory := func(vm *kubevirtv1.VirtualMachine) { vm.Spec.Template.Spec.Domain.Memory = nil }
	cases := []struct {
		name string
		opts []vmOption
		want string
	}{
		{"unmanaged, refused at apply", []vmOption{sataReadOnly}, "sata hard-disks do not support read-only"},
		{"managed, refused at apply", []vmOption{managed, sataReadOnly}, "sata hard-disks do not support read-only"},
		{"refused at start", []vmOption{noMemory}, "when it starts: no memory requested"},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			vm := newVM(ns, "vm-"+string(rune('a'+i)), tc.opts...)
			err := c.Create(ctx, vm)
			if err == nil {
				t.Fatal("created; want KubeVirt's refusal")
			}
			for _, want := range []string{`"` + kvadmissionWebhookName + `"`, tc.want} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q lacks %q", err, want)
				}
			}
		})
	}
	if err := c.Create(ctx, newVM(ns, "fine", managed)); err != nil {
		t.Fatalf("a valid managed VM: %v", err)
	}
	// A VMI created directly passes virt-api's VMI create admission too.
	err := c.Create(ctx, &kubevirtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bare"}})
	if err == nil || !strings.Contains(err.Error(), "KubeVirt v1.9.0 refuses the VirtualMachineInstance: no memory requested") {
		t.Errorf("a VMI without memory: err = %v, want KubeVirt's refusal", err)
	}
	if err := c.Create(ctx, newVMIUsing(ns, "with-memory", "absent-pvc")); err != nil {
		t.Errorf("a valid VMI: %v", err)
	}
}

// kvadmissionWebhookName is KubeVirt's own webhook name for VMs.
var kvadmissionWebhookName = func() string {
	wh := &kvadmission.Webhook{}
	return wh.Configuration(nil).Webhooks[0].Name
}()
