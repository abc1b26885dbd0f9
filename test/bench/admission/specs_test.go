package admission_test

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/virtstation/virtstation/api"
)

// spec is one of the two VMs the benchmarks create.
type spec string

const (
	// plumbing: MAC, GPU, video and SSH keys by cloud-init; the webhooks
	// write nothing besides the VM.
	plumbing spec = "plumbing"
	// full: plumbing plus two data disks (claims) and SSH keys through the
	// guest agent (a per-VM Secret).
	full spec = "full"
)

// variant is how a create is admitted.
type variant string

const (
	unlabelled variant = "a-unlabelled" // no webhook is called
	labelled   variant = "b-labelled"   // the Virtstation webhooks mutate and validate
	celPeer    variant = "c-cel-peer"   // the ValidatingAdmissionPolicy peer, no webhook
	noopPeer   variant = "d-noop-hooks" // a mutating and a validating webhook that do nothing
)

var variants = []variant{unlabelled, labelled, celPeer, noopPeer}

// peerLabel selects the VMs the ValidatingAdmissionPolicy binding applies to.
const peerLabel = "bench.virtstation.io/peer"

// userCloudConfig is the user's own cloud-config, kept next to
// Virtstation's part (as in examples/90-everything.yaml).
const userCloudConfig = `#cloud-config
users:
  - name: heidi
    groups: [wheel]
packages: [git, tmux]
`

// dataDiskNames are the two data disks of full VM i: a DataVolume and a
// bare PVC, both labelled virtstation.io/data-disk=true.
func dataDiskNames(i int) (dv, pvc string) {
	return fmt.Sprintf("home-%04d", i), fmt.Sprintf("scratch-%04d", i)
}

// newVM builds VM i of a spec for a variant. Every variant gets the same
// annotations and spec; only the labels differ.
func newVM(s spec, v variant, ns string, i int) *kubevirtv1.VirtualMachine {
	halted := kubevirtv1.RunStrategyHalted
	ann := map[string]string{
		api.AnnotationMAC:     "auto",
		api.AnnotationGPUs:    "nvidia.com/GH100_H200=1",
		api.AnnotationVideo:   "virtio",
		api.AnnotationSSHUser: "heidi",
	}
	switch s {
	case plumbing:
		ann[api.AnnotationSSHPropagation] = api.PropagationCloudInit
	case full:
		dv, pvc := dataDiskNames(i)
		ann[api.AnnotationSSHPropagation] = api.PropagationQemuGuestAgent
		ann[api.AnnotationDataDisks] = dv + ":/home/heidi/work," + pvc + ":/srv/scratch"
	}
	labels := map[string]string{}
	switch v {
	case labelled:
		labels[api.LabelManaged] = api.LabelTrue
	case celPeer:
		labels[peerLabel] = "cel"
	case noopPeer:
		labels[peerLabel] = "noop"
	}
	guest := resource.MustParse("16Gi")
	return &kubevirtv1.VirtualMachine{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: ns, Name: fmt.Sprintf("%s-%s-%04d", s, string(v)[:1], i),
			Labels: labels, Annotations: ann,
		},
		Spec: kubevirtv1.VirtualMachineSpec{
			RunStrategy: &halted,
			Template: &kubevirtv1.VirtualMachineInstanceTemplateSpec{
				Spec: kubevirtv1.VirtualMachineInstanceSpec{
					Domain: kubevirtv1.DomainSpec{
						CPU:    &kubevirtv1.CPU{Cores: 4},
						Memory: &kubevirtv1.Memory{Guest: &guest},
						Devices: kubevirtv1.Devices{
							Disks: []kubevirtv1.Disk{
								{Name: "root", DiskDevice: kubevirtv1.DiskDevice{Disk: &kubevirtv1.DiskTarget{Bus: kubevirtv1.DiskBusVirtio}}},
								{Name: "cloudinit", DiskDevice: kubevirtv1.DiskDevice{Disk: &kubevirtv1.DiskTarget{Bus: kubevirtv1.DiskBusVirtio}}},
							},
							Interfaces: []kubevirtv1.Interface{{
								Name:                   "default",
								InterfaceBindingMethod: kubevirtv1.InterfaceBindingMethod{Masquerade: &kubevirtv1.InterfaceMasquerade{}},
							}},
						},
					},
					Networks: []kubevirtv1.Network{{Name: "default", NetworkSource: kubevirtv1.NetworkSource{Pod: &kubevirtv1.PodNetwork{}}}},
					Volumes: []kubevirtv1.Volume{
						{Name: "root", VolumeSource: kubevirtv1.VolumeSource{
							ContainerDisk: &kubevirtv1.ContainerDiskSource{Image: "quay.io/containerdisks/fedora:41"},
						}},
						{Name: "cloudinit", VolumeSource: kubevirtv1.VolumeSource{
							CloudInitNoCloud: &kubevirtv1.CloudInitNoCloudSource{UserData: userCloudConfig},
						}},
					},
				},
			},
		},
	}
}
