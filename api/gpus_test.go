package api

import (
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// pathGPUs is where the gpus errors point.
var pathGPUs = field.NewPath("metadata", "annotations").Key(AnnotationGPUs)

func TestParseGPUs(t *testing.T) {
	const h200 = "nvidia.com/GH100_H200"
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
			value: h200 + "=2,nvidia.com/TU104GL_Tesla_T4=1,amd.com/gpu=16",
			want: []GPURequest{
				{DeviceName: h200, Count: 2},
				{DeviceName: "nvidia.com/TU104GL_Tesla_T4", Count: 1},
				{DeviceName: "amd.com/gpu", Count: 16},
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
		seen := sets.New[string]()
		for i, r := range reqs {
			if r.Count < 1 || r.Count > maxGPUsPerDevice {
				t.Fatalf("ParseGPUs(%q)[%d].Count = %d, want 1 to %d", value, i, r.Count, maxGPUsPerDevice)
			}
			if !strings.Contains(r.DeviceName, "/") || len(validation.IsQualifiedName(r.DeviceName)) > 0 {
				t.Fatalf("ParseGPUs(%q)[%d].DeviceName = %q, want a qualified resource name", value, i, r.DeviceName)
			}
			if seen.Has(r.DeviceName) {
				t.Fatalf("ParseGPUs(%q)[%d].DeviceName = %q repeats", value, i, r.DeviceName)
			}
			seen.Insert(r.DeviceName)
		}
	})
}
