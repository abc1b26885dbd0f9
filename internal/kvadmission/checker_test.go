package kvadmission_test

import (
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/virtstation/virtstation/internal/kvadmission"
)

// vmYAML is a valid stopped VM; cases edit its template spec.
func vmYAML(name, spec string) string {
	return `apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata: {name: ` + name + `, namespace: ws}
spec:
  runStrategy: Halted
  template:
    spec:
` + spec
}

const rootDisk = `      domain:
        memory: {guest: 1Gi}
        devices:
          disks:
          - name: root
            disk: {bus: %BUS%}
      volumes:
      - name: root
        containerDisk: {image: quay.io/containerdisks/fedora:41}
`

// TestCheckerIsKubeVirtsJudgement runs KubeVirt v1.9.0's own admission on
// VMs whose fate KubeVirt's source decides: what apply refuses, what only
// the start refuses, and what both admit.
func TestCheckerIsKubeVirtsJudgement(t *testing.T) {
	cases := []struct {
		name, arch, spec string
		allowed          bool
		stage, message   string
	}{
		{name: "virtio disk", spec: strings.ReplaceAll(rootDisk, "%BUS%", "virtio"), allowed: true},
		{name: "sata read-only", spec: strings.ReplaceAll(strings.ReplaceAll(rootDisk, "%BUS%", "sata"), "bus: sata", "bus: sata, readonly: true"),
			stage: kvadmission.StageVM, message: "sata hard-disks do not support read-only"},
		{name: "no memory", spec: "      domain: {devices: {}}\n",
			stage: kvadmission.StageVMI, message: "no memory requested"},
		{name: "sata on arm64", spec: "      architecture: arm64\n" + strings.ReplaceAll(rootDisk, "%BUS%", "sata"),
			stage: kvadmission.StageVMI, message: "Arm64 not support this disk bus type"},
		{name: "sata on an arm64 cluster", arch: "arm64", spec: strings.ReplaceAll(rootDisk, "%BUS%", "sata"),
			stage: kvadmission.StageVMI, message: "Arm64 not support this disk bus type"},
		{name: "sata on an amd64 cluster", arch: "amd64", spec: strings.ReplaceAll(rootDisk, "%BUS%", "sata"), allowed: true},
	}
	checkers := map[string]*kvadmission.Checker{}
	for _, tc := range cases {
		if checkers[tc.arch] == nil {
			checkers[tc.arch] = kvadmission.Start(t, tc.arch)
		}
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := checkers[tc.arch]
			var vm kubevirtv1.VirtualMachine
			if err := yaml.UnmarshalStrict([]byte(vmYAML("c", tc.spec)), &vm); err != nil {
				t.Fatal(err)
			}
			v, err := c.Check(&vm)
			if err != nil {
				t.Fatal(err)
			}
			if v.Allowed != tc.allowed || v.Stage != tc.stage {
				t.Fatalf("got %s; want allowed=%v stage=%q", v, tc.allowed, tc.stage)
			}
			if tc.message != "" && !strings.Contains(v.String(), tc.message) {
				t.Errorf("got %s; want a cause with %q", v, tc.message)
			}
		})
	}
}
