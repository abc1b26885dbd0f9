package envtest_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/virtstation/virtstation/api"
	"github.com/virtstation/virtstation/internal/testenv"
)

// newClient returns a direct client whose warnings land in the recorder.
func newClient(t *testing.T) (client.Client, *testenv.WarningRecorder) {
	t.Helper()
	c, w, err := env.ClientWithWarnings()
	if err != nil {
		t.Fatal(err)
	}
	return c, w
}

// newNamespace creates a namespace for one test.
func newNamespace(t *testing.T, prefix string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-"}}
	if err := env.Client.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

// vmOption edits a VM built by newVM.
type vmOption func(*kubevirtv1.VirtualMachine)

func managed(vm *kubevirtv1.VirtualMachine) {
	if vm.Labels == nil {
		vm.Labels = map[string]string{}
	}
	vm.Labels[api.LabelManaged] = api.LabelTrue
}

func withAnnotation(k, v string) vmOption {
	return func(vm *kubevirtv1.VirtualMachine) {
		if vm.Annotations == nil {
			vm.Annotations = map[string]string{}
		}
		vm.Annotations[k] = v
	}
}

// withPodInterface gives the VM a masquerade interface on the pod network,
// with mac as its MAC when not empty.
func withPodInterface(name, mac string) vmOption {
	return func(vm *kubevirtv1.VirtualMachine) {
		spec := &vm.Spec.Template.Spec
		spec.Domain.Devices.Interfaces = append(spec.Domain.Devices.Interfaces, kubevirtv1.Interface{
			Name:                   name,
			MacAddress:             mac,
			InterfaceBindingMethod: kubevirtv1.InterfaceBindingMethod{Masquerade: &kubevirtv1.InterfaceMasquerade{}},
		})
		spec.Networks = append(spec.Networks, kubevirtv1.Network{
			Name:          name,
			NetworkSource: kubevirtv1.NetworkSource{Pod: &kubevirtv1.PodNetwork{}},
		})
	}
}

// newVM builds a stopped VM with a container disk and no interfaces.
func newVM(ns, name string, opts ...vmOption) *kubevirtv1.VirtualMachine {
	halted := kubevirtv1.RunStrategyHalted
	guest := resource.MustParse("1Gi")
	vm := &kubevirtv1.VirtualMachine{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: kubevirtv1.VirtualMachineSpec{
			RunStrategy: &halted,
			Template: &kubevirtv1.VirtualMachineInstanceTemplateSpec{
				Spec: kubevirtv1.VirtualMachineInstanceSpec{
					Domain: kubevirtv1.DomainSpec{
						// KubeVirt refuses to start a VMI without memory.
						Memory: &kubevirtv1.Memory{Guest: &guest},
						Devices: kubevirtv1.Devices{
							Disks: []kubevirtv1.Disk{{Name: "root", DiskDevice: kubevirtv1.DiskDevice{Disk: &kubevirtv1.DiskTarget{Bus: kubevirtv1.DiskBusVirtio}}}},
						},
					},
					Volumes: []kubevirtv1.Volume{{Name: "root", VolumeSource: kubevirtv1.VolumeSource{
						ContainerDisk: &kubevirtv1.ContainerDiskSource{Image: "quay.io/containerdisks/fedora:41"},
					}}},
				},
			},
		},
	}
	for _, o := range opts {
		o(vm)
	}
	return vm
}

// podMAC returns the MAC of the named interface.
func podMAC(vm *kubevirtv1.VirtualMachine, iface string) string {
	for _, i := range vm.Spec.Template.Spec.Domain.Devices.Interfaces {
		if i.Name == iface {
			return i.MacAddress
		}
	}
	return ""
}

// webhookRequests reads controller-runtime's request counter for a webhook
// path from the process's metrics registry.
func webhookRequests(t *testing.T, path string) float64 {
	t.Helper()
	families, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	total := 0.0
	for _, f := range families {
		if f.GetName() != "controller_runtime_webhook_requests_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			if labelValue(m, "webhook") == path {
				total += m.GetCounter().GetValue()
			}
		}
	}
	return total
}

func labelValue(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// eventsFor lists the events.k8s.io Events regarding a VM.
func eventsFor(t *testing.T, ns, name string) []eventsv1.Event {
	t.Helper()
	return eventsRegarding(t, ns, "VirtualMachine", name)
}

// eventually polls cond until it returns nil or the deadline passes.
func eventually(t *testing.T, timeout time.Duration, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within %s: %v", timeout, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func containsAny(list []string, sub string) error {
	for _, s := range list {
		if strings.Contains(s, sub) {
			return nil
		}
	}
	return fmt.Errorf("no entry containing %q in %q", sub, list)
}

// withCloudInit gives the VM a cloudInitNoCloud volume "ci" from src.
func withCloudInit(src kubevirtv1.CloudInitNoCloudSource) vmOption {
	return func(vm *kubevirtv1.VirtualMachine) {
		spec := &vm.Spec.Template.Spec
		spec.Domain.Devices.Disks = append(spec.Domain.Devices.Disks, kubevirtv1.Disk{Name: "ci", DiskDevice: kubevirtv1.DiskDevice{Disk: &kubevirtv1.DiskTarget{Bus: kubevirtv1.DiskBusVirtio}}})
		spec.Volumes = append(spec.Volumes, kubevirtv1.Volume{Name: "ci", VolumeSource: kubevirtv1.VolumeSource{CloudInitNoCloud: &src}})
	}
}
