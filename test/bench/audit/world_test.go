package audit_test

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/virtstation/virtstation/api"
	"github.com/virtstation/virtstation/internal/testenv"
	"github.com/virtstation/virtstation/policy"
)

// kind is what VM i of the world looks like.
type kind int

const (
	// plain: no data disk.
	plain kind = iota
	// withDisk: a labelled PVC of its own, mounted at /srv/data.
	withDisk
	// violating: a labelled PVC of its own mounted under /etc, which the
	// mount-path rule denies; the rule is in dryrun mode, so the VM is
	// admitted and the audit reports it as fail.
	violating
)

// kindOf spreads the kinds: one VM in ten violates, three in ten have a
// disk that passes, the rest have none.
func kindOf(i int) kind {
	switch i % 10 {
	case 0:
		return violating
	case 1, 2, 3:
		return withDisk
	}
	return plain
}

// world is the benchmark's cluster content.
type world struct {
	vms, namespaces int
}

func (w world) namespace(i int) string { return fmt.Sprintf("audit-bench-%02d", i%w.namespaces) }
func vmName(i int) string              { return fmt.Sprintf("vm-%05d", i) }
func diskName(i int) string            { return fmt.Sprintf("data-%05d", i) }

// violatingVMs is how many of the world's VMs violate mount-path.
func (w world) violatingVMs() int {
	n := 0
	for i := range w.vms {
		if kindOf(i) == violating {
			n++
		}
	}
	return n
}

// userCloudConfig is a user's own cloud-config, kept next to Virtstation's.
const userCloudConfig = `#cloud-config
users:
  - name: heidi
    groups: [wheel]
packages: [git, tmux]
`

// vm is VM i: a halted workstation with a MAC and video set by the
// mutating webhook and, depending on its kind, a data disk.
func (w world) vm(i int) *kubevirtv1.VirtualMachine {
	halted := kubevirtv1.RunStrategyHalted
	ann := map[string]string{api.AnnotationMAC: "auto", api.AnnotationVideo: "virtio"}
	switch kindOf(i) {
	case withDisk:
		ann[api.AnnotationDataDisks] = diskName(i) + ":/srv/data"
	case violating:
		ann[api.AnnotationDataDisks] = diskName(i) + ":/etc/app-data"
	}
	guest := resource.MustParse("8Gi")
	return &kubevirtv1.VirtualMachine{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: w.namespace(i), Name: vmName(i),
			Labels: map[string]string{api.LabelManaged: api.LabelTrue}, Annotations: ann,
		},
		Spec: kubevirtv1.VirtualMachineSpec{
			RunStrategy: &halted,
			Template: &kubevirtv1.VirtualMachineInstanceTemplateSpec{
				Spec: kubevirtv1.VirtualMachineInstanceSpec{
					Domain: kubevirtv1.DomainSpec{
						CPU:    &kubevirtv1.CPU{Cores: 2},
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

// disk is VM i's labelled data disk.
func (w world) disk(i int) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: w.namespace(i), Name: diskName(i), Labels: map[string]string{api.LabelDataDisk: api.LabelTrue}},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("20Gi")}},
		},
	}
}

// modes are the enforcement modes of the world: mount-path in dryrun.
var modes = map[string]string{"mount-path": string(policy.ModeDryRun)}

// webhookReadyTimeout bounds the wait for the webhook to load the modes and
// its cache to see the disks.
const webhookReadyTimeout = 60 * time.Second

// build creates the namespaces, the disks, the modes ConfigMap and the VMs
// (through the webhooks, with clients concurrent workers), and returns how
// long the VMs' creation took.
func (w world) build(ctx context.Context, e *testenv.Env, c client.Client, clients int) (time.Duration, error) {
	for i := range w.namespaces {
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: w.namespace(i)}}); err != nil {
			return 0, err
		}
	}
	var disks []int
	for i := range w.vms {
		if kindOf(i) != plain {
			disks = append(disks, i)
		}
	}
	if err := parallel(clients, disks, func(i int) error { return c.Create(ctx, w.disk(i)) }); err != nil {
		return 0, fmt.Errorf("create disks: %w", err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: testenv.InstallNamespace, Name: policy.ModesConfigMapName}, Data: modes}
	if err := c.Create(ctx, cm); err != nil {
		return 0, fmt.Errorf("set the enforcement modes: %w", err)
	}
	// The webhook's cache has every disk, and its loader the modes, once a
	// dry run of the last violating VM is admitted.
	probe := -1
	for _, i := range disks {
		if kindOf(i) == violating {
			probe = i
		}
	}
	if err := w.waitAdmitted(ctx, c, probe); err != nil {
		return 0, err
	}
	if err := waitCount(ctx, e.Manager.GetCache(), &corev1.PersistentVolumeClaimList{}, len(disks)); err != nil {
		return 0, fmt.Errorf("the webhook's cache does not see the disks: %w", err)
	}
	all := make([]int, w.vms)
	for i := range all {
		all[i] = i
	}
	start := time.Now()
	if err := parallel(clients, all, func(i int) error { return c.Create(ctx, w.vm(i)) }); err != nil {
		return 0, fmt.Errorf("create VMs: %w", err)
	}
	return time.Since(start), nil
}

// waitAdmitted retries a dry-run create of VM i until the webhooks admit it.
func (w world) waitAdmitted(ctx context.Context, c client.Client, i int) error {
	if i < 0 {
		return nil
	}
	deadline := time.Now().Add(webhookReadyTimeout)
	for {
		err := c.Create(ctx, w.vm(i), client.DryRunAll)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the webhooks do not admit VM %s (mount-path in dryrun mode): %w", vmName(i), err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// parallel runs f on each item with n workers and returns the first error.
func parallel(n int, items []int, f func(int) error) error {
	work := make(chan int)
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var first error
			for i := range work {
				if first != nil {
					continue
				}
				first = f(i)
			}
			errs <- first
		}()
	}
	for _, i := range items {
		work <- i
	}
	close(work)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
