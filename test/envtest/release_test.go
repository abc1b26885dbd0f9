package envtest_test

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/virtstation/virtstation/api"
)

// TestRemovingTheManagedLabelGivesTheVMBack: a user who opts out by
// removing virtstation.io/managed and the virtstation.io/ annotations (as
// kubectl apply of the manifest without them does: the record, never
// applied by the user, stays; or with it removed too) gets their own spec
// back. The GPUs given as resources.requests come back as the key with the
// value given, the webhook's GPUs, video, tablet and accessCredentials go;
// the MAC the webhook pinned stays, as a VM's MAC never changes.
func TestRemovingTheManagedLabelGivesTheVMBack(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t, "release")
	for name, keepRecord := range map[string]bool{"record kept": true, "record removed": false} {
		t.Run(name, func(t *testing.T) {
			user := newVM(ns, "ws-"+strings.ReplaceAll(name, " ", "-"), managed,
				withPodInterface("default", ""),
				withAnnotation(api.AnnotationGPUs, "nvidia.com/GH100_H200=1"),
				withAnnotation(api.AnnotationVideo, "virtio"),
				withAnnotation(api.AnnotationSSHUser, "alice"),
				func(vm *kubevirtv1.VirtualMachine) {
					vm.Spec.Template.Spec.Domain.Resources.Requests = corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("2")}
				})
			manifest := user.DeepCopy()
			vm := user.DeepCopy()
			if err := env.Client.Create(ctx, vm, strict); err != nil {
				t.Fatal(err)
			}
			devs := vm.Spec.Template.Spec.Domain.Devices
			if len(devs.GPUs) != 3 || vm.Spec.Template.Spec.Domain.Resources.Requests != nil || devs.Video == nil || len(vm.Spec.Template.Spec.AccessCredentials) != 1 {
				t.Fatalf("admitted spec is not the managed one: gpus %v, requests %v, video %v, accessCredentials %d",
					devs.GPUs, vm.Spec.Template.Spec.Domain.Resources.Requests, devs.Video, len(vm.Spec.Template.Spec.AccessCredentials))
			}
			mac := podMAC(vm, "default")
			if mac == "" {
				t.Fatal("no MAC pinned")
			}

			// The user's UPDATE: the stored VM without label and annotations.
			delete(vm.Labels, api.LabelManaged)
			for k := range vm.Annotations {
				if strings.HasPrefix(k, "virtstation.io/") && (!keepRecord || k != api.AnnotationInjected) {
					delete(vm.Annotations, k)
				}
			}
			if err := env.Client.Update(ctx, vm, strict); err != nil {
				t.Fatalf("releasing the VM: %v", err)
			}
			var stored kubevirtv1.VirtualMachine
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(vm), &stored); err != nil {
				t.Fatal(err)
			}
			for k := range stored.Annotations {
				if strings.HasPrefix(k, "virtstation.io/") {
					t.Errorf("annotation %s=%q is still on the released VM", k, stored.Annotations[k])
				}
			}
			want := manifest.Spec.DeepCopy()
			want.Template.Spec.Domain.Devices.Interfaces[0].MacAddress = mac
			if !equality.Semantic.DeepEqual(stored.Spec, *want) {
				t.Errorf("the released VM's spec is not the user's:\ngot  %+v\nwant %+v", stored.Spec.Template.Spec, want.Template.Spec)
			}
		})
	}
}
