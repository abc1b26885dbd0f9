package api

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// pathGPUs is where the gpus errors point.
var pathGPUs = field.NewPath("metadata", "annotations").Key(AnnotationGPUs)

// gpuEntries is n entries of one GPU each, of distinct devices.
func gpuEntries(n int) ([]string, []GPURequest) {
	entries, reqs := make([]string, n), make([]GPURequest, n)
	for i := range n {
		dev := fmt.Sprintf("vendor.com/gpu%d", i)
		entries[i], reqs[i] = dev+"=1", GPURequest{DeviceName: dev, Count: 1}
	}
	return entries, reqs
}

func TestParseGPUs(t *testing.T) {
	const h200 = "nvidia.com/GH100_H200"
	sixteen, sixteenReqs := gpuEntries(MaxGPUs)
	seventeen, _ := gpuEntries(MaxGPUs + 1)
	twelveThousand, _ := gpuEntries(12000)
	cases := map[string]struct {
		value   string
		want    []GPURequest
		wantErr field.ErrorList
	}{
		"absent": {value: ""},
		"blank":  {value: "  \n"},
		"one": {
			value: h200 + "=1",
			want:  []GPURequest{{DeviceName: h200, Count: 1}},
		},
		"several": {
			value: h200 + "=2,nvidia.com/TU104GL_Tesla_T4=1,amd.com/gpu=13",
			want: []GPURequest{
				{DeviceName: h200, Count: 2},
				{DeviceName: "nvidia.com/TU104GL_Tesla_T4", Count: 1},
				{DeviceName: "amd.com/gpu", Count: 13},
			},
		},
		"whitespace": {
			value: " " + h200 + " = 2 ,\tamd.com/gpu=1\n",
			want:  []GPURequest{{DeviceName: h200, Count: 2}, {DeviceName: "amd.com/gpu", Count: 1}},
		},
		"count left out means one": {
			value: h200 + ",amd.com/gpu=3",
			want:  []GPURequest{{DeviceName: h200, Count: 1}, {DeviceName: "amd.com/gpu", Count: 3}},
		},
		"no slash in the name": {
			value:   "GH100_H200=1",
			wantErr: field.ErrorList{field.Invalid(pathGPUs.Index(0), "GH100_H200=1", "")},
		},
		"name that is not a qualified name": {
			value:   h200 + "=1,nvidia.com/-H200=1",
			wantErr: field.ErrorList{field.Invalid(pathGPUs.Index(1), "nvidia.com/-H200=1", "")},
		},
		"two slashes": {
			value:   "nvidia.com/a/b=1",
			wantErr: field.ErrorList{field.Invalid(pathGPUs.Index(0), "nvidia.com/a/b=1", "")},
		},
		"empty entry": {
			value:   h200 + "=1,",
			wantErr: field.ErrorList{field.Invalid(pathGPUs.Index(1), "", "")},
		},
		"count zero": {
			value:   h200 + "=0",
			wantErr: field.ErrorList{field.Invalid(pathGPUs.Index(0), h200+"=0", "")},
		},
		"count seventeen": {
			value:   h200 + "=17",
			wantErr: field.ErrorList{field.Invalid(pathGPUs.Index(0), h200+"=17", "")},
		},
		"negative count": {
			value:   h200 + "=-1",
			wantErr: field.ErrorList{field.Invalid(pathGPUs.Index(0), h200+"=-1", "")},
		},
		"count that is not a number": {
			value:   h200 + "=two",
			wantErr: field.ErrorList{field.Invalid(pathGPUs.Index(0), h200+"=two", "")},
		},
		"empty count": {
			value:   h200 + "=",
			wantErr: field.ErrorList{field.Invalid(pathGPUs.Index(0), h200+"=", "")},
		},
		"duplicate device": {
			value:   h200 + "=1,amd.com/gpu=1, " + h200 + "=2",
			wantErr: field.ErrorList{field.Duplicate(pathGPUs.Index(2), h200)},
		},
		// Limits.
		"sixteen entries, the most": {
			value: strings.Join(sixteen, ","),
			want:  sixteenReqs,
		},
		"sixteen of one device, the most": {
			value: h200 + "=16",
			want:  []GPURequest{{DeviceName: h200, Count: 16}},
		},
		"seventeen entries": {
			value:   strings.Join(seventeen, ","),
			wantErr: field.ErrorList{field.TooMany(pathGPUs, MaxGPUs+1, MaxGPUs)},
		},
		"seventeen empty entries are counted before they are parsed": {
			value:   strings.Repeat(",", MaxGPUs),
			wantErr: field.ErrorList{field.TooMany(pathGPUs, MaxGPUs+1, MaxGPUs)},
		},
		"more than sixteen in all": {
			value:   h200 + "=9,amd.com/gpu=8",
			wantErr: field.ErrorList{field.Invalid(pathGPUs, h200+"=9,amd.com/gpu=8", "")},
		},
		"twelve thousand entries": {
			value:   strings.Join(twelveThousand, ","),
			wantErr: field.ErrorList{field.TooLong(pathGPUs, "", MaxAnnotationBytes)},
		},
		"value longer than the annotation limit": {
			value:   h200 + "=1" + strings.Repeat(" ", MaxAnnotationBytes),
			wantErr: field.ErrorList{field.TooLong(pathGPUs, "", MaxAnnotationBytes)},
		},
		"every bad entry": {
			value: "gpu=1," + h200 + "=99",
			wantErr: field.ErrorList{
				field.Invalid(pathGPUs.Index(0), "gpu=1", ""),
				field.Invalid(pathGPUs.Index(1), h200+"=99", ""),
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, errs := ParseGPUs(tc.value, pathGPUs)
			assertErrors(t, errs, tc.wantErr)
			if len(tc.wantErr) > 0 {
				if got != nil {
					t.Errorf("ParseGPUs(%q) = %+v with errors, want nil", tc.value, got)
				}
				return
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("ParseGPUs(%q) = %+v, want %+v", tc.value, got, tc.want)
			}
		})
	}
}

func FuzzParseGPUs(f *testing.F) {
	for _, s := range []string{
		"", "nvidia.com/GH100_H200=1", " nvidia.com/a = 2 , amd.com/gpu", "gpu=1", "nvidia.com/a=0",
		"nvidia.com/a=17", "nvidia.com/a=x", "nvidia.com/a=1,nvidia.com/a=1", "a.b/c=+16", ",",
		"a.b/c=9,a.b/d=8", strings.Repeat("a.b/c=1,", MaxGPUs) + "a.b/c=1",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, value string) {
		reqs, errs := ParseGPUs(value, pathGPUs)
		if len(errs) > 0 {
			if reqs != nil {
				t.Fatalf("ParseGPUs(%q) = %+v with errors %v", value, reqs, errs)
			}
			return
		}
		if len(value) > MaxAnnotationBytes {
			t.Fatalf("ParseGPUs accepted a %d-byte value, over the %d-byte limit", len(value), MaxAnnotationBytes)
		}
		seen := sets.New[string]()
		total := 0
		for i, r := range reqs {
			total += r.Count
			if r.Count < 1 || r.Count > MaxGPUs {
				t.Fatalf("ParseGPUs(%q)[%d].Count = %d, want 1 to %d", value, i, r.Count, MaxGPUs)
			}
			if !strings.Contains(r.DeviceName, "/") || len(validation.IsQualifiedName(r.DeviceName)) > 0 {
				t.Fatalf("ParseGPUs(%q)[%d].DeviceName = %q, want a qualified resource name", value, i, r.DeviceName)
			}
			if seen.Has(r.DeviceName) {
				t.Fatalf("ParseGPUs(%q)[%d].DeviceName = %q repeats", value, i, r.DeviceName)
			}
			seen.Insert(r.DeviceName)
		}
		if total > MaxGPUs {
			t.Fatalf("ParseGPUs(%q) asks for %d GPUs in all, over the limit of %d", value, total, MaxGPUs)
		}
	})
}
