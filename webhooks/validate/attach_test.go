package validate

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/virtstation/virtstation/api"
	"github.com/virtstation/virtstation/claims"
	"github.com/virtstation/virtstation/policy"
)

func TestAttachViolations(t *testing.T) {
	const field = "spec.volumes[1].persistentVolumeClaim.claimName"
	const fix = `remove volume "home-vol"`
	rw := VolumeDisk{Name: "home", Field: field, Volume: "home-vol"}
	ro := VolumeDisk{Name: "home", Field: field, Volume: "home-vol", ReadOnly: true}
	labelled := DiskState{Exists: true, Labelled: true, Kind: "PersistentVolumeClaim"}
	claimed := labelled
	claimed.ClaimedBy, claimed.ClaimLive = "ns/owner", true
	foreign := claimed
	foreign.ClaimedBy = "other/owner"
	lapsed := labelled
	lapsed.ClaimedBy = "ns/gone"
	shared := labelled
	shared.SharedBy = []string{"ns/r1", "other/r2"}
	unlabelled := claimed
	unlabelled.Labelled = false
	writer := func(holder string) []policy.Violation {
		return []policy.Violation{{ID: "disk-claim", Field: field, Message: `data disk "home" is claimed writable by ` + holder +
			`, and a claimed disk is attached only by the VM that claims it (rule: disk-claim; fix: remove volume "home-vol", or detach the disk from that VM or delete it first, or use another disk)`}}
	}
	tests := map[string]struct {
		disk  VolumeDisk
		state DiskState
		want  []policy.Violation
	}{
		"no such disk":                              {disk: rw},
		"unlabelled disk":                           {disk: rw, state: unlabelled},
		"free data disk":                            {disk: rw, state: labelled},
		"lapsed claim":                              {disk: rw, state: lapsed},
		"claimed, writable attachment":              {disk: rw, state: claimed, want: writer("VM ns/owner")},
		"claimed, read-only attachment":             {disk: ro, state: claimed, want: writer("VM ns/owner")},
		"claimed from another namespace: not named": {disk: rw, state: foreign, want: writer("a VM of another namespace")},
		"shared, read-only attachment":              {disk: ro, state: shared},
		"shared, writable attachment":               {disk: rw, state: shared, want: []policy.Violation{{ID: "disk-claim", Field: field, Message: `data disk "home" is attached read-only to VM ns/r1, a VM of another namespace; a writable attachment needs the disk to itself (rule: disk-claim; fix: attach it read-only (a cdrom, or readonly: true on its disk), or remove volume "home-vol")`}}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := AttachViolations("ns", []VolumeDisk{tc.disk}, map[string]DiskState{"home": tc.state}, fix)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("AttachViolations =\n%+v\nwant\n%+v", got, tc.want)
			}
		})
	}
}

func TestForeignSelfClaims(t *testing.T) {
	disk := VolumeDisk{Name: "home", Field: "f", Volume: "v"}
	bound := func(holder, uid string) claims.State {
		return claims.State{ClaimedBy: holder, UIDs: map[string]types.UID{holder: types.UID(uid)}}
	}
	tests := map[string]struct {
		uid   types.UID
		state claims.State
		deny  bool
	}{
		"own claim, same uid":             {uid: "u", state: bound("ns/vm", "u")},
		"own name, another uid":           {uid: "u", state: bound("ns/vm", "old"), deny: true},
		"own name, no uid recorded":       {uid: "u", state: claims.State{ClaimedBy: "ns/vm"}},
		"another VM's claim (not judged)": {uid: "u", state: bound("ns/other", "x")},
		"uid not known":                   {state: bound("ns/vm", "old")},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := ForeignSelfClaims("ns/vm", tc.uid, []VolumeDisk{disk}, map[string]claims.State{"home": tc.state}, "fix it")
			if (len(got) > 0) != tc.deny {
				t.Fatalf("ForeignSelfClaims = %+v, want deny %v", got, tc.deny)
			}
			if tc.deny && (got[0].Field != "f" || got[0].ID != "disk-claim" || !strings.Contains(got[0].Message, "fix: fix it")) {
				t.Errorf("violation %+v lacks the field, rule or fix", got[0])
			}
		})
	}
}

func TestVMIAttachments(t *testing.T) {
	const vmi = `{"metadata":{"name":"vmi"},"spec":{"domain":{"devices":{"disks":[{"name":"a","disk":{}},{"name":"b","cdrom":{}}]}},"volumes":[` +
		`{"name":"root","containerDisk":{"image":"x"}},{"name":"a","persistentVolumeClaim":{"claimName":"pa"}},{"name":"b","dataVolume":{"name":"db"}}]}}`
	const before = `{"metadata":{"name":"vmi"},"spec":{"domain":{"devices":{"disks":[{"name":"a","disk":{}}]}},"volumes":[` +
		`{"name":"root","containerDisk":{"image":"x"}},{"name":"a","persistentVolumeClaim":{"claimName":"pa"}}]}}`
	pa := VolumeDisk{Name: "pa", Field: "spec.volumes[1].persistentVolumeClaim.claimName", Volume: "a"}
	db := VolumeDisk{Name: "db", Field: "spec.volumes[2].dataVolume.name", Volume: "b", ReadOnly: true}
	tests := map[string]struct {
		object, old string
		want        []VolumeDisk
		wantErr     bool
	}{
		"create":           {object: vmi, want: []VolumeDisk{pa, db}},
		"hot-plug update":  {object: vmi, old: before, want: []VolumeDisk{db}},
		"unchanged":        {object: vmi, old: vmi},
		"no spec":          {object: `{"metadata":{"name":"vmi"}}`},
		"volumes not list": {object: `{"spec":{"volumes":"x"}}`, wantErr: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var old []byte
			if tc.old != "" {
				old = []byte(tc.old)
			}
			got, err := VMIAttachments([]byte(tc.object), old)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error %v", err, tc.wantErr)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("VMIAttachments =\n%+v\nwant\n%+v", got, tc.want)
			}
		})
	}
}

func TestVolumeRequestAttachments(t *testing.T) {
	req := func(vol, src string, extra string) string {
		return `{"addVolumeOptions":{"name":"` + vol + `","disk":{"name":"` + vol + `"` + extra + `},"volumeSource":` + src + `}}`
	}
	pvc := req("hp", `{"persistentVolumeClaim":{"claimName":"home","hotpluggable":true}}`, `,"disk":{"bus":"scsi"}`)
	dvRO := req("iso", `{"dataVolume":{"name":"iso","hotpluggable":true}}`, `,"cdrom":{}`)
	remove := `{"removeVolumeOptions":{"name":"old"}}`
	status := func(reqs ...string) string {
		return `{"metadata":{"name":"vm"},"status":{"volumeRequests":[` + strings.Join(reqs, ",") + `]}}`
	}
	home := VolumeDisk{Name: "home", Field: "status.volumeRequests[0].addVolumeOptions.volumeSource.persistentVolumeClaim.claimName", Volume: "hp"}
	iso := VolumeDisk{Name: "iso", Field: "status.volumeRequests[1].addVolumeOptions.volumeSource.dataVolume.name", Volume: "iso", ReadOnly: true}
	tests := map[string]struct {
		object, old string
		want        []VolumeDisk
	}{
		"first request":                 {object: status(pvc), old: `{"status":{}}`, want: []VolumeDisk{home}},
		"second request added":          {object: status(pvc, dvRO), old: status(pvc), want: []VolumeDisk{iso}},
		"requests cleared":              {object: status(), old: status(pvc)},
		"remove request only":           {object: status(remove), old: `{}`},
		"unchanged (controller writes)": {object: status(pvc), old: status(pvc)},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := VolumeRequestAttachments([]byte(tc.object), []byte(tc.old))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("VolumeRequestAttachments =\n%+v\nwant\n%+v", got, tc.want)
			}
		})
	}
}

func TestVMIHolder(t *testing.T) {
	yes, no := true, false
	ref := func(kind, apiVersion, name string, controller *bool) metav1.OwnerReference {
		return metav1.OwnerReference{Kind: kind, APIVersion: apiVersion, Name: name, UID: "u", Controller: controller}
	}
	none := types.NamespacedName{Namespace: "ns"}
	vm := types.NamespacedName{Namespace: "ns", Name: "vm"}
	tests := map[string]struct {
		owners  []metav1.OwnerReference
		want    types.NamespacedName
		wantUID types.UID
	}{
		"created directly":           {want: none},
		"controlled by its VM":       {owners: []metav1.OwnerReference{ref("VirtualMachine", "kubevirt.io/v1", "vm", &yes)}, want: vm, wantUID: "u"},
		"VM of another name":         {owners: []metav1.OwnerReference{ref("VirtualMachine", "kubevirt.io/v1", "other", &yes)}, want: none},
		"not the controller":         {owners: []metav1.OwnerReference{ref("VirtualMachine", "kubevirt.io/v1", "vm", &no)}, want: none},
		"another group's kind":       {owners: []metav1.OwnerReference{ref("VirtualMachine", "example.com/v1", "vm", &yes)}, want: none},
		"controlled by another kind": {owners: []metav1.OwnerReference{ref("ReplicaSet", "kubevirt.io/v1", "vm", &yes)}, want: none},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, uid := vmiHolder("ns", "vm", tc.owners)
			if got != tc.want || uid != tc.wantUID {
				t.Errorf("vmiHolder = %v, %q; want %v, %q", got, uid, tc.want, tc.wantUID)
			}
		})
	}
}

// TestAttachHandlersFailureModes: a body the VMI webhook or an unmanaged
// VM's status webhook cannot read admits with a warning (they fail open,
// as their failurePolicy Ignore does); a managed VM's status webhook
// answers 400 (it fails closed).
func TestAttachHandlersFailureModes(t *testing.T) {
	vmi := NewVMIHandler(Snapshotter{}, nil, nil)
	status := NewVMStatusHandler(Snapshotter{}, nil, nil)
	tests := map[string]struct {
		h       admission.Handler
		op      admissionv1.Operation
		raw     string
		allowed bool
	}{
		"VMI not JSON":                     {h: vmi, op: admissionv1.Create, raw: `{`, allowed: true},
		"VMI volumes of a bad type":        {h: vmi, op: admissionv1.Create, raw: `{"spec":{"volumes":"x"}}`, allowed: true},
		"unmanaged VM status not readable": {h: status, op: admissionv1.Update, raw: `{"status":{"volumeRequests":"x"}}`, allowed: true},
		"managed VM status not readable":   {h: status, op: admissionv1.Update, raw: `{"metadata":{"labels":{"virtstation.io/managed":"true"}},"status":{"volumeRequests":"x"}}`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			resp := tc.h.Handle(context.Background(), admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
				UID: "req-1", Operation: tc.op, Namespace: "ns", Name: "vm",
				Object: runtime.RawExtension{Raw: []byte(tc.raw)}, OldObject: runtime.RawExtension{Raw: []byte(tc.raw)},
			}})
			if resp.Allowed != tc.allowed {
				t.Fatalf("allowed = %v, want %v (%+v)", resp.Allowed, tc.allowed, resp.Result)
			}
			if tc.allowed && (len(resp.Warnings) != 1 || !strings.Contains(resp.Warnings[0], "req-1")) {
				t.Errorf("warnings = %q, want one naming the request", resp.Warnings)
			}
			if !tc.allowed && resp.Result.Code != 400 {
				t.Errorf("code = %d, want 400", resp.Result.Code)
			}
		})
	}
}

// TestVMIHandler drives the VMI webhook on a fake cluster: the disk "home"
// is claimed by VM ns/owner (uid u-owner), which exists and attaches it.
func TestVMIHandler(t *testing.T) {
	ctx := context.Background()
	owner := &kubevirtv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "owner", UID: "u-owner"},
		Spec: kubevirtv1.VirtualMachineSpec{Template: &kubevirtv1.VirtualMachineInstanceTemplateSpec{Spec: kubevirtv1.VirtualMachineInstanceSpec{
			Volumes: []kubevirtv1.Volume{{Name: "home", VolumeSource: kubevirtv1.VolumeSource{PersistentVolumeClaim: &kubevirtv1.PersistentVolumeClaimVolumeSource{
				PersistentVolumeClaimVolumeSource: corev1.PersistentVolumeClaimVolumeSource{ClaimName: "home"}}}}},
		}}}}
	c := fake.NewClientBuilder().WithScheme(handlerScheme(t)).WithObjects(owner,
		labelledPVC("home", map[string]string{api.AnnotationClaimedBy: "ns/owner", api.AnnotationClaimUIDs: "ns/owner=u-owner",
			api.AnnotationClaimedAt: time.Now().UTC().Format(time.RFC3339)}),
		labelledPVC("free", nil)).Build()
	h := NewVMIHandler(Snapshotter{Cache: c, API: c, NoDataVolumes: true, Grace: time.Minute}, &atomic.Pointer[policy.Modes]{}, nil)
	vmi := func(name, pvc string, owners ...metav1.OwnerReference) []byte {
		raw, err := json.Marshal(map[string]any{
			"metadata": map[string]any{"name": name, "namespace": "ns", "ownerReferences": owners},
			"spec": map[string]any{"domain": map[string]any{"devices": map[string]any{"disks": []any{map[string]any{"name": "d", "disk": map[string]any{}}}}},
				"volumes": []any{map[string]any{"name": "d", "persistentVolumeClaim": map[string]any{"claimName": pvc}}}},
		})
		if err != nil {
			t.Fatal(err)
		}
		return raw
	}
	yes := true
	ownedBy := func(uid types.UID) metav1.OwnerReference {
		return metav1.OwnerReference{APIVersion: "kubevirt.io/v1", Kind: "VirtualMachine", Name: "owner", UID: uid, Controller: &yes}
	}
	tests := map[string]struct {
		object, old []byte
		wantDenied  string
	}{
		"the holder's own VMI":               {object: vmi("owner", "home", ownedBy("u-owner"))},
		"a VMI created directly":             {object: vmi("rogue", "home"), wantDenied: `spec.volumes[0].persistentVolumeClaim.claimName: Forbidden: data disk "home" is claimed writable by VM ns/owner`},
		"a VMI of an earlier VM of the name": {object: vmi("owner", "home", ownedBy("u-old")), wantDenied: "claimed by an earlier VM of this name"},
		"a free disk":                        {object: vmi("rogue", "free")},
		"hot-plug of the claimed disk":       {object: vmi("rogue", "home"), old: vmi("rogue", "free"), wantDenied: `data disk "home"`},
		"update that adds nothing":           {object: vmi("rogue", "home"), old: vmi("rogue", "home")},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			op := admissionv1.Create
			if tc.old != nil {
				op = admissionv1.Update
			}
			resp := h.Handle(ctx, admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
				UID: "req", Operation: op, Namespace: "ns", Name: "vmi",
				Object: runtime.RawExtension{Raw: tc.object}, OldObject: runtime.RawExtension{Raw: tc.old},
			}})
			if tc.wantDenied == "" {
				if !resp.Allowed {
					t.Fatalf("denied: %s", resp.Result.Message)
				}
				return
			}
			if resp.Allowed || resp.Result.Code != 403 || !strings.Contains(resp.Result.Message, tc.wantDenied) || !strings.Contains(resp.Result.Message, "rule: disk-claim") {
				t.Fatalf("response = allowed %v, %+v; want 403 containing %q and the rule", resp.Allowed, resp.Result, tc.wantDenied)
			}
		})
	}
}
