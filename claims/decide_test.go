package claims

import (
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/virtstation/virtstation/api"
)

func TestDecide(t *testing.T) {
	const grace = 2 * time.Minute
	old, young := t0.Add(-time.Hour), t0.Add(-30*time.Second)
	live := Facts{Exists: true, Attaches: true}
	detached := Facts{Exists: true}
	tests := map[string]struct {
		s     State
		facts map[string]Facts
		inUse bool
		want  Decision
	}{
		"no claims": {},
		"old claim of a missing VM is released": {
			s:    State{ClaimedBy: "ns/gone", ClaimedAt: old},
			want: Decision{Release: []string{"ns/gone"}},
		},
		"young claim of a missing VM waits out the grace": {
			s:    State{ClaimedBy: "ns/gone", ClaimedAt: young},
			want: Decision{RecheckAfter: 90 * time.Second},
		},
		"claim without claimed-at counts as old": {
			s:    State{ClaimedBy: "ns/gone"},
			want: Decision{Release: []string{"ns/gone"}},
		},
		"claim from the future waits one grace at most": {
			s:    State{ClaimedBy: "ns/gone", ClaimedAt: t0.Add(time.Hour)},
			want: Decision{RecheckAfter: grace},
		},
		"exactly grace old is released": {
			s:    State{ClaimedBy: "ns/gone", ClaimedAt: t0.Add(-grace)},
			want: Decision{Release: []string{"ns/gone"}},
		},
		"VM that attaches the disk keeps it": {
			s: State{ClaimedBy: "ns/a", ClaimedAt: old}, facts: map[string]Facts{"ns/a": live},
		},
		"VM that no longer attaches the disk loses it": {
			s: State{ClaimedBy: "ns/a", ClaimedAt: old}, facts: map[string]Facts{"ns/a": detached},
			want: Decision{Release: []string{"ns/a"}},
		},
		"VM that no longer attaches the disk keeps a young claim": {
			s: State{ClaimedBy: "ns/a", ClaimedAt: young}, facts: map[string]Facts{"ns/a": detached},
			want: Decision{RecheckAfter: 90 * time.Second},
		},
		"a VMI using the disk keeps every claim": {
			s:     State{ClaimedBy: "ns/gone", SharedBy: []string{"ns/gone2"}, ClaimedAt: old},
			inUse: true,
		},
		"readers judged one by one": {
			s:     State{ClaimedBy: "ns/w", SharedBy: []string{"ns/r1", "ns/r2", "ns/r3"}, ClaimedAt: old},
			facts: map[string]Facts{"ns/w": live, "ns/r1": detached, "ns/r2": live},
			want:  Decision{Release: []string{"ns/r1", "ns/r3"}},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := Decide(tc.s, tc.facts, tc.inUse, t0, grace)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Decide = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func pvcVolume(name, claim string) kubevirtv1.Volume {
	return kubevirtv1.Volume{Name: name, VolumeSource: kubevirtv1.VolumeSource{
		PersistentVolumeClaim: &kubevirtv1.PersistentVolumeClaimVolumeSource{PersistentVolumeClaimVolumeSource: corePVCSource(claim)},
	}}
}

func dvVolume(name, dv string) kubevirtv1.Volume {
	return kubevirtv1.Volume{Name: name, VolumeSource: kubevirtv1.VolumeSource{DataVolume: &kubevirtv1.DataVolumeSource{Name: dv}}}
}

func vmWith(record string, volumes ...kubevirtv1.Volume) *kubevirtv1.VirtualMachine {
	vm := &kubevirtv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "vm"}}
	if record != "" {
		vm.Annotations = map[string]string{api.AnnotationInjected: record}
	}
	if volumes != nil {
		vm.Spec.Template = &kubevirtv1.VirtualMachineInstanceTemplateSpec{Spec: kubevirtv1.VirtualMachineInstanceSpec{Volumes: volumes}}
	}
	return vm
}

func TestAttaches(t *testing.T) {
	tests := map[string]struct {
		vm   *kubevirtv1.VirtualMachine
		want bool
	}{
		"nothing":              {vm: vmWith("")},
		"in the record":        {vm: vmWith(`{"dataDisks":[{"name":"home","kind":"DataVolume","disk":"vs-home","type":"disk"}]}`), want: true},
		"record lists another": {vm: vmWith(`{"dataDisks":[{"name":"other","kind":"PersistentVolumeClaim"}]}`, pvcVolume("x", "other"))},
		"pvc volume":           {vm: vmWith("", pvcVolume("x", "home")), want: true},
		"data volume volume":   {vm: vmWith("", dvVolume("x", "home")), want: true},
		"record without disks": {vm: vmWith(`{"mac":{"interface":"default","address":"02:00:00:00:00:01","source":"derived"}}`)},
		"unreadable record":    {vm: vmWith(`{not json`), want: true},
		"data volume template": {vm: withTemplate(vmWith(""), "home"), want: true},
		"template of another":  {vm: withTemplate(vmWith(""), "other")},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := Attaches(tc.vm, "home"); got != tc.want {
				t.Errorf("Attaches = %v, want %v", got, tc.want)
			}
		})
	}
}

func withTemplate(vm *kubevirtv1.VirtualMachine, dv string) *kubevirtv1.VirtualMachine {
	vm.Spec.DataVolumeTemplates = append(vm.Spec.DataVolumeTemplates, kubevirtv1.DataVolumeTemplateSpec{ObjectMeta: metav1.ObjectMeta{Name: dv}})
	return vm
}

func TestUsesDisk(t *testing.T) {
	vmi := func(vols ...kubevirtv1.Volume) *kubevirtv1.VirtualMachineInstance {
		return &kubevirtv1.VirtualMachineInstance{Spec: kubevirtv1.VirtualMachineInstanceSpec{Volumes: vols}}
	}
	tests := map[string]struct {
		vmi  *kubevirtv1.VirtualMachineInstance
		want bool
	}{
		"no volumes":                  {vmi: vmi()},
		"pvc":                         {vmi: vmi(pvcVolume("a", "other"), pvcVolume("b", "home")), want: true},
		"data volume":                 {vmi: vmi(dvVolume("a", "home")), want: true},
		"volume name is not the disk": {vmi: vmi(dvVolume("home", "other"))},
		"finished":                    {vmi: finished(vmi(dvVolume("a", "home"))), want: false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := UsesDisk(tc.vmi, "home"); got != tc.want {
				t.Errorf("UsesDisk = %v, want %v", got, tc.want)
			}
		})
	}
}

func corePVCSource(claim string) corev1.PersistentVolumeClaimVolumeSource {
	return corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}
}

func finished(vmi *kubevirtv1.VirtualMachineInstance) *kubevirtv1.VirtualMachineInstance {
	vmi.Status.Phase = kubevirtv1.Succeeded
	return vmi
}
