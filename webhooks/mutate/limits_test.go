package mutate

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/virtstation/virtstation/api"
)

// limitBudget is how long one mutation of the largest inputs may take in
// these tests: far more than it needs (microseconds), far less than the
// webhook's 5 s timeout. Without the limits, 8000 GPUs took 14 s and 1e9
// never finished.
const limitBudget = time.Second

var (
	pathSpecGPUs      = field.NewPath("spec", "template", "spec", "domain", "devices", "gpus")
	pathSpecResources = field.NewPath("spec", "template", "spec", "domain", "resources")
)

// gpuResources is a domain with the given resource requests or limits.
func gpuResources(part string, kv ...any) specParts {
	return specParts{domain: jsonObj("resources", jsonObj(part, jsonObj(kv...)))}
}

// manyDisks is n disks and n volumes of the user's (the root disk comes on
// top).
func manyDisks(n int) specParts {
	var p specParts
	for i := range n {
		name := fmt.Sprintf("user%d", i)
		p.disks = append(p.disks, virtioDisk(name, ""))
		p.volumes = append(p.volumes, jsonObj("name", name, "emptyDisk", jsonObj("capacity", "1Gi")))
	}
	return p
}

// gpuAnnotation is virtstation.io/gpus with n entries of one GPU each.
func gpuAnnotation(n int) string {
	entries := make([]string, n)
	for i := range entries {
		entries[i] = fmt.Sprintf("vendor.com/gpu%d=1", i)
	}
	return strings.Join(entries, ",")
}

func TestMutateLimits(t *testing.T) {
	addHome := func(c *StaticCluster) { c.AddDataDisk(api.KindDataVolume, testNamespace, "home", stepLabelDataDisk) }
	distinctKeys := make([]any, 0, 2*(api.MaxGPUs+1))
	for i := range api.MaxGPUs + 1 {
		distinctKeys = append(distinctKeys, fmt.Sprintf("vendor%d.com/gpu", i), "0")
	}
	// Inline user-data just over what its annotation holds once the
	// merge moves it out of the VM's inline field.
	hugeUserData := "#cloud-config\n#" + strings.Repeat("x", api.MaxUserDataAnnotationBytes) + "\n"
	hugeUserDataSpec := specParts{
		disks:   jsonList(virtioDisk("cloudinitdisk", "")),
		volumes: jsonList(noCloud("cloudinitdisk", jsonObj("userData", hugeUserData))),
	}

	cases := map[string]struct {
		vm      string
		objects func(*StaticCluster)
		// wantDenied is built with the constructors the code uses; the
		// details must contain every string of wantDetail.
		wantDenied field.ErrorList
		wantDetail []string
		// wantGPUs, for an admitted case, is the length of gpus[].
		wantGPUs int
	}{
		"*/gpu of 8000": {
			vm:         vmJSON(stepAnn(), gpuResources("limits", "nvidia.com/gpu", "8000").String()),
			wantDenied: field.ErrorList{field.Invalid(pathSpecResources.Child("limits").Key("nvidia.com/gpu"), "8000", "")},
			wantDetail: []string{"from 0 to 16", "rule: gpus", "fix:"},
		},
		"*/gpu of 1e9": {
			vm:         vmJSON(stepAnn(), gpuResources("requests", "nvidia.com/gpu", "1e9").String()),
			wantDenied: field.ErrorList{field.Invalid(pathSpecResources.Child("requests").Key("nvidia.com/gpu"), "1e9", "")},
			wantDetail: []string{"from 0 to 16"},
		},
		"*/gpu of 1e9 as a JSON number": {
			vm:         vmJSON(stepAnn(), gpuResources("limits", "nvidia.com/gpu", 1e9).String()),
			wantDenied: field.ErrorList{field.Invalid(pathSpecResources.Child("limits").Key("nvidia.com/gpu"), 1e9, "")},
			wantDetail: []string{"from 0 to 16"},
		},
		"*/gpu negative": {
			vm:         vmJSON(stepAnn(), gpuResources("limits", "nvidia.com/gpu", "-1").String()),
			wantDenied: field.ErrorList{field.Invalid(pathSpecResources.Child("limits").Key("nvidia.com/gpu"), "-1", "")},
			wantDetail: []string{"from 0 to 16"},
		},
		"*/gpu not a whole number": {
			vm:         vmJSON(stepAnn(), gpuResources("limits", "nvidia.com/gpu", "500m").String()),
			wantDenied: field.ErrorList{field.Invalid(pathSpecResources.Child("limits").Key("nvidia.com/gpu"), "500m", "")},
			wantDetail: []string{"whole number"},
		},
		"*/gpu of 16, the most": {
			vm:       vmJSON(stepAnn(), gpuResources("limits", "nvidia.com/gpu", "16").String()),
			wantGPUs: 16,
		},
		"*/gpu of 0 moves nothing": {
			vm: vmJSON(stepAnn(), gpuResources("limits", "nvidia.com/gpu", "0").String()),
		},
		"more than 16 distinct */gpu keys": {
			vm:         vmJSON(stepAnn(), gpuResources("limits", distinctKeys...).String()),
			wantDenied: field.ErrorList{field.TooMany(pathSpecResources, api.MaxGPUs+1, api.MaxGPUs)},
			wantDetail: []string{"at most 16", "rule: gpus"},
		},
		"annotation and resources together over 16": {
			vm:         vmJSON(stepAnn(api.AnnotationGPUs, h200+"=10"), gpuResources("limits", "nvidia.com/gpu", "7").String()),
			wantDenied: field.ErrorList{field.TooMany(pathSpecGPUs, 17, api.MaxGPUs)},
			wantDetail: []string{"at most 16", "rule: gpus", "fix: ask for at most 16 GPUs"},
		},
		"annotation and resources together 16, the most": {
			vm:       vmJSON(stepAnn(api.AnnotationGPUs, h200+"=10"), gpuResources("limits", "nvidia.com/gpu", "6").String()),
			wantGPUs: 16,
		},
		"sixteen annotation entries, the most": {
			vm:       vmJSON(stepAnn(api.AnnotationGPUs, gpuAnnotation(api.MaxGPUs)), specParts{}.String()),
			wantGPUs: 16,
		},
		"seventeen annotation entries": {
			vm:         vmJSON(stepAnn(api.AnnotationGPUs, gpuAnnotation(api.MaxGPUs+1)), specParts{}.String()),
			wantDenied: field.ErrorList{field.TooMany(pathGPUsAnn, api.MaxGPUs+1, api.MaxGPUs)},
			wantDetail: []string{"at most 16", "rule: gpus"},
		},
		"12,000 annotation entries": {
			vm:         vmJSON(stepAnn(api.AnnotationGPUs, gpuAnnotation(12000)), specParts{}.String()),
			wantDenied: field.ErrorList{field.TooLong(pathGPUsAnn, "", api.MaxAnnotationBytes)},
			wantDetail: []string{"16384 bytes", "rule: limits", "fix: shorten"},
		},
		"any virtstation.io annotation over the size limit": {
			vm:         vmJSON(stepAnn(api.AnnotationVideo, strings.Repeat("v", api.MaxAnnotationBytes+1)), specParts{}.String()),
			wantDenied: field.ErrorList{field.TooLong(pathVideoAnn, "", api.MaxAnnotationBytes)},
			wantDetail: []string{"16384 bytes", "rule: limits"},
		},
		"a hand-written injected record over its limit": {
			vm:         vmJSON(stepAnn(api.AnnotationInjected, `{"gpus":{"added":[]}}`+strings.Repeat(" ", api.MaxInjectedBytes)), specParts{}.String()),
			wantDenied: field.ErrorList{field.TooLong(annPath.Key(api.AnnotationInjected), "", api.MaxInjectedBytes)},
			wantDetail: []string{"65536 bytes", "fix: remove the annotation"},
		},
		"data disks take disks and volumes past KubeVirt's 256": {
			vm:      vmJSON(stepAnn(api.AnnotationDataDisks, "home:/home"), manyDisks(api.MaxDisks-1).String()),
			objects: addHome,
			// The root disk, 255 of the user's, vs-home and the cloud-init disk.
			wantDenied: field.ErrorList{field.TooMany(pathSpecDisks, 258, api.MaxDisks), field.TooMany(pathSpecVolumes, 258, api.MaxVolumes)},
			wantDetail: []string{"at most 256", "rule: limits", "fix: attach fewer data disks"},
		},
		"a data disk that fills disks to 256 exactly": {
			vm:      vmJSON(stepAnn(api.AnnotationDataDisks, "home:/home"), manyDisks(api.MaxDisks-3).String()),
			objects: addHome,
		},
		"lists already past KubeVirt's limits are KubeVirt's to deny": {
			vm: vmJSON(stepAnn(), manyDisks(300).String()),
		},
		"inline user-data larger than its annotation holds": {
			vm:         vmJSON(stepAnn(api.AnnotationDataDisks, "home:/home"), hugeUserDataSpec.String()),
			objects:    addHome,
			wantDenied: field.ErrorList{field.TooLong(pathSpecVolumes.Index(1).Child("cloudInitNoCloud", "userData"), "", api.MaxUserDataAnnotationBytes)},
			wantDetail: []string{"65536 bytes", "rule: cloud-init", "fix:", "secretRef"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			in := mutateInput(t, "", tc.vm, "")
			c := NewStaticCluster(nil)
			if tc.objects != nil {
				tc.objects(c)
			}
			ctx, cancel := context.WithTimeout(context.Background(), limitBudget)
			defer cancel()
			start := time.Now()
			res, err := Mutate(ctx, in, c)
			if took := time.Since(start); took > limitBudget {
				t.Errorf("Mutate took %v, want under %v", took, limitBudget)
			}
			if err != nil {
				t.Fatalf("Mutate: %v", err)
			}
			if len(tc.wantDenied) == 0 {
				if len(res.Denied) > 0 {
					t.Fatalf("unexpected denial: %v", res.Denied)
				}
				if got := len(listAt(t, res.Object, "spec", "template", "spec", "domain", "devices", "gpus")); got != tc.wantGPUs {
					t.Errorf("gpus[] has %d entries, want %d", got, tc.wantGPUs)
				}
				return
			}
			if len(res.Denied) != len(tc.wantDenied) {
				t.Fatalf("Denied = %v, want %v", res.Denied, tc.wantDenied)
			}
			for i, want := range tc.wantDenied {
				got := res.Denied[i]
				if got.Type != want.Type || got.Field != want.Field || !reflect.DeepEqual(got.BadValue, want.BadValue) {
					t.Errorf("Denied[%d] = %s %s %#v, want %s %s %#v", i, got.Type, got.Field, got.BadValue, want.Type, want.Field, want.BadValue)
				}
				for _, d := range tc.wantDetail {
					if !strings.Contains(got.Error(), d) {
						t.Errorf("Denied[%d] %q does not say %q", i, got.Error(), d)
					}
				}
			}
		})
	}
}

// TestGPUNamesAreLinear names the largest number of GPUs the limits allow
// next to many existing entries whose names take the low gpuN: the names
// skip every taken one, and are unique.
func TestGPUNamesAreLinear(t *testing.T) {
	const existing = 20000
	user := make([]any, existing)
	for i := range user {
		user[i] = gpuEntry(fmt.Sprintf("gpu%d", i), t4)
	}
	hostDevices := jsonList(jsonObj("name", fmt.Sprintf("gpu%d", existing), "deviceName", "intel.com/qat"))
	in := mutateInput(t, "", vmJSON(stepAnn(api.AnnotationGPUs, h200+"=16"), specParts{devices: jsonObj("gpus", user, "hostDevices", hostDevices)}.String()), "")
	start := time.Now()
	res, err := Mutate(context.Background(), in, NewStaticCluster(nil))
	if err != nil || len(res.Denied) > 0 {
		t.Fatalf("Mutate: %v %v", err, res.Denied)
	}
	if took := time.Since(start); took > limitBudget {
		t.Errorf("Mutate took %v, want under %v", took, limitBudget)
	}
	gpus := listAt(t, res.Object, "spec", "template", "spec", "domain", "devices", "gpus")
	if len(gpus) != existing+16 {
		t.Fatalf("gpus[] has %d entries, want %d", len(gpus), existing+16)
	}
	for i, g := range gpus[existing:] {
		if want := fmt.Sprintf("gpu%d", existing+1+i); g.(map[string]any)["name"] != want {
			t.Fatalf("added gpus[%d] is named %v, want %s", i, g.(map[string]any)["name"], want)
		}
	}
}

// FuzzGPUCount reads `*/gpu` resource values: a count is only ever a whole
// number of devices within the limit, the value the quantity says.
func FuzzGPUCount(f *testing.F) {
	for _, s := range []string{"0", "1", "16", "17", "8000", "1e9", "1e+09", "-1", "500m", "1000m", "0.5", "16.0", "1Ki", "2e0", "+3", "lots", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := gpuCount(s)
		if err != nil {
			return
		}
		if n < 0 || n > api.MaxGPUs {
			t.Fatalf("gpuCount(%q) = %d, outside 0 to %d", s, n, api.MaxGPUs)
		}
		q := resource.MustParse(s)
		if q.Cmp(*resource.NewQuantity(int64(n), resource.DecimalSI)) != 0 {
			t.Fatalf("gpuCount(%q) = %d, but the quantity is %s", s, n, q.String())
		}
	})
}
