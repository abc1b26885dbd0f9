package property

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kubevirtv1 "kubevirt.io/api/core/v1"
	instancetypev1beta1 "kubevirt.io/api/instancetype/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crenvtest "sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	"github.com/virtstation/virtstation/internal/kvadmission"
	"github.com/virtstation/virtstation/internal/testenv"
)

// The package's API server serves the instancetypes and preferences the
// generator names, so KubeVirt's admission can apply them as virt-api and
// virt-controller do. It is a bare control plane with only the
// instancetype.kubevirt.io CRDs, started on first use; the webhook side of
// the test (a StaticCluster) does not use it.
var (
	controlPlane testenv.Shared

	instancetypesOnce sync.Once
	instancetypesDir  string // holds the kubeconfig; removed by TestMain
	instancetypesKC   string
	instancetypesErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	err := controlPlane.Stop()
	if instancetypesDir != "" {
		err = errors.Join(err, os.RemoveAll(instancetypesDir))
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "stop the instancetype API server:", err)
		if code == 0 {
			code = 1
		}
	}
	os.Exit(code)
}

// instancetypeKubeconfig starts the API server once, creates the cluster
// instancetypes and preferences, and returns an administrator's kubeconfig
// file for KubeVirt's admission (kvadmission.WithKubeconfig).
func instancetypeKubeconfig(t testing.TB) string {
	t.Helper()
	cp := controlPlane.Get(t)
	instancetypesOnce.Do(func() { instancetypesKC, instancetypesErr = serveInstancetypes(context.Background(), cp) })
	if instancetypesErr != nil {
		t.Fatalf("instancetype API server: %v", instancetypesErr)
	}
	return instancetypesKC
}

func serveInstancetypes(ctx context.Context, cp *testenv.ControlPlane) (string, error) {
	root, err := testenv.RepoRoot()
	if err != nil {
		return "", err
	}
	var paths []string
	for _, r := range []string{"virtualmachineinstancetypes", "virtualmachineclusterinstancetypes", "virtualmachinepreferences", "virtualmachineclusterpreferences"} {
		paths = append(paths, filepath.Join(root, "internal", "testenv", "crds", "instancetype.kubevirt.io_"+r+".yaml"))
	}
	if _, err := crenvtest.InstallCRDs(cp.Config, crenvtest.CRDInstallOptions{Paths: paths, ErrorIfPathMissing: true}); err != nil {
		return "", fmt.Errorf("install the instancetype CRDs: %w", err)
	}
	s := runtime.NewScheme()
	if err := instancetypev1beta1.AddToScheme(s); err != nil {
		return "", err
	}
	c, err := client.New(cp.Config, client.Options{Scheme: s})
	if err != nil {
		return "", err
	}
	for _, obj := range clusterInstancetypes() {
		if err := c.Create(ctx, obj); err != nil {
			return "", fmt.Errorf("create %s %s: %w", obj.GetObjectKind().GroupVersionKind().Kind, obj.GetName(), err)
		}
	}
	kubeconfig, err := cp.AddAdmin("kubevirt-admission")
	if err != nil {
		return "", fmt.Errorf("add KubeVirt's admission as a user: %w", err)
	}
	if instancetypesDir, err = os.MkdirTemp("", "virtstation-property-"); err != nil {
		return "", err
	}
	path := filepath.Join(instancetypesDir, "kubevirt-admission.kubeconfig")
	if err := os.WriteFile(path, kubeconfig, 0o600); err != nil {
		return "", err
	}
	return path, nil
}

// clusterInstancetypes are the objects internal/vmgen names, as KubeVirt's
// common-instancetypes define them: u1.small and u1.medium of the U
// series, and the debian preference (its linux components: virtio disks
// and interfaces, an RNG, and debian's requirements). Left out of debian:
// the EFI secure boot of common-instancetypes' linux-efi base, which needs
// SMM and which arm64 refuses; the generator does not model firmware.
func clusterInstancetypes() []client.Object {
	u1 := func(size string, memory string) *instancetypev1beta1.VirtualMachineClusterInstancetype {
		return &instancetypev1beta1.VirtualMachineClusterInstancetype{
			ObjectMeta: metav1.ObjectMeta{Name: "u1." + size, Labels: map[string]string{
				"instancetype.kubevirt.io/class": "general.purpose", "instancetype.kubevirt.io/cpu": "1",
				"instancetype.kubevirt.io/memory": memory, "instancetype.kubevirt.io/size": size,
			}},
			Spec: instancetypev1beta1.VirtualMachineInstancetypeSpec{
				CPU:    instancetypev1beta1.CPUInstancetype{Guest: 1},
				Memory: instancetypev1beta1.MemoryInstancetype{Guest: resource.MustParse(memory)},
			},
		}
	}
	debian := &instancetypev1beta1.VirtualMachineClusterPreference{
		ObjectMeta: metav1.ObjectMeta{Name: "debian", Labels: map[string]string{"instancetype.kubevirt.io/os-type": "linux"}},
		Spec: instancetypev1beta1.VirtualMachinePreferenceSpec{
			Devices: &instancetypev1beta1.DevicePreferences{
				PreferredDiskBus:        kubevirtv1.DiskBusVirtio,
				PreferredInterfaceModel: kubevirtv1.VirtIO,
				PreferredRng:            &kubevirtv1.Rng{},
			},
			Requirements: &instancetypev1beta1.PreferenceRequirements{
				CPU:    &instancetypev1beta1.CPUPreferenceRequirement{Guest: 1},
				Memory: &instancetypev1beta1.MemoryPreferenceRequirement{Guest: resource.MustParse("512Mi")},
			},
		},
	}
	return []client.Object{u1("small", "2Gi"), u1("medium", "4Gi"), debian}
}

// checkInstancetypesServed shows that KubeVirt's admission looks the
// corpus's instancetypes and preferences up rather than skipping them
// (KubeVirt ignores a failed lookup): a VM taking its memory from u1.small
// is admitted (without the lookup it has no memory), and debian's
// requirements are enforced. TestProperty runs it first, on its own
// checkers, as the premise of the instancetype cases.
func checkInstancetypesServed(t *testing.T, kv *kvadmission.Checker) {
	t.Helper()
	cases := []struct {
		name, spec string
		allowed    bool
		message    string
	}{
		{name: "memory from u1.small", allowed: true,
			spec: `instancetype: {kind: VirtualMachineClusterInstancetype, name: u1.small}`},
		{name: "u1.medium with debian", allowed: true,
			spec: "instancetype: {kind: VirtualMachineClusterInstancetype, name: u1.medium}\n" +
				"  preference: {kind: VirtualMachineClusterPreference, name: debian}"},
		{name: "debian with less memory than it requires",
			spec:    "preference: {kind: VirtualMachineClusterPreference, name: debian}\n  template: {spec: {domain: {memory: {guest: 256Mi}, devices: {}}}}",
			message: "insufficient Memory resources of 256Mi provided by VirtualMachine, preference requires 512Mi"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			vm := "apiVersion: kubevirt.io/v1\nkind: VirtualMachine\nmetadata: {name: it, namespace: ws}\nspec:\n  runStrategy: Halted\n  " + tc.spec + "\n"
			if !strings.Contains(tc.spec, "template:") {
				vm += "  template: {spec: {domain: {devices: {}}}}\n"
			}
			raw, err := yaml.YAMLToJSON([]byte(vm))
			if err != nil {
				t.Fatal(err)
			}
			v, err := kv.CheckJSON(raw)
			if err != nil {
				t.Fatal(err)
			}
			if v.Allowed != tc.allowed {
				t.Fatalf("got %s; want allowed=%v", v, tc.allowed)
			}
			if tc.message != "" && !strings.Contains(v.String(), tc.message) {
				t.Errorf("got %s; want a cause with %q", v, tc.message)
			}
		})
	}
}
