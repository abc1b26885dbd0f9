package mutate

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"text/tabwriter"

	admissionv1 "k8s.io/api/admission/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/virtstation/virtstation/api"
)

// limitBenchCase is one admission for BenchmarkMutatingWebhookLimits.
type limitBenchCase struct {
	name    string
	vm      string
	cluster *StaticCluster
	// denied: the admission is a denial.
	denied bool
}

// longDeviceName is the i-th longest device plugin resource name a
// virtstation.io/gpus entry can carry: a 253-character prefix and a
// 63-character name.
func longDeviceName(i int) string {
	prefix := strings.Repeat(strings.Repeat("d", 63)+".", 3) + fmt.Sprintf("v%02d", i) + strings.Repeat("x", 58)
	return prefix + "/" + strings.Repeat("g", 63)
}

// padded is v with trailing blanks up to the annotation limit.
func padded(v string) string {
	return v + strings.Repeat(" ", api.MaxAnnotationBytes-len(v))
}

// limitBenchCases are a typical VM (issue 8's full VM: MAC, a GPU, video,
// two data disks, SSH keys through the guest agent, the user's own
// cloud-config) and the largest inputs the limits allow, one limit at a time
// and all at once, and two inputs past them.
func limitBenchCases(tb testing.TB) []limitBenchCase {
	cluster := func(disks ...string) *StaticCluster {
		c := NewStaticCluster(nil)
		c.CollectKeys = fakeCollectKeys
		c.AddSecret(testKeySecret())
		for _, d := range disks {
			c.AddDataDisk(api.KindDataVolume, testNamespace, d, stepLabelDataDisk)
		}
		return c
	}
	userConfig := "#cloud-config\nusers:\n  - name: heidi\n    groups: [wheel]\npackages: [git, tmux]\n"
	typicalSpec := specParts{
		disks:   jsonList(virtioDisk("cloudinit", "")),
		volumes: jsonList(noCloud("cloudinit", jsonObj("userData", userConfig))),
		devices: jsonObj("interfaces", jsonList(jsonObj("name", "default", "masquerade", jsonObj()))),
		spec:    jsonObj("networks", jsonList(jsonObj("name", "default", "pod", jsonObj()))),
	}
	typicalAnn := ann(api.AnnotationMAC, "auto", api.AnnotationGPUs, h200+"=1", api.AnnotationVideo, "virtio",
		api.AnnotationSSHUser, "heidi", api.AnnotationSSHPropagation, api.PropagationQemuGuestAgent,
		api.AnnotationDataDisks, "home:/home/heidi/work,scratch:/srv/scratch")

	// 16 GPUs, each with the longest device name, padded to the limit.
	gpus := make([]string, api.MaxGPUs)
	for i := range gpus {
		gpus[i] = longDeviceName(i) + "=1"
	}
	gpuValue := padded(strings.Join(gpus, ","))

	// 16 data disks in JSON, each a 253-character name and a 255-character
	// mount path, padded to the limit.
	var disks []benchDisk
	var diskNames []string
	for i := range api.MaxDataDisks {
		name := fmt.Sprintf("%02d", i) + strings.Repeat("a", 251)
		disks = append(disks, benchDisk{Name: name, MountPath: "/" + fmt.Sprintf("%02d", i) + strings.Repeat("m", 252)})
		diskNames = append(diskNames, name)
	}
	b, err := json.Marshal(disks)
	if err != nil {
		tb.Fatal(err)
	}
	diskValue := padded(string(b))

	// The user's user-data in their Secret, about as large as still merges
	// into one Secret with the 16 mounts and the keys (the merge encodes it
	// in base64: 4/3 of its size).
	userData := []byte("#cloud-config\n#" + strings.Repeat("x", api.MaxUserDataBytes*3/4-32<<10) + "\n")
	withUserSecret := func(c *StaticCluster) *StaticCluster { c.AddSecret(testUserSecret(userData)); return c }
	userSecretSpec := func(p specParts) specParts {
		p.disks = jsonList(virtioDisk("cloudinit", ""))
		p.volumes = jsonList(noCloud("cloudinit", jsonObj("secretRef", jsonObj("name", userSecretName))))
		return p
	}

	// User disks and volumes that, with the 16 data disks, fill KubeVirt's
	// 256 (the root disk and the cloud-init disk are two of them).
	fill := func(p specParts) specParts {
		for i := range api.MaxDisks - api.MaxDataDisks - 2 {
			name := fmt.Sprintf("user%d", i)
			p.disks = append(p.disks, virtioDisk(name, ""))
			p.volumes = append(p.volumes, jsonObj("name", name, "emptyDisk", jsonObj("capacity", "1Gi")))
		}
		return p
	}

	sixteenDisks := ann(api.AnnotationMAC, "auto", api.AnnotationDataDisks, diskValue)
	all := ann(api.AnnotationMAC, "auto", api.AnnotationGPUs, gpuValue, api.AnnotationVideo, "virtio",
		api.AnnotationSSHUser, "heidi", api.AnnotationSSHPropagation, api.PropagationCloudInit, api.AnnotationDataDisks, diskValue)
	allSpec := fill(userSecretSpec(typicalSpec))

	return []limitBenchCase{
		{name: "typical", vm: vmJSON(typicalAnn, typicalSpec.String()), cluster: cluster("home", "scratch")},
		{name: "gpus-16-longest", vm: vmJSON(ann(api.AnnotationGPUs, gpuValue), specParts{}.String()), cluster: cluster()},
		{name: "gpu-resource-16", vm: vmJSON(ann(), gpuResources("limits", "nvidia.com/gpu", "16").String()), cluster: cluster()},
		{name: "data-disks-16-longest", vm: vmJSON(sixteenDisks, specParts{}.String()), cluster: cluster(diskNames...)},
		{name: "disks-256", vm: vmJSON(sixteenDisks, fill(specParts{}).String()), cluster: cluster(diskNames...)},
		{name: "user-data-1MiB", vm: vmJSON(sixteenDisks, userSecretSpec(specParts{}).String()), cluster: withUserSecret(cluster(diskNames...))},
		{name: "all-limits", vm: vmJSON(all, allSpec.String()), cluster: withUserSecret(cluster(diskNames...))},
		{name: "denied-gpu-resource-8000", vm: vmJSON(ann(), gpuResources("limits", "nvidia.com/gpu", "8000").String()), cluster: cluster(), denied: true},
		{name: "denied-gpus-12000-entries", vm: vmJSON(ann(api.AnnotationGPUs, gpuAnnotation(12000)), specParts{}.String()), cluster: cluster(), denied: true},
	}
}

// benchDisk is a data-disks JSON entry.
type benchDisk struct {
	Name      string `json:"name"`
	MountPath string `json:"mountPath"`
}

// BenchmarkMutatingWebhookLimits times the mutating webhook's whole work
// for one admission (Handler.Handle: decode, every step with the cluster
// reads in memory, the JSON patch; Secret writes stubbed) for a typical VM
// and for the largest inputs the limits allow, side by side. Each reports
// x-typical, its time over the typical VM's, and a table of them is
// printed at the end. Target: the worst case under 10x the typical VM.
func BenchmarkMutatingWebhookLimits(b *testing.B) {
	ctx := context.Background()
	cases := limitBenchCases(b)
	nsPerOp := make([]float64, len(cases))
	sizes := make([]int, len(cases))
	for i, c := range cases {
		req := vmRequest(admissionv1.Create, c.vm, "")
		sizes[i] = len(c.vm)
		h := NewHandler(c.cluster)
		check := func(resp admission.Response) {
			if resp.Allowed == c.denied {
				b.Fatalf("%s: allowed = %v, want %v: %+v", c.name, resp.Allowed, !c.denied, resp.Result)
			}
		}
		check(h.Handle(ctx, req))
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				check(h.Handle(ctx, req))
			}
			nsPerOp[i] = float64(b.Elapsed().Nanoseconds()) / float64(b.N)
			if nsPerOp[0] > 0 {
				b.ReportMetric(nsPerOp[i]/nsPerOp[0], "x-typical")
			}
		})
	}
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "admission\trequest bytes\tµs/op\tx typical\t")
	for i, c := range cases {
		fmt.Fprintf(w, "%s\t%d\t%.1f\t%.1f\t\n", c.name, sizes[i], nsPerOp[i]/1e3, nsPerOp[i]/nsPerOp[0])
	}
	if err := w.Flush(); err != nil {
		b.Fatal(err)
	}
}
