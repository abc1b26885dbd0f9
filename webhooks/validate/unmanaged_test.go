package validate

import (
	"context"
	"reflect"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/virtstation/virtstation/policy"
)

func TestUnmanagedViolations(t *testing.T) {
	const field = "spec.template.spec.volumes[1].dataVolume.name"
	rw := VolumeDisk{Name: "home", Field: field, Volume: "home-vol"}
	ro := VolumeDisk{Name: "home", Field: field, Volume: "home-vol", ReadOnly: true}
	tmpl := VolumeDisk{Name: "home", Field: "spec.dataVolumeTemplates[0].metadata.name"}
	labelled := DiskState{Exists: true, Labelled: true, Kind: "DataVolume"}
	claimed := labelled
	claimed.ClaimedBy, claimed.ClaimLive = "ns/owner", true
	lapsed := labelled
	lapsed.ClaimedBy = "ns/gone"
	shared := labelled
	shared.SharedBy = []string{"ns/r1", "ns/r2"}
	unlabelledClaimed := claimed
	unlabelledClaimed.Labelled = false
	writerMsg := `data disk "home" is attached writable to VM ns/owner, which Virtstation manages; a VM without the virtstation.io/managed=true label cannot share it (rule: disk-claim; fix: remove volume "home-vol" from this VM, detach the disk from ns/owner or delete that VM first, or use another disk)`
	tests := map[string]struct {
		disk  VolumeDisk
		state DiskState
		want  []policy.Violation
	}{
		"no such disk":                  {disk: rw},
		"unlabelled disk":               {disk: rw, state: unlabelledClaimed},
		"free data disk":                {disk: rw, state: labelled},
		"lapsed claim":                  {disk: rw, state: lapsed},
		"claimed, writable attachment":  {disk: rw, state: claimed, want: []policy.Violation{{ID: "disk-claim", Field: field, Message: writerMsg}}},
		"claimed, read-only attachment": {disk: ro, state: claimed, want: []policy.Violation{{ID: "disk-claim", Field: field, Message: writerMsg}}},
		"shared, read-only attachment":  {disk: ro, state: shared},
		"shared, writable attachment":   {disk: rw, state: shared, want: []policy.Violation{{ID: "disk-claim", Field: field, Message: `data disk "home" is attached read-only to VM ns/r1, ns/r2; a writable attachment needs the disk to itself (rule: disk-claim; fix: attach it read-only here (a cdrom, or readonly: true on its disk), or detach it from ns/r1, ns/r2 first)`}}},
		"claimed, by a dataVolumeTemplate": {disk: tmpl, state: claimed, want: []policy.Violation{{ID: "disk-claim", Field: tmpl.Field,
			Message: strings.Replace(writerMsg, `remove volume "home-vol"`, `remove the dataVolumeTemplate "home"`, 1)}}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := UnmanagedViolations([]VolumeDisk{tc.disk}, map[string]DiskState{"home": tc.state})
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("UnmanagedViolations =\n%+v\nwant\n%+v", got, tc.want)
			}
		})
	}
}

func TestAddedDisks(t *testing.T) {
	a, b := VolumeDisk{Name: "a"}, VolumeDisk{Name: "b"}
	aRO := VolumeDisk{Name: "a", ReadOnly: true}
	tests := map[string]struct {
		now, had, want []VolumeDisk
	}{
		"create":                    {now: []VolumeDisk{a, b}, want: []VolumeDisk{a, b}},
		"unchanged":                 {now: []VolumeDisk{a}, had: []VolumeDisk{a}},
		"one added":                 {now: []VolumeDisk{a, b}, had: []VolumeDisk{a}, want: []VolumeDisk{b}},
		"read-only turned writable": {now: []VolumeDisk{a}, had: []VolumeDisk{aRO}, want: []VolumeDisk{a}},
		"writable turned read-only": {now: []VolumeDisk{aRO}, had: []VolumeDisk{a}},
		"removed":                   {had: []VolumeDisk{a}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := addedDisks(tc.now, tc.had); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("addedDisks = %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestUnmanagedVMHandlerFailsOpen: what the handler cannot read admits the
// VM with a warning, as an unreachable webhook (failurePolicy Ignore)
// would; it never denies and never answers 500.
func TestUnmanagedVMHandlerFailsOpen(t *testing.T) {
	h := &UnmanagedVMHandler{}
	for name, raw := range map[string]string{
		"not JSON":              `{`,
		"volumes of a bad type": `{"metadata":{"name":"vm"},"spec":{"template":{"spec":{"volumes":"x"}}}}`,
	} {
		t.Run(name, func(t *testing.T) {
			resp := h.Handle(context.Background(), admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
				UID: "req-1", Operation: admissionv1.Create, Namespace: "ns", Name: "vm", Object: runtime.RawExtension{Raw: []byte(raw)},
			}})
			if !resp.Allowed || len(resp.Warnings) != 1 || !strings.Contains(resp.Warnings[0], "admitted unchecked") || !strings.Contains(resp.Warnings[0], "req-1") {
				t.Errorf("response = allowed %v, warnings %q; want allowed with one warning naming the request", resp.Allowed, resp.Warnings)
			}
		})
	}
}
