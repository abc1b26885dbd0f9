package outage_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/virtstation/virtstation/api"
	"github.com/virtstation/virtstation/internal/testenv"
	"github.com/virtstation/virtstation/webhooks/mutate"
	"github.com/virtstation/virtstation/webhooks/validate"
)

// kubevirtFinalizer is the finalizer virt-controller puts on every VM.
const kubevirtFinalizer = "kubevirt.io/virtualMachineControllerFinalize"

var env *testenv.Env

func TestMain(m *testing.M) {
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr)))
	var err error
	if env, err = testenv.Start(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "envtest:", err)
		os.Exit(1)
	}
	code := m.Run()
	if err := env.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "envtest stop:", err)
	}
	os.Exit(code)
}

func TestWebhookOutageBlocksSpecChangesOnly(t *testing.T) {
	ctx := context.Background()
	c := env.Client
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "outage-"}}
	if err := c.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	vm := newVM(ns.Name, "dev", map[string]string{api.LabelManaged: api.LabelTrue})
	if err := c.Create(ctx, vm); err != nil {
		t.Fatal(err)
	}

	// While the webhook is up, KubeVirt's finalizer write does not reach it:
	// the matchCondition lets an UPDATE that changes neither the spec nor a
	// virtstation.io/ label or annotation through uncalled.
	calls := func() float64 { return webhookRequests(t, mutate.Path) + webhookRequests(t, validate.VMPath) }
	before := calls()
	update(t, vm, func(vm *kubevirtv1.VirtualMachine) { vm.Finalizers = append(vm.Finalizers, kubevirtFinalizer) })
	if got := calls(); got != before {
		t.Errorf("adding KubeVirt's finalizer called the webhooks %v times, want none", got-before)
	}
	// A change of a Virtstation annotation still reaches both.
	update(t, vm, func(vm *kubevirtv1.VirtualMachine) { vm.Annotations = map[string]string{api.AnnotationVideo: "virtio"} })
	if got := calls(); got != before+2 {
		t.Errorf("changing %s called the webhooks %v times, want 2", api.AnnotationVideo, got-before)
	}

	if err := env.StopWebhooks(); err != nil {
		t.Fatal(err)
	}

	refused := map[string]func(*kubevirtv1.VirtualMachine){
		"a spec change": func(vm *kubevirtv1.VirtualMachine) {
			always := kubevirtv1.RunStrategyAlways
			vm.Spec.RunStrategy = &always
		},
		"a virtstation.io annotation": func(vm *kubevirtv1.VirtualMachine) { vm.Annotations[api.AnnotationVideo] = "vga" },
		"removing the managed label":  func(vm *kubevirtv1.VirtualMachine) { delete(vm.Labels, api.LabelManaged) },
	}
	for name, edit := range refused {
		t.Run("refused: "+name, func(t *testing.T) {
			err := tryUpdate(vm, edit)
			if err == nil || !strings.Contains(err.Error(), "failed calling webhook") {
				t.Fatalf("update during the outage = %v, want refused (failed calling webhook)", err)
			}
		})
	}

	// KubeVirt's own writes go through: an annotation of its own, then the
	// deletion and the removal of its finalizer.
	update(t, vm, func(vm *kubevirtv1.VirtualMachine) { vm.Annotations["kubevirt.io/latest-observed-api-version"] = "v1" })
	if err := c.Delete(ctx, vm); err != nil {
		t.Fatalf("delete during the outage: %v", err)
	}
	update(t, vm, func(vm *kubevirtv1.VirtualMachine) { vm.Finalizers = nil })
	if err := c.Get(ctx, client.ObjectKeyFromObject(vm), &kubevirtv1.VirtualMachine{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the VM is still there after its finalizer was removed: %v", err)
	}

	// Unmanaged VMs never reach the webhook.
	if err := c.Create(ctx, newVM(ns.Name, "plain", nil)); err != nil {
		t.Fatalf("unmanaged create during the outage: %v", err)
	}
}

// update re-reads vm, applies edit and writes it back; vm becomes the result.
func update(t *testing.T, vm *kubevirtv1.VirtualMachine, edit func(*kubevirtv1.VirtualMachine)) {
	t.Helper()
	if err := tryUpdate(vm, edit); err != nil {
		t.Fatal(err)
	}
}

func tryUpdate(vm *kubevirtv1.VirtualMachine, edit func(*kubevirtv1.VirtualMachine)) error {
	ctx := context.Background()
	cur := &kubevirtv1.VirtualMachine{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(vm), cur); err != nil {
		return err
	}
	edit(cur)
	if err := env.Client.Update(ctx, cur); err != nil {
		return err
	}
	*vm = *cur
	return nil
}

// newVM builds a stopped VM with a container disk.
func newVM(ns, name string, labels map[string]string) *kubevirtv1.VirtualMachine {
	halted := kubevirtv1.RunStrategyHalted
	guest := resource.MustParse("1Gi")
	return &kubevirtv1.VirtualMachine{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		Spec: kubevirtv1.VirtualMachineSpec{
			RunStrategy: &halted,
			Template: &kubevirtv1.VirtualMachineInstanceTemplateSpec{Spec: kubevirtv1.VirtualMachineInstanceSpec{
				Domain: kubevirtv1.DomainSpec{Memory: &kubevirtv1.Memory{Guest: &guest}, Devices: kubevirtv1.Devices{
					Disks: []kubevirtv1.Disk{{Name: "root", DiskDevice: kubevirtv1.DiskDevice{Disk: &kubevirtv1.DiskTarget{Bus: kubevirtv1.DiskBusVirtio}}}},
				}},
				Volumes: []kubevirtv1.Volume{{Name: "root", VolumeSource: kubevirtv1.VolumeSource{
					ContainerDisk: &kubevirtv1.ContainerDiskSource{Image: "quay.io/containerdisks/fedora:41"},
				}}},
			}},
		},
	}
}

// webhookRequests is controller-runtime's request counter for a webhook
// path, from this process's metrics registry.
func webhookRequests(t *testing.T, path string) float64 {
	t.Helper()
	families, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var n float64
	for _, f := range families {
		if f.GetName() != "controller_runtime_webhook_requests_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "webhook" && l.GetValue() == path {
					n += m.GetCounter().GetValue()
				}
			}
		}
	}
	return n
}
