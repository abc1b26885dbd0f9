package admission_test

import (
	"context"
	"encoding/json"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/virtstation/virtstation/api"
	"github.com/virtstation/virtstation/sshkeys"
	"github.com/virtstation/virtstation/webhooks/mutate"
	"github.com/virtstation/virtstation/webhooks/validate"
)

// fullVM is issue 8's full VM, as test/bench/admission creates it: MAC,
// GPU, video, two data disks (a DataVolume and a PVC) and SSH keys through
// the guest agent, with the user's own cloud-config.
const fullVM = `{"apiVersion":"kubevirt.io/v1","kind":"VirtualMachine","metadata":{"name":"full-b-0000","namespace":"workstations",
"labels":{"virtstation.io/managed":"true"},
"annotations":{"virtstation.io/mac":"auto","virtstation.io/gpus":"nvidia.com/GH100_H200=1","virtstation.io/video":"virtio",
"virtstation.io/ssh-user":"heidi","virtstation.io/ssh-propagation":"qemuGuestAgent",
"virtstation.io/data-disks":"home-0000:/home/heidi/work,scratch-0000:/srv/scratch"}},
"spec":{"runStrategy":"Halted","template":{"metadata":{},"spec":{"domain":{"cpu":{"cores":4},"memory":{"guest":"16Gi"},
"devices":{"disks":[{"name":"root","disk":{"bus":"virtio"}},{"name":"cloudinit","disk":{"bus":"virtio"}}],
"interfaces":[{"name":"default","masquerade":{}}]}},
"networks":[{"name":"default","pod":{}}],
"volumes":[{"name":"root","containerDisk":{"image":"quay.io/containerdisks/fedora:41"}},
{"name":"cloudinit","cloudInitNoCloud":{"userData":"#cloud-config\nusers:\n  - name: heidi\n    groups: [wheel]\npackages: [git, tmux]\n"}}]}}}}`

// stagesCluster answers the full VM's reads from memory.
func stagesCluster() *mutate.StaticCluster {
	c := mutate.NewStaticCluster(nil)
	c.CollectKeys = func(s []corev1.Secret) []string { k, _ := sshkeys.Collect(s); return k }
	c.AddSecret(&corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "workstations", Name: "team-keys", Labels: map[string]string{api.LabelSSHPublicKey: api.LabelTrue}},
		Data:       map[string][]byte{"authorized_keys": []byte("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIM+A+BzAeVbKARZ/Hth8zd13lHA/GpufS18bOYtokQH7 alice@example\n")},
	})
	labels := map[string]string{api.LabelDataDisk: api.LabelTrue}
	c.AddDataDisk(api.KindDataVolume, "workstations", "home-0000", labels)
	c.AddDataDisk(api.KindPVC, "workstations", "scratch-0000", labels)
	return c
}

// BenchmarkAdmissionStages times each stage of one admission of the full VM
// (a CREATE), as the two webhook handlers run them: decode (the mutating
// handler's DecodeVM), mutate (mutate.Admit, the mutating handler's whole
// work: decode, every step with cluster reads in memory, and the JSON
// patch from the typed view carried onto the request; patch-bytes is
// controller-runtime's byte diff of the mutated typed VM, for reference),
// validate-decode (the validating handler's one decode of the mutated
// object), input (the whole policy input document) and rego (the shipped
// policies on that input); input+rego is what the validating handler runs
// on the decoded request.
func BenchmarkAdmissionStages(b *testing.B) {
	ctx := context.Background()
	raw := []byte(fullVM)
	cluster := stagesCluster()
	vm, err := mutate.DecodeVM(raw)
	if err != nil {
		b.Fatal(err)
	}
	in := mutate.Input{Operation: "CREATE", Namespace: "workstations", Name: vm.Name, RequestUID: "uid", Object: raw, VM: vm}
	req := mutate.Request{Operation: "CREATE", Namespace: "workstations", Name: vm.Name, UID: "uid", Object: raw}
	res, err := mutate.Mutate(ctx, in, cluster)
	if err != nil || len(res.Denied) > 0 {
		b.Fatalf("mutate the full VM: %v %v", err, res.Denied)
	}
	mutated, err := json.Marshal(res.Object)
	if err != nil {
		b.Fatal(err)
	}
	disks := map[string]validate.DiskState{
		"home-0000":    {Exists: true, Labelled: true, Kind: "DataVolume"},
		"scratch-0000": {Exists: true, Labelled: true, Kind: "PersistentVolumeClaim"},
	}
	user := map[string]any{"username": "heidi@example.com", "uid": "1234", "groups": []any{"researchers", "system:authenticated"}}

	b.Run("decode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := mutate.DecodeVM(raw); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("mutate", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := mutate.Admit(ctx, req, cluster); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("validate-decode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := validate.DecodeRequest("CREATE", "workstations", vm.Name, mutated, nil, user); err != nil {
				b.Fatal(err)
			}
		}
	})
	// patch-bytes is the patch as controller-runtime's defaulter builds
	// it: encode the mutated typed VM and diff the bytes against the raw
	// request (which would also drop the fields the Go types do not know).
	b.Run("patch-bytes", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			out, err := json.Marshal(res.VM)
			if err != nil {
				b.Fatal(err)
			}
			if resp := admission.PatchResponseFromRaw(raw, out); !resp.Allowed {
				b.Fatal(resp.Result)
			}
		}
	})
	b.Run("input", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := validate.BuildInput("CREATE", "workstations", vm.Name, mutated, nil, user, disks); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("rego", func(b *testing.B) {
		e := stagesEngine(ctx, b)
		input, err := validate.BuildInput("CREATE", "workstations", vm.Name, mutated, nil, user, disks)
		if err != nil {
			b.Fatal(err)
		}
		if d, err := e.Evaluate(ctx, input); err != nil || len(d.Deny) > 0 {
			b.Fatalf("evaluate: %v %v", err, d.Deny)
		}
		b.ReportAllocs()
		for b.Loop() {
			if _, err := e.Evaluate(ctx, input); err != nil {
				b.Fatal(err)
			}
		}
	})
	// input+rego is what the validating handler runs per claim attempt on
	// the decoded request: the input parts the policies read, and rego.
	b.Run("input+rego", func(b *testing.B) {
		e := stagesEngine(ctx, b)
		r, err := validate.DecodeRequest("CREATE", "workstations", vm.Name, mutated, nil, user)
		if err != nil {
			b.Fatal(err)
		}
		if d, err := e.EvaluateRequest(ctx, r, disks); err != nil || len(d.Deny) > 0 {
			b.Fatalf("evaluate: %v %v", err, d.Deny)
		}
		b.ReportAllocs()
		for b.Loop() {
			if _, err := e.EvaluateRequest(ctx, r, disks); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// stagesEngine is an engine with the shipped policies, as the webhook loads
// them at start.
func stagesEngine(ctx context.Context, b *testing.B) *validate.Engine {
	b.Helper()
	e := validate.NewEngine(0)
	if _, err := e.Load(ctx, validate.ShippedModules()); err != nil {
		b.Fatalf("load the shipped policies: %v", err)
	}
	return e
}
