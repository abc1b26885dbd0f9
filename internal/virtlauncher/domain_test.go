package virtlauncher

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	kubevirtv1 "kubevirt.io/api/core/v1"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// host is a fixed Host for golden command lines: each volume's file is
// named after it.
func host(vmi *kubevirtv1.VirtualMachineInstance) Host {
	h := Host{Image: ImageIn("/guest"), Volumes: map[string]Backing{}, VNC: "/run/vnc", Serial: "/run/serial",
		SerialLog: "/run/serial.log", QMP: "/run/qmp", Agent: "/run/agent", SSHAddr: "127.0.0.2:2222"}
	for _, v := range vmi.Spec.Volumes {
		h.Volumes[v.Name] = Backing{Path: "/files/" + v.Name, Snapshot: v.ContainerDisk != nil}
	}
	return h
}

// TestDomainGolden renders the QEMU command line of each VMI in
// testdata/*.vmi.yaml (stored VMIs as KubeVirt creates them) into
// testdata/*.args, one argument per line.
func TestDomainGolden(t *testing.T) {
	inputs, err := filepath.Glob("testdata/*.vmi.yaml")
	if err != nil || len(inputs) == 0 {
		t.Fatalf("no inputs: %v", err)
	}
	for _, in := range inputs {
		name := strings.TrimSuffix(filepath.Base(in), ".vmi.yaml")
		t.Run(name, func(t *testing.T) {
			vmi := readVMI(t, in)
			args, err := Domain(vmi, host(vmi))
			if err != nil {
				t.Fatal(err)
			}
			got := strings.Join(args, "\n") + "\n"
			golden := filepath.Join("testdata", name+".args")
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			if got != string(want) {
				t.Errorf("QEMU command line of %s differs from %s (rerun with -update to accept):\n%s", in, golden, got)
			}
		})
	}
}

func readVMI(t *testing.T, path string) *kubevirtv1.VirtualMachineInstance {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	vmi := &kubevirtv1.VirtualMachineInstance{}
	if err := yaml.UnmarshalStrict(b, vmi); err != nil {
		t.Fatal(err)
	}
	return vmi
}

func TestDomainRefusesWhatItCannotPresent(t *testing.T) {
	cases := map[string]struct {
		spec string
		want string
	}{
		"gpu":                 {`{domain: {memory: {guest: 1Gi}, devices: {gpus: [{name: g, deviceName: nvidia.com/A10}]}}}`, "gpus"},
		"no memory":           {`{domain: {devices: {}}}`, "memory"},
		"lun":                 {`{domain: {memory: {guest: 1Gi}, devices: {disks: [{name: d, lun: {}}]}}, volumes: [{name: d, emptyDisk: {capacity: 1Gi}}]}`, "only disk and cdrom"},
		"two networks":        {`{domain: {memory: {guest: 1Gi}, devices: {interfaces: [{name: a, masquerade: {}}, {name: b, bridge: {}}]}}, networks: [{name: a, pod: {}}, {name: b, multus: {networkName: x}}]}`, "one pod network"},
		"disk without volume": {`{domain: {memory: {guest: 1Gi}, devices: {disks: [{name: d, disk: {}}]}}}`, "has no volume"},
		"sata cdrom on usb":   {`{domain: {memory: {guest: 1Gi}, devices: {disks: [{name: d, cdrom: {bus: usb}}]}}, volumes: [{name: d, emptyDisk: {capacity: 1Gi}}]}`, `bus "usb"`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			vmi := &kubevirtv1.VirtualMachineInstance{}
			if err := yaml.Unmarshal([]byte(tc.spec), &vmi.Spec); err != nil {
				t.Fatal(err)
			}
			_, err := Domain(vmi, host(vmi))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Domain: %v, want an error naming %q", err, tc.want)
			}
		})
	}
}

func TestClassifyRefusesOtherVolumes(t *testing.T) {
	_, _, err := classify(kubevirtv1.Volume{Name: "cfg", VolumeSource: kubevirtv1.VolumeSource{ConfigMap: &kubevirtv1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "x"}}}})
	if err == nil || !strings.Contains(err.Error(), `volume "cfg"`) {
		t.Fatalf("classify(configMap) = %v, want a refusal naming the volume", err)
	}
}
